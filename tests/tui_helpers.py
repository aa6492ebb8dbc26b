"""Data for TUI tests: a GPU-like run written through the real journal API (synthetic latencies,
labelled as such in the run's settings), NCU fixtures, a round summary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fibtui.core.dataset import Dataset
from fibtui.core.plan import build_header, snapshot, solution_from_config, solution_from_path
from fibtui.core.runs import JobResult, Journal, write_record
from fibtui.core.workspace import open_workspace

FIXTURES = Path(__file__).parent / "fixtures"


def synthetic_gpu_run(ws_root: Path, run_id: str = "20260101-000000_demo_local", speedup_small: float = 0.75) -> Path:
    """A complete paired run (baseline = the demo kernel, candidate = v2) with made-up latencies
    following the demo's measured shape (2 us + 0.27 us per batch row), for UI tests only."""
    ws = open_workspace(ws_root)
    ds = Dataset(ws.dataset_root)
    definition = ds.definition(ws.active.definition)
    folder = ws.archive_root / "runs" / run_id
    folder.mkdir(parents=True)
    base = solution_from_config(ws.active)
    base.name = "triton"
    cand = solution_from_path(ws_root / "candidates" / "v2_smallb_splitv", ws.active)
    refs = [snapshot(base, "baseline", folder), snapshot(cand, "candidate", folder)]
    uuids = ds.workloads(definition.name).uuids
    header = build_header(run_id, definition, ds, refs, uuids, 1, "local", "cupti", "cold", "all",
                          {"note": "synthetic latencies for UI tests"})
    header.started = "2026-01-01T00:00:00+00:00"
    journal = Journal(folder)
    journal.write_header(header)
    env = {"gpu": "NVIDIA H200", "backend": "local", "torch": "test", "triton": "test"}
    for job in header.jobs:
        b = job.axes["batch_size"]
        lat = (2.0 + 0.27 * b) / 1000
        if job.role == "candidate" and b <= 16:
            lat *= speedup_small
        journal.append_result(JobResult(uuid=job.uuid, axes=job.axes, solution=job.solution, role=job.role,
                                        repeat=job.repeat, status="PASSED", latency_ms=lat, reference_latency_ms=0.5,
                                        speedup=0.5 / lat, max_abs_error=1e-3, max_rel_error=1e-3,
                                        timing={"kind": "cupti", "l2_policy": "cold", "block_medians_ms": [lat] * 6,
                                                "environment": env}, started=header.started, finished=header.started,
                                        wall_s=0.1))
    journal.append_end("finished")
    write_record(folder)
    return folder


def copy_ncu_reports(ws_root: Path) -> Path:
    target = ws_root / "optimize_ops" / "benchmarks" / "ncu"
    target.mkdir(parents=True, exist_ok=True)
    for p in (FIXTURES / "ncu" / "h200_demo").iterdir():
        shutil.copy2(p, target / p.name)
    # one fixed time for every report, so the list order (newest first, then name) is the same on any clone
    for p in target.parent.rglob("*"):
        if p.is_file():
            os.utime(p, (1_700_000_000, 1_700_000_000))
    return target


def write_round(ws_root: Path) -> Path:
    docs = ws_root / "optimize_ops" / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    path = docs / "round_2026-01-01_smallb_splitv.md"
    path.write_text("# Round 2026-01-01: v2_smallb_splitv\n\n| band | before | after |\n|---|---:|---:|\n| batch_size=1 | 2.27 | 1.70 |\n\n## Decision\n\nPROMOTE\n")
    return path
