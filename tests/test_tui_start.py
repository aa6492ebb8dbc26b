"""The TUI's start and pane switches (issue 18's speed work): the panes out of view mount their
widgets after the first frame, a key for one of them still shows it at once, the footer shows the
same keys whether it composed them or only showed and hid them, and the collector held during the
start comes back."""

from __future__ import annotations

import gc
import io
import os
import pty
import subprocess
import sys
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
    from fibtui.ui.startup import hold_collector, release_collector

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


def _start_without_terminal(*argv: str, stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fibtui", *argv],
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )


def test_without_a_terminal_the_tui_says_so_in_one_line_and_exits_2(demo_ws: Path) -> None:
    """stdin on /dev/null made Textual's input thread read end-of-file in a loop: 100% of a core
    until killed. Now one line and exit 2, before Textual is imported."""
    proc = _start_without_terminal("--workspace", str(demo_ws))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "fibtui: error: the TUI needs a terminal, and standard input and standard error are not "
        "one here; run it in a terminal, or use a verb for scripts (fibtui --help)"
    ]


def test_a_terminal_for_keys_but_none_to_draw_on_is_refused_too(demo_ws: Path) -> None:
    primary, secondary = pty.openpty()
    try:
        proc = _start_without_terminal("tui", "--workspace", str(demo_ws), stdin=secondary)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 2
    assert "standard error is not one here" in proc.stderr and "Traceback" not in proc.stderr


def test_the_demo_verb_without_a_terminal_creates_the_workspace_then_refuses_the_tui(
    tmp_path: Path,
) -> None:
    proc = _start_without_terminal("demo", str(tmp_path / "demo"))
    assert proc.returncode == 2 and (tmp_path / "demo" / "config.toml").is_file()
    assert proc.stderr.splitlines()[-1].startswith("fibtui: error: the TUI needs a terminal")


def _found(gpu: bool):
    from fibtui.core.backends import Backends

    return Backends(
        gpu=gpu,
        gpu_names=["NVIDIA H200"] if gpu else [],
        gpu_ids=["0"] if gpu else [],
        ncu=None,
        interpreter=True,
        torch=True,
        triton=True,
        flashinfer_bench=False,
        modal_installed=False,
        modal_credentials=None,
    )


@pytest.mark.parametrize(("gpu", "backend"), [(True, "local"), (False, "interpreter")])
async def test_the_backend_is_chosen_in_a_worker_by_the_shared_default(
    demo_ws: Path, monkeypatch: pytest.MonkeyPatch, gpu: bool, backend: str
) -> None:
    """backends.detect runs nvidia-smi (up to 5 s): the TUI calls it from a thread, once, and takes
    the CLI's default (runners.registry.default_backend)."""
    import threading

    from fibtui.core import backends

    threads = []

    def detect(probe_gpu: bool = True):
        threads.append(threading.current_thread())
        return _found(gpu)

    monkeypatch.setattr(backends, "detect", detect)
    app = make_app(open_workspace(demo_ws))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert (
            app.run_control.gates.backend_name == backend
            and app.run_control.gates.gate_options("rep").backend == backend
        )
        assert len(threads) == 1 and threads[0] is not threading.main_thread()


async def test_a_gate_key_before_the_backend_is_known_waits_for_it_and_keys_still_work(
    demo_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from fibtui.core import backends

    release = threading.Event()

    def slow_detect(probe_gpu: bool = True):
        release.wait(30)  # nvidia-smi taking its time
        return _found(False)

    monkeypatch.setattr(backends, "detect", slow_detect)
    app = make_app(open_workspace(demo_ws))
    app.run_control.note_acknowledged = True
    started = []
    monkeypatch.setattr(
        app.run_control, "start", lambda options, label: started.append((options, label))
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("3")  # the event loop is free: a pane key still acts at once
        await pilot.pause()
        assert (
            app.active_pane == "runs" and not started and app.run_control.gates.backend_name is None
        )
        release.set()
        await settle(app, pilot)
        assert len(started) == 1 and started[0][0].backend == "interpreter"


async def test_a_sweep_counts_the_workloads_off_the_event_loop(
    demo_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from fibtui.core.dataset import Dataset
    from fibtui.ui.screens.confirm import ConfirmScreen

    app = make_app(open_workspace(demo_ws))
    app.run_control.note_acknowledged = True
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        threads = []
        workloads = Dataset.workloads

        def counted(self, name):
            threads.append(threading.current_thread())
            return workloads(self, name)

        monkeypatch.setattr(Dataset, "workloads", counted)
        await pilot.press("s")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)  # 50 workloads: it asks first
        assert threads and threading.main_thread() not in threads


async def test_a_failed_backend_detection_shows_the_error_and_the_next_key_asks_again(
    demo_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibtui.core import backends
    from fibtui.ui.screens.error import ErrorScreen

    calls = []

    def detect(probe_gpu: bool = True):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("nvidia-smi went away")
        return _found(False)

    monkeypatch.setattr(backends, "detect", detect)
    app = make_app(open_workspace(demo_ws))
    app.run_control.note_acknowledged = True
    started = []
    monkeypatch.setattr(
        app.run_control, "start", lambda options, label: started.append(options.backend)
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)  # the first detection (after the first data) fails
        assert isinstance(app.screen, ErrorScreen) and not started
        await pilot.press("escape")
        await pilot.press("g")
        await settle(app, pilot)
        assert started == ["interpreter"] and len(calls) == 2


async def test_a_sweep_over_an_unreadable_workloads_file_says_why(demo_ws: Path) -> None:
    from fibtui.ui.screens.error import ErrorScreen

    app = make_app(open_workspace(demo_ws))
    app.run_control.note_acknowledged = True
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        wl = next((demo_ws / "dataset" / "workloads").rglob("*.jsonl"))
        wl.write_text("{not json\n")
        await pilot.press("s")
        await settle(app, pilot)
        assert isinstance(app.screen, ErrorScreen) and app.screen._title == "cannot plan the sweep"
        assert str(wl) in app.screen._reason
