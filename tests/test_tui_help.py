"""``?`` at 80x24 (issue 38 item 3): every key is in the list, grouped by pane, the list scrolls
to its last key, and ``/`` filters it."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Input

from fibtui.core.workspace import open_workspace
from fibtui.ui.app import FibApp, make_app
from fibtui.ui.screens.help import HelpKeysScreen, matches
from tests.runner_helpers import make_tiny_workspace


def test_the_filter_matches_every_word_anywhere_in_a_row() -> None:
    row = ("Runs", "t", "Retry", "Run the failed jobs again", "run.retry")
    assert matches(row, "retry") and matches(row, "RUNS failed") and not matches(row, "sweep")


async def test_help_at_80x24_lists_every_key_by_pane_scrolls_and_filters(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    app = make_app(open_workspace(make_tiny_workspace(tmp_path / "ws")))
    app.animation_level = "none"
    every = {b.id for b in FibApp.BINDINGS if b.id}
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HelpKeysScreen)
        assert every <= set(screen.shown_ids)
        table = screen.query_one("#help-table", DataTable)
        groups = [
            str(table.get_row_at(i)[0])
            for i in range(table.row_count)
            if not table.get_row_at(i)[1]
        ]
        assert groups[:2] == ["Panes", "Everywhere"] and "Promotion" in groups
        # the list is taller than the screen, and the last key can be reached
        assert table.virtual_size.height > table.size.height
        assert table.region.bottom <= 24
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.scroll_y == table.max_scroll_y > 0
        # / filters; escape clears the filter, then closes
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        for ch in "theme":
            await pilot.press(ch)
        await pilot.pause()
        assert screen.shown_ids == ["app.theme"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HelpKeysScreen) and every <= set(screen.shown_ids)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpKeysScreen)
