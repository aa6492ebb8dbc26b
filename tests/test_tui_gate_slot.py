"""One gate at a time (issue 38 item 1): the run slot is claimed on the UI thread, so a burst of
saves never runs two gates, and the last save's gate is the one that gives a verdict. The
runner is a stand-in (no worker process): the run's real journal and record, events posted
from its thread, a gate that lasts until it is cancelled or told to end."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from fibtui.core.runs import JobResult, Journal, write_record
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, RunFinished, RunStarted
from fibtui.services import runs as run_service
from fibtui.ui import messages
from fibtui.ui.app import make_app
from tests.runner_helpers import make_tiny_workspace


class Gates:
    """What the stand-in runners did: (start|end, run id) in order, and how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []
        self.running = 0
        self.most_at_once = 0
        #: set by the test: gates not cancelled end (the last save's gate gives its verdict)
        self.finish = threading.Event()
        #: run id -> how its gate ended: "cancelled" or "finished"
        self.ended: dict[str, str] = {}
        #: the first job of each gate ends COMPILE_ERROR with this error (None: no job ends)
        self.compile_error: str | None = None


def stand_in_runner(gates: Gates, prepared):
    class Runner:
        def run(self, on_event, cancel):
            with gates.lock:
                gates.running += 1
                gates.most_at_once = max(gates.most_at_once, gates.running)
                gates.log.append(("start", prepared.run_id))
            try:
                on_event(RunStarted(prepared.header, str(prepared.folder), False, 0))
                if gates.compile_error is not None:
                    job = prepared.header.jobs[0]
                    result = JobResult(
                        uuid=job.uuid,
                        axes=job.axes,
                        solution=job.solution,
                        role=job.role,
                        repeat=job.repeat,
                        status="COMPILE_ERROR",
                        error=gates.compile_error,
                    )
                    Journal(prepared.folder).append_result(result)
                    total = len(prepared.header.jobs)
                    on_event(JobFinished(result, 1, total, 0, 1, None))
                while not cancel.is_set() and not gates.finish.is_set():
                    time.sleep(0.01)
                how = "cancelled" if cancel.is_set() else "finished"
                gates.ended[prepared.run_id] = how
                Journal(prepared.folder).append_end(how)
                record = write_record(prepared.folder)
                on_event(RunFinished(record.state, record))
                return record
            finally:
                with gates.lock:
                    gates.running -= 1
                    gates.log.append(("end", prepared.run_id))

    return Runner()


