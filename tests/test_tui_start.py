"""The TUI's start and pane switches (issue 18's speed work): the panes out of view mount their
widgets after the first frame, a key for one of them still shows it at once, the footer shows the
same keys whether it composed them or only showed and hid them, and the collector held during the
start comes back."""

from __future__ import annotations

import gc
import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from fibtui.core.workspace import open_workspace
from fibtui.ui.app import INITIAL_PANE, PANES, make_app
from fibtui.ui.panes.ncu import NcuPane
from tests.tui_helpers import settle


@pytest.fixture(autouse=True)
def _user_config(tmp_path_factory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(folder))
    return folder


async def test_only_the_pane_in_view_is_built_at_start_and_every_pane_is_once_settled(
    demo_ws: Path,
) -> None:
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.pane(INITIAL_PANE).built
        await settle(app, pilot)
        for pane in PANES:  # each built once and given the workspace once
            assert app.pane(pane.id).built, pane.id
        assert app._loaded == {p.id for p in PANES}
        assert app.focused is not None and app.pane(INITIAL_PANE) in app.focused.ancestors


async def test_a_pane_key_at_once_shows_that_pane_with_focus_in_it(demo_ws: Path) -> None:
    """Pressed before the panes out of view have been built (their turn comes after the Regimes
    data): the NCU pane is built on the spot, loads, and takes the focus."""
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("4")  # here (measured) the NCU pane is not built yet when the key comes
        await settle(app, pilot)
        ncu = app.query_one(NcuPane)
        assert app.active_pane == "ncu" and ncu.built and "ncu" in app._loaded
        assert app.focused is not None and ncu in app.focused.ancestors
        assert ncu.query_one("#ncu-reports").row_count >= 0  # its widgets are there


def _footer_line(app) -> str:
    update = app.screen._compositor.render_update(full=True)
    out = io.StringIO()
    Console(
        file=out,
        width=app.size.width,
        height=app.size.height,
        force_terminal=True,
        color_system="truecolor",
    ).print(update, end="")
    return out.getvalue().rsplit("\n", 1)[-1]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_footer_is_the_same_composed_or_shown_and_hidden(
    demo_ws: Path, size: tuple[int, int]
) -> None:
    """The first visit of a pane recomposes the footer (a key it has not composed yet), later ones
    only show and hide keys: the footer line, colours included, is the same each time."""
    app = make_app(open_workspace(demo_ws))
    first: dict[str, str] = {}
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for _ in range(2):
            for key in "345612":
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()
                line = _footer_line(app)
                assert first.setdefault(key, line) == line, key
        assert "q Quit" in Text.from_ansi(first["2"]).plain


def test_the_collector_held_at_start_comes_back() -> None:
    from fibtui.verbs.tui import hold_collector, release_collector

    before = gc.get_threshold()
    hold_collector()
    try:
        assert gc.get_threshold()[0] == 0
        hold_collector()  # twice: still one hold, released once
    finally:
        release_collector()
    assert gc.get_threshold() == before
    release_collector()  # nothing held: no change
    assert gc.get_threshold() == before
