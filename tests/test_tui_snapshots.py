"""Snapshots of every pane under a fixed test config: fixed data (a synthetic GPU run, the real
H200 NCU reports of the demo, a round summary), no animations, no cursor blink, no watchers, the
pinned Textual version. Update after an intended change with: ./scripts/test --snapshot-update"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from fibtui.core.workspace import open_workspace
from fibtui.ui.app import make_app
from tests.conftest import DEMO, REPO
from tests.tui_helpers import copy_ncu_reports, synthetic_gpu_run, write_round


@pytest.fixture
def snap_ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setattr(Input, "cursor_blink", False)
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("__pycache__"))
    synthetic_gpu_run(root)
    copy_ncu_reports(root)
    write_round(root)
    return root


def app_for(root: Path):
    app = make_app(open_workspace(root))
    app.animation_level = "none"
    # a toast lives 5 s by default: on a slow CI machine it could be gone before the snapshot
    app.NOTIFICATION_TIMEOUT = 3600
    return app


async def _settle(pilot) -> None:
    """Until the screen stops changing: every worker done, the message queue empty, and the same
    screen twice in a row (a pane draws some parts a frame after others, and a table fits its
    columns after its rows: on a loaded machine that can take more than a few pauses)."""
    import re

    from textual.worker import WorkerFailed

    before = None
    for _ in range(40):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerFailed:
            pass
        await pilot.pause()
        shot = re.sub(r"terminal-\d+", "terminal", pilot.app.export_screenshot())
        if shot == before:
            return
        before = shot


def _before(*keys: str, select_ncu: bool = False):
    async def run(pilot) -> None:
        await _settle(pilot)
        for key in keys:
            await pilot.press(key)
            await _settle(pilot)
        if select_ncu:
            table = pilot.app.query_one("#ncu-reports", DataTable)
            names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            table.focus()
            table.move_cursor(row=names.index("demo_v1_b1_b64.csv"))
            await _settle(pilot)
            await pilot.press("b")
            table.move_cursor(row=names.index("demo_v2_b1_b64.csv"))
            await _settle(pilot)

    return run


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("1", "recon"),
        ("2", "regimes"),
        ("3", "runs"),
        ("4", "ncu"),
        ("5", "promotion"),
        ("6", "history"),
    ],
)
def test_pane_snapshot(snap_compare, snap_ws: Path, key: str, name: str) -> None:
    """Every pane at 80x24, the size of a terminal over SSH (issue 38 item 6)."""
    assert snap_compare(app_for(snap_ws), terminal_size=(80, 24), run_before=_before(key))


def test_ncu_diff_snapshot(snap_compare, snap_ws: Path) -> None:
    assert snap_compare(
        app_for(snap_ws), terminal_size=(80, 24), run_before=_before("4", select_ncu=True)
    )


def test_runs_pane_at_80x24(snap_compare, snap_ws: Path) -> None:
    assert snap_compare(app_for(snap_ws), terminal_size=(80, 24), run_before=_before("3"))


def test_keys_list_snapshot(snap_compare, snap_ws: Path) -> None:
    assert snap_compare(
        app_for(snap_ws), terminal_size=(80, 24), run_before=_before("question_mark")
    )


def test_the_snapshot_run_has_every_field_a_real_run_has(snap_ws: Path) -> None:
    """The synthetic run the Runs pane is frozen with holds what a real H200 run records (the
    committed journals under optimize_ops/runs/): a field missing here would freeze the pane
    showing "None blocks" or "driver -" for data no real run lacks."""

    def first_result(journal: Path) -> dict:
        return next(
            obj
            for obj in map(json.loads, journal.read_text().splitlines())
            if obj.get("kind") == "result"
        )

    real_journals = sorted((REPO / "optimize_ops" / "runs").glob("*/journal.jsonl"))
    assert real_journals, "no committed real run to compare with"
    fake = first_result(next((snap_ws / "optimize_ops" / "runs").glob("*/journal.jsonl")))
    for journal in real_journals:
        real = first_result(journal)
        where = journal.parent.name
        assert set(real) <= set(fake), (where, set(real) - set(fake))
        assert set(real["timing"]) <= set(fake["timing"]), (
            where,
            set(real["timing"]) - set(fake["timing"]),
        )
        env_real, env_fake = real["timing"]["environment"], fake["timing"]["environment"]
        assert set(env_real) <= set(env_fake), (where, set(env_real) - set(env_fake))
    t = fake["timing"]
    assert t["blocks"] == len(t["block_medians_ms"]) and t["calls_per_block"] > 0
    assert None not in (t["worker_device"], t["environment"]["driver"], t["environment"]["gpu"])
