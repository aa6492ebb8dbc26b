"""The CPU quick gate (issue 38 item 4, fibtui.core.quick): the smallest workload of each band,
the cheapest bands first within an estimated-time budget, the rest named."""

from __future__ import annotations

from pathlib import Path

import pytest

from fibtui.core import quick
from fibtui.core.plan import workspace_regimes
from fibtui.core.workspace import open_workspace
from tests.conftest import REPO

DEMOS = {"gdn": REPO / "kernels" / "gdn_decode_demo", "dsa": REPO / "kernels" / "dsa_topk_demo"}


@pytest.fixture(scope="module")
def reports():
    return {name: workspace_regimes(open_workspace(path)).report for name, path in DEMOS.items()}


@pytest.mark.parametrize("demo", sorted(DEMOS))
def test_both_demos_gate_within_the_budget_and_name_what_they_leave_out(reports, demo) -> None:
    report = reports[demo]
    gate = quick.choose(report, budget_s=20.0, solutions=2)
    assert gate.workloads and gate.estimate_s <= 20.0
    bands = {b.name for b in report.bands}
    # every band is either gated (by its smallest workload) or named as left out
    assert set(gate.bands) | {e.band for e in gate.excluded} == bands
    assert not set(gate.bands) & {e.band for e in gate.excluded}
    assert all(e.estimate_s > 0 for e in gate.excluded)
    for e in gate.excluded:
        assert e.band in gate.summary() and e.uuid[:8] in gate.summary()
    # the chosen workload of a band is its smallest one
    smallest = quick.choose(report, budget_s=1e9)
    assert set(gate.workloads) <= set(smallest.workloads)
    assert len(smallest.workloads) == len(bands) and not smallest.excluded


def test_the_gdn_demo_leaves_out_its_batch_48_and_64_bands(reports) -> None:
    gate = quick.choose(reports["gdn"])
    left_out = {e.band for e in gate.excluded}
    assert {"batch_size=48", "batch_size=64"} <= left_out
    assert gate.bands[0] == "batch_size=1"


def test_past_job_times_replace_the_guess(reports) -> None:
    report = reports["gdn"]
    every = quick.choose(report, budget_s=1e9)
    # measured: every band's smallest workload took 0.5 s a job: all nine fit in 20 s (9 x 2 x 0.5)
    history = quick.History({u: 0.5 for u in every.workloads}, None, "measured")
    gate = quick.choose(report, history, budget_s=20.0, solutions=2)
    assert gate.workloads == every.workloads and gate.estimate_s == pytest.approx(9.0)
    # per unit of size only: 0.01 s per batch row, batch 64 is 0.64 s a job
    scaled = quick.choose(report, quick.History({}, 0.01), budget_s=20.0)
    assert not scaled.excluded


def test_the_cheapest_band_is_gated_even_over_the_budget(reports) -> None:
    gate = quick.choose(reports["dsa"], budget_s=0.001)
    assert len(gate.workloads) == 1 and gate.estimate_s > 0.001


def test_history_reads_interpreter_runs_only(tmp_path: Path) -> None:
    import shutil

    from tests.tui_helpers import synthetic_gpu_run

    root = tmp_path / "demo"
    shutil.copytree(DEMOS["gdn"], root, ignore=shutil.ignore_patterns("__pycache__"))
    synthetic_gpu_run(root, aa_history=False)  # a cupti run: not the interpreter's times
    ws = open_workspace(root)
    assert quick.read_history(ws.archive_root, ws.active.definition).per_workload == {}
    gate = quick.quick_gate_for(ws)
    assert gate.workloads and gate.estimate_s <= quick.DEFAULT_BUDGET_S