@pytest.fixture
def gated_app(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    gates = Gates()
    real = run_service.prepare_run

    def prepare(ws, options):
        prepared = real(ws, options)
        prepared.runner = stand_in_runner(gates, prepared)
        return prepared

    real_resume = run_service.prepare_resume

    def resume(ws, run_id, options=None):
        prepared = real_resume(ws, run_id, options)
        prepared.runner = stand_in_runner(gates, prepared)
        return prepared

    monkeypatch.setattr(run_service, "prepare_run", prepare)
    monkeypatch.setattr(run_service, "prepare_resume", resume)
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    app.run_control.gates.backend_name = "interpreter"
    monkeypatch.setattr(app.run_control.gates, "warm_workers", lambda: None)
    return app, gates


async def wait_for(pilot, condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await pilot.pause(0.02)


async def test_a_burst_of_saves_runs_one_gate_at_a_time_and_the_last_one_gives_the_verdict(
    gated_app,
) -> None:
    app, gates = gated_app
    events: list = []
    rng = random.Random(38)
    async with app.run_test(size=(80, 24), message_hook=events.append) as pilot:
        runs = app.pane("runs")
        await wait_for(pilot, lambda: runs.built)
        app.run_control.watch.on = True
        kernel = str(app.workspace.active.source_dir / "kernel.py")
        for _ in range(10):
            app.post_message(messages.WatchFired([kernel], time.monotonic()))
            await pilot.pause(rng.uniform(0.05, 0.3))
            # decided on the UI thread at once: a save always finds the slot taken
            assert runs.busy
            assert gates.most_at_once <= 1
        gates.finish.set()
        await wait_for(pilot, lambda: not runs.busy and not app.run_control.watch.pending_gate)
        await wait_for(pilot, lambda: gates.log and gates.log[-1][0] == "end")
    assert app.run_control.watch.saves == 10
    assert gates.most_at_once == 1
    # strictly alternating: each gate ended before the next began
    assert [kind for kind, _ in gates.log] == ["start", "end"] * (len(gates.log) // 2)
    finished = [
        m.run_id
        for m in events
        if isinstance(m, messages.RunEvent) and isinstance(m.event, RunFinished)
    ]
    last = gates.log[-1][1]
    assert sorted(set(finished)) == sorted(gates.ended)  # each gate's end reached the pane
    # every earlier gate was cancelled; the last save's gate alone ran to its end
    assert gates.ended[last] == "finished"
    assert all(how == "cancelled" for run_id, how in gates.ended.items() if run_id != last)
    # a message is seen once per node it bubbles through: each counted once
    verdicts = {id(m): m for m in events if isinstance(m, messages.VerdictReady)}.values()
    assert [v.run_id for v in verdicts if v.run_id == last] == [last]


async def test_a_cancel_while_the_gate_is_being_started_ends_it_before_it_runs(
    gated_app, monkeypatch
) -> None:
    app, gates = gated_app
    async with app.run_test(size=(80, 24)) as pilot:
        runs = app.pane("runs")
        await wait_for(pilot, lambda: runs.built)
        claimed = runs.claim()
        assert claimed is not None and runs.busy
        assert runs.claim() is None  # taken: a second start is refused on the UI thread
        assert runs.cancel()
        runs.start(app.run_control.gates.gate_options("rep"), "gate", claimed)
        await wait_for(pilot, lambda: not runs.busy)
    assert gates.log == []  # abandoned before it prepared: no run made


async def test_a_cancelled_gate_says_so_keeps_its_compile_error_and_r_resumes_it(
    gated_app,
) -> None:
    """Run states said plainly (issue 38 item 5)."""
    app, gates = gated_app
    gates.compile_error = "kernel.py:78: SyntaxError: invalid syntax"
    toasts: list[str] = []
    app.notify = lambda message, **kw: toasts.append(str(message))  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        runs = app.pane("runs")
        await wait_for(pilot, lambda: runs.built)
        assert app.run_control.start(app.run_control.gates.gate_options("rep"), "gate")
        await wait_for(pilot, lambda: runs.active_run is not None and runs._progress is not None)
        await wait_for(pilot, lambda: runs._progress[0] == 1)
        run_id = runs.active_run
        await pilot.press("c")
        await wait_for(pilot, lambda: not runs.busy)
        await pilot.pause()
        # the real run id in the toast, and how to resume it
        assert any(f"cancelling run {run_id}" in t and "r on the Runs pane" in t for t in toasts)
        status = str(runs.query_one("#runs-status").render())
        assert "cancelled, resumable" in status
        # the compile error stays in the status line, without moving onto its row
        assert "COMPILE_ERROR kernel.py:78: SyntaxError" in status
        statuses = [v.status for v in runs._jobs.values()]
        assert statuses[0] == "COMPILE_ERROR" and set(statuses[1:]) == {"NOT RUN"}
        # reopened from its record, the unrun jobs are still "not run", never QUEUED
        runs.open_run(run_id)
        await wait_for(pilot, lambda: runs._header_info.get("state") == "cancelled")
        await pilot.pause(0.1)
        assert "QUEUED" not in {v.status for v in runs._jobs.values()}
        assert runs.can_resume
        assert any(f"Resume run {run_id}" == text for text, _, _ in app.palette_commands())
        gates.compile_error = None
        gates.finish.set()
        await pilot.press("r")
        await wait_for(pilot, lambda: not runs.busy and len(gates.log) == 4)
    assert [entry[1] for entry in gates.log] == [run_id] * 4  # the resume ran the same run


async def test_cancel_and_quit_ends_the_app_once_the_runs_thread_has_ended(gated_app) -> None:
    """ "Cancel it and quit" waits for the run's thread (its workers stopped), then exits: no
    thread is left for the process to wait on after the terminal is given back."""
    from fibtui.ui.screens.confirm import ChoiceScreen

    app, gates = gated_app
    async with app.run_test(size=(80, 24)) as pilot:
        runs = app.pane("runs")
        await wait_for(pilot, lambda: runs.built)
        assert app.run_control.start(app.run_control.gates.gate_options("rep"), "gate")
        await wait_for(pilot, lambda: runs.active_run is not None)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("c")
        await wait_for(pilot, lambda: getattr(app, "_exit", False))
        # the app began to exit only once the run's thread had ended
        assert gates.log and gates.log[-1][0] == "end"
    assert app.return_code == 0
    assert [kind for kind, _ in gates.log] == ["start", "end"]  # the thread ended first
    assert list(gates.ended.values()) == ["cancelled"]
