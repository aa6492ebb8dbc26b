"""Past verdicts (issue 38 item 2): every paired run listed newest first with its device, timing
kind, scope and verdict; a CPU gate never hides a GPU verdict; a picked run (in the list or from
History) shows its own verdict and per-band table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

from fibtui.core import past_verdicts
from fibtui.core.workspace import open_workspace
from fibtui.ui.app import make_app
from tests.conftest import DEMO
from tests.tui_helpers import cpu_copy_of_run, settle, synthetic_gpu_run

GPU_RUN = "20260101-000000_demo_local"
CPU_RUN = "20260102-000000_demo_interpreter"


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("__pycache__"))
    cpu_copy_of_run(synthetic_gpu_run(root), CPU_RUN)  # the CPU gate is the newer one
    return root


def test_paired_runs_are_listed_newest_first_and_the_gpu_verdict_is_shown(two_runs) -> None:
    runs = past_verdicts.paired_runs(open_workspace(two_runs))
    assert [r.run_id for r in runs] == [CPU_RUN, GPU_RUN]
    cpu, gpu = runs
    assert (cpu.device, cpu.timing_kind, cpu.gpu) == ("CPU", "cpu-interpreter", False)
    assert (gpu.device_short, gpu.timing_kind, gpu.scope) == ("H200", "cupti", "full")
    shown = past_verdicts.default_shown(runs)
    assert shown.run is gpu and "GPU verdict" in shown.why and "1 newer CPU gate" in shown.why
    assert past_verdicts.default_shown([cpu]).run is cpu
    assert past_verdicts.default_shown([]).run is None


async def test_the_promotion_pane_lists_every_paired_run_and_opens_a_picked_one(two_runs) -> None:
    app = make_app(open_workspace(two_runs))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        pane = app.pane("promotion")
        table = pane.query_one("#paired-runs", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [r[0] for r in rows] == [CPU_RUN, GPU_RUN]
        assert rows[1][1:] == ["H200", "cupti", "full", "PROMOTE"]
        assert rows[0][1] == "CPU" and rows[0][2] == "CPU interp"
        # the newer CPU gate does not hide the GPU verdict, and the pane says which it shows
        assert pane.run_id == GPU_RUN
        box = str(pane.query_one("#verdict").render())
        assert "verdict PROMOTE" in box and "newest GPU verdict" in box
        assert pane.query_one("#bands", DataTable).row_count > 0
        # picking the CPU gate shows its own verdict
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(app, pilot)
        assert pane.run_id == CPU_RUN and "PROMOTE" not in str(pane.query_one("#verdict").render())
        # History links to the same verdicts
        await pilot.press("6")
        await settle(app, pilot)
        rounds = app.pane("history").query_one("#history-rounds", DataTable)
        keys = [
            str(rounds.coordinate_to_cell_key((i, 0)).row_key.value)
            for i in range(rounds.row_count)
        ]
        assert f"run:{GPU_RUN}" in keys
        rounds.focus()
        rounds.move_cursor(row=keys.index(f"run:{GPU_RUN}"))
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.active_pane == "promotion" and pane.run_id == GPU_RUN
