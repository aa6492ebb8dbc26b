"""Every pane at 80x24 whole (issue 38 item 6): the footer keeps ? and q, the header elides its
middle, long band names keep their values, z maximizes the focused panel, escape on the
no-workspace dialog goes back, TERM=dumb is warned about, NO_COLOR series differ by marker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable

from fibtui.core.names import short_band_name
from fibtui.core.workspace import open_workspace
from fibtui.ui.app import PANES, PaneFooter, make_app
from fibtui.ui.panes.base import elide_middle, series_markers
from fibtui.ui.screens.no_workspace import NoWorkspaceScreen
from fibtui.ui.startup import terminal_warning
from tests.conftest import DEMO
from tests.tui_helpers import copy_ncu_reports, settle, synthetic_gpu_run, write_round


def test_the_middle_is_elided_and_both_ends_kept() -> None:
    text = "v2_smallb_splitv vs triton · demo_gdn_decode_qk4_v8_d128_k_last · my-workspace"
    short = elide_middle(text, 40)
    assert len(short) == 40 and "…" in short
    assert short.startswith("v2_smallb_splitv") and short.endswith("my-workspace")
    assert elide_middle("short", 40) == "short" and elide_middle(text, 1) == "…"


def test_long_band_names_keep_every_value() -> None:
    assert short_band_name("batch_size=16, max_num_pages=8, num_pages=128") == "bs=16 mnp=8 np=128"
    assert short_band_name("batch_size=16, max_num_pages=4, num_pages=96") == "bs=16 mnp=4 np=96"
    assert short_band_name("batch_size=1") == "batch_size=1"  # short names are kept whole


def test_no_color_series_differ_by_marker(monkeypatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert series_markers(2) == ["dot", "dot"]
    monkeypatch.setenv("NO_COLOR", "1")
    markers = series_markers(3)
    assert len(set(markers)) == 3


def test_term_dumb_is_warned_about() -> None:
    assert "TERM=dumb" in (terminal_warning("dumb") or "")
    assert terminal_warning("") is not None
    assert terminal_warning("xterm-256color") is None


@pytest.fixture
def demo(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("__pycache__"))
    synthetic_gpu_run(root)
    copy_ncu_reports(root)
    write_round(root)
    return root


def _footer_keys(app) -> list[str]:
    footer = app.query_one(PaneFooter)
    return [w.key for w in footer._key_widgets if w.display]


async def test_at_80x24_every_pane_keeps_question_mark_and_q_and_z_maximizes(demo) -> None:
    app = make_app(open_workspace(demo))
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for pane in PANES:
            await pilot.press(pane.key)
            await settle(app, pilot)
            keys = _footer_keys(app)
            assert "question_mark" in keys and "q" in keys, (pane.id, keys)
            footer = app.query_one(PaneFooter)
            used = sum(w.size.width for w in footer._key_widgets if w.display)
            assert used <= 80, (pane.id, used)
        # the header shows both ends of its line
        assert app.sub_title.endswith(demo.name) and "…" in app.sub_title
        # z maximizes History's summary, z again restores the layout
        await pilot.press("6")
        await settle(app, pilot)
        doc = app.query_one("#history-doc")
        doc.focus()
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is doc
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is None
        # and NCU's table (the diff), restored by escape
        await pilot.press("4")
        await settle(app, pilot)
        table = app.query_one("#ncu-table", DataTable)
        table.focus()
        await pilot.press("z")
        await pilot.pause()
        assert app.screen.maximized is table
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen.maximized is None


async def test_escape_on_the_no_workspace_dialog_goes_back(tmp_path: Path) -> None:
    app = make_app(None, cwd=str(tmp_path), demo_dir=str(tmp_path / "unused"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, NoWorkspaceScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, NoWorkspaceScreen)
        assert any("Open the bundled demo" in text for text, _, _ in app.palette_commands())
        await pilot.press("q")
    assert app.return_code == 0 and not (tmp_path / "unused").exists()


async def test_a_theme_switch_restyles_the_hidden_panes_when_they_are_shown(demo) -> None:
    """ctrl+t restyles the pane in view at once and each hidden pane as it is shown (issue 38
    item 7): what each shows is what Textual's full restyle gives."""
    from textual.css.stylesheet import Stylesheet

    app = make_app(open_workspace(demo))
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for pane in PANES:  # every pane built
            await pilot.press(pane.key)
            await settle(app, pilot)
        await pilot.press("2")
        await settle(app, pilot)
        await pilot.press("ctrl+t")
        await settle(app, pilot)
        assert app._css_stale == {"recon", "runs", "ncu", "promotion", "history"}
        await pilot.press("5")
        await settle(app, pilot)
        assert "promotion" not in app._css_stale
        lazy = {
            w: (str(w.styles.background), str(w.styles.color))
            for w in app.query("#bands, #paired-runs, #verdict-box")
        }
        Stylesheet.update(app.stylesheet, app)  # Textual's full restyle, for comparison
        full = {w: (str(w.styles.background), str(w.styles.color)) for w in lazy}
        assert lazy == full
