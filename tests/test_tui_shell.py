"""Pilot tests of the TUI shell: workloads load in a worker, keys switch panes, ? lists keys."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, TabbedContent

from fibtui.core.workspace import open_workspace
from fibtui.ui.app import PANES, make_app
from fibtui.ui.messages import DefinitionLoaded
from fibtui.ui.panes.missing import MissingCore
from fibtui.ui.screens.help import HelpKeysScreen
from fibtui.ui.screens.no_workspace import NoWorkspaceScreen


async def test_shell_shows_the_workloads_and_switches_panes(demo_ws: Path) -> None:
    messages = []
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any(isinstance(m, DefinitionLoaded) for m in messages)
        table = app.query_one("#workloads-table", DataTable)
        assert table.row_count == 50
        assert "demo_gdn_decode_qk4_v8_d128_k_last" in app.sub_title
        tabs = app.query_one("#main-tabs", TabbedContent)
        for pane in PANES:
            await pilot.press(pane.key)
            assert tabs.active == pane.id
        # Panes whose core is missing say so instead of faking it.
        assert len(app.query(MissingCore)) == 5
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpKeysScreen)
        help_rows = app.screen.query_one(DataTable)
        assert help_rows.row_count >= 8
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpKeysScreen)
        await pilot.press("q")
    assert app.return_code == 0


async def test_shell_reports_a_broken_dataset_instead_of_crashing(demo_ws: Path) -> None:
    wl = next((demo_ws / "dataset" / "workloads").rglob("*.jsonl"))
    wl.write_text('{"definition": "x", "workl\n')
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        summary = str(app.query_one("#regimes-summary").render())
        assert "not valid JSON" in summary and str(wl) in summary


async def test_no_workspace_offers_the_demo(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo-here"
    app = make_app(None, cwd=str(tmp_path), demo_dir=str(demo_dir))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, NoWorkspaceScreen)
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.workspace is not None and app.workspace.root == demo_dir.resolve()
        assert app.query_one("#workloads-table", DataTable).row_count == 50


async def test_no_workspace_quit(tmp_path: Path) -> None:
    app = make_app(None, cwd=str(tmp_path), demo_dir=str(tmp_path / "unused"))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("q")
    assert app.return_code == 0 and not (tmp_path / "unused").exists()
