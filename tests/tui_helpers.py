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
# two real A/A sessions of the demo definition on the H200 (optimize_ops/benchmarks/h200_20261129)
BUNDLED_AA = Path(__file__).resolve().parent.parent / "optimize_ops" / "benchmarks" / "aa.jsonl"


async def settle(app, pilot) -> None:
    """Wait for every worker (a failed one is the app's business: its error dialog)."""
    from textual.worker import WorkerFailed

    for _ in range(3):
        try:
            await app.workers.wait_for_complete()
        except WorkerFailed:
            pass
        await pilot.pause()


def synthetic_gpu_run(
    ws_root: Path,
    run_id: str = "20260101-000000_demo_local",
    speedup_small: float = 0.75,
    aa_history: bool = True,
) -> Path:
    """A complete paired run (baseline = the demo kernel, candidate = v2) with made-up latencies
    following the demo's measured shape (2 us + 0.27 us per batch row), for UI tests only.

    One repeat carries no noise estimate of its own; with ``aa_history`` the workspace gets the
    bundled H200 A/A sessions of the same (definition, device, timing kind), as a workspace that
    ran ``compare --aa`` on that GPU has, so a verdict can be confident."""
    ws = open_workspace(ws_root)
    if aa_history:
        target = ws.archive_root / "benchmarks" / "aa.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(BUNDLED_AA, target)
    ds = Dataset(ws.dataset_root)
    definition = ds.definition(ws.active.definition)
    folder = ws.archive_root / "runs" / run_id
    folder.mkdir(parents=True)
    base = solution_from_config(ws.active)
    base.name = "triton"
    cand = solution_from_path(ws_root / "candidates" / "v2_smallb_splitv", ws.active)
    refs = [snapshot(base, "baseline", folder), snapshot(cand, "candidate", folder)]
    uuids = ds.workloads(definition.name).uuids
    # the evaluator and tolerances a real run's engine settings record (fibtui.runners.session)
    header = build_header(
        run_id,
        definition,
        ds,
        refs,
        uuids,
        1,
        "local",
        "cupti",
        "cold",
        "all",
        {
            "note": "synthetic latencies for UI tests",
            "engine": {"atol": 0.01, "rtol": 0.01, "matched_ratio": None, "evaluator": "default"},
        },
    )
    header.started = "2026-01-01T00:00:00+00:00"
    journal = Journal(folder)
    journal.write_header(header)
    # what fibtui.worker.env.describe records on the H200 (optimize_ops/runs/*/journal.jsonl)
    env = {
        "backend": "local",
        "device": "cuda:0",
        "torch": "2.11.0+cu130",
        "python": "3.12.3",
        "host": "vm",
        "triton_interpret": False,
        "triton": "3.6.0",
        "gpu": "NVIDIA H200",
        "sm_count": 132,
        "l2_bytes": 62914560,
        "memory_bytes": 150109880320,
        "capability": "9.0",
        "cuda": "13.0",
        "driver": "580.159.04",
        "sm_clock_mhz": 1980,
        "sm_clock_max_mhz": 1980,
        "cuda_visible_devices": "0",
    }
    blocks, calls_per_block = 6, 20
    for job in header.jobs:
        b = job.axes["batch_size"]
        lat = (2.0 + 0.27 * b) / 1000
        if job.role == "candidate" and b <= 16:
            lat *= speedup_small
        # the timing fields of fibtui.worker.timing (Measured.to_json) plus where the runner ran it
        timing = {
            "kind": "cupti",
            "l2_policy": "cold",
            "blocks": blocks,
            "calls_per_block": calls_per_block,
            "block_medians_ms": [lat] * blocks,
            "busy_ms": lat,
            "kernels_per_call": 1.0,
            "kernel_names": ["_gdn_decode_kernel"],
            "sm_clocks_mhz": [1980] * blocks,
            "redone_blocks": 0,
            "environment": env,
            "reference_cache": {"hits": 1, "misses": 1},
            "slot": 0,
            "worker_device": "cuda:0",
        }
        journal.append_result(
            JobResult(
                uuid=job.uuid,
                axes=job.axes,
                solution=job.solution,
                role=job.role,
                repeat=job.repeat,
                status="PASSED",
                latency_ms=lat,
                reference_latency_ms=0.5,
                speedup=0.5 / lat,
                max_abs_error=1e-3,
                max_rel_error=1e-3,
                timing=timing,
                started=header.started,
                finished=header.started,
                wall_s=0.1,
            )
        )
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
    path.write_text(
        "# Round 2026-01-01: v2_smallb_splitv\n\n| band | before | after |\n|---|---:|---:|\n| batch_size=1 | 2.27 | 1.70 |\n\n## Decision\n\nPROMOTE\n"
    )
    return path


def cpu_copy_of_run(folder: Path, run_id: str) -> Path:
    """A copy of a paired run as if timed on the CPU interpreter (a newer CPU gate beside a GPU
    verdict): the header's backend and timing kind and each row's environment say so."""
    import json

    from fibtui.core.runs import write_record

    target = folder.parent / run_id
    shutil.copytree(folder, target)
    out = []
    for i, line in enumerate((target / "journal.jsonl").read_text().splitlines()):
        obj = json.loads(line)
        if i == 0:
            obj.update(run_id=run_id, backend="interpreter", timing_kind="cpu-interpreter")
            obj["l2_policy"] = "n/a"
        elif obj.get("kind") == "result":
            env = obj["timing"]["environment"]
            env.update(gpu=None, triton_interpret=True, cpu="x86_64")
            obj["timing"]["kind"] = "cpu-interpreter"
        out.append(json.dumps(obj))
    (target / "journal.jsonl").write_text("\n".join(out) + "\n")
    (target / "run.json").unlink(missing_ok=True)
    write_record(target)
    return target
