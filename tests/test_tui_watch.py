"""Watch mode: a save reruns the paired gate; a newer save cancels the gate in flight; a syntax
error is a compile failure, not a crash."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, RunFinished
from fibtui.ui.app import make_app
from fibtui.ui.panes.runs import RunsPane
from tests.runner_helpers import BODIES, GOOD_TRITON, PY_TEMPLATE, make_tiny_workspace

pytestmark = pytest.mark.slow


async def wait_until(pilot, condition, timeout: float = 60.0) -> None:
    """Wait for something outside the app (a file event, a worker process) with a deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await pilot.pause(0.05)


def run_events(events) -> list:
    return list({id(m): m.event for m in events if isinstance(m, RunsPane.RunEvent)}.values())


async def test_save_reruns_the_gate_and_a_syntax_error_is_a_compile_failure(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    kernel = root / "solution" / "triton" / "kernel.py"
    events: list = []
    app = make_app(open_workspace(root))
    app.note_acknowledged = True
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await pilot.press("w")
        assert app.watch_mode and "WATCHING" in app.sub_title
        await wait_until(pilot, lambda: app._warm is not None and app._warm.count() == 1)
        kernel.write_text(GOOD_TRITON + "\n# saved\n")
        await wait_until(pilot, lambda: any(isinstance(e, RunFinished) for e in run_events(events)))
        assert len(app.watch_latencies_ms) == 1
        done = [e for e in run_events(events) if isinstance(e, JobFinished)]
        assert [e.result.status for e in done] == ["PASSED", "PASSED"]
        # a broken save: the gate runs and reports COMPILE_ERROR; the app keeps going
        kernel.write_text(PY_TEMPLATE.format(body=BODIES["syntax"]))
        await wait_until(pilot, lambda: sum(isinstance(e, RunFinished) for e in run_events(events)) == 2)
        done = [e for e in run_events(events) if isinstance(e, JobFinished)][2:]
        assert {e.result.status for e in done} == {"COMPILE_ERROR"}
        assert "SyntaxError" in done[0].result.error
        await pilot.press("w")
        assert not app.watch_mode


async def test_a_newer_save_cancels_the_gate_in_flight(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4, 5, 6), kernel="slow_py")
    kernel = root / "solution" / "triton" / "kernel.py"
    events: list = []
    app = make_app(open_workspace(root))
    app.note_acknowledged = True
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await pilot.press("w")
        await wait_until(pilot, lambda: app._warm is not None and app._warm.count() == 1)
        kernel.write_text(kernel.read_text() + "\n# first save\n")
        await wait_until(pilot, lambda: any(isinstance(e, JobFinished) for e in run_events(events)))
        kernel.write_text(kernel.read_text() + "\n# second save\n")
        await wait_until(pilot, lambda: sum(isinstance(e, RunFinished) for e in run_events(events)) == 2, timeout=120)
        states = [e.state for e in run_events(events) if isinstance(e, RunFinished)]
        assert states == ["cancelled", "complete"]
