"""Watch mode: a save reruns the paired gate; a newer save cancels the gate in flight; a syntax
error is a compile failure, not a crash."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, JobStarted, JobStarting, RunFinished
from fibtui.ui import messages
from fibtui.ui.app import PANES, make_app
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
    return list({id(m): m.event for m in events if isinstance(m, messages.RunEvent)}.values())


def tiny_app(tmp_path: Path, monkeypatch, **workspace):
    """A tiny workspace (``tests.runner_helpers.make_tiny_workspace(**workspace)``) and its app,
    with a private user config folder and the recon note taken as read."""
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", **workspace)
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    return root, app


async def test_save_reruns_the_gate_and_a_syntax_error_is_a_compile_failure(
    tmp_path: Path, monkeypatch
) -> None:
    root, app = tiny_app(tmp_path, monkeypatch, batch_sizes=(1, 2))
    kernel = root / "solution" / "triton" / "kernel.py"
    events: list = []
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await pilot.press("w")
        assert app.run_control.watch.on and "WATCHING" in app.sub_title
        await wait_until(
            pilot,
            lambda: (
                app.run_control.gates.warm is not None and app.run_control.gates.warm.count() == 1
            ),
        )
        kernel.write_text(GOOD_TRITON + "\n# saved\n")
        await wait_until(pilot, lambda: any(isinstance(e, RunFinished) for e in run_events(events)))
        assert len(app.run_control.watch.latencies_ms) == 1
        done = [e for e in run_events(events) if isinstance(e, JobFinished)]
        assert [e.result.status for e in done] == ["PASSED", "PASSED"]
        # a broken save: the gate runs and reports COMPILE_ERROR; the app keeps going
        kernel.write_text(PY_TEMPLATE.format(body=BODIES["syntax"]))
        await wait_until(
            pilot, lambda: sum(isinstance(e, RunFinished) for e in run_events(events)) == 2
        )
        done = [e for e in run_events(events) if isinstance(e, JobFinished)][2:]
        assert {e.result.status for e in done} == {"COMPILE_ERROR"}
        assert "SyntaxError" in done[0].result.error
        await pilot.press("w")
        assert not app.run_control.watch.on


async def test_a_newer_save_cancels_the_gate_in_flight(tmp_path: Path, monkeypatch) -> None:
    root, app = tiny_app(tmp_path, monkeypatch, batch_sizes=(1, 2, 3, 4, 5, 6), kernel="slow_py")
    kernel = root / "solution" / "triton" / "kernel.py"
    events: list = []
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await pilot.press("w")
        await wait_until(
            pilot,
            lambda: (
                app.run_control.gates.warm is not None and app.run_control.gates.warm.count() == 1
            ),
        )
        kernel.write_text(kernel.read_text() + "\n# first save\n")
        await wait_until(pilot, lambda: any(isinstance(e, JobFinished) for e in run_events(events)))
        kernel.write_text(kernel.read_text() + "\n# second save\n")
        await wait_until(
            pilot,
            lambda: sum(isinstance(e, RunFinished) for e in run_events(events)) == 2,
            timeout=120,
        )
        states = [e.state for e in run_events(events) if isinstance(e, RunFinished)]
        assert states == ["cancelled", "complete"]


async def test_watch_on_a_picked_candidate_shows_its_compile_error_within_seconds(
    tmp_path: Path, monkeypatch
) -> None:
    """The candidate picker points watch mode at a candidate; a save with a syntax error gives
    its COMPILE_ERROR row before any call of the slow baseline (the baseline is not measured first),
    and the workspace's own kernel is not what is watched."""
    from tests.runner_helpers import make_candidate

    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3), kernel="slow_py")
    cand = make_candidate(root, "next_v2", "good_py")
    events: list = []
    app = make_app(open_workspace(root))
    async with app.run_test(size=(80, 24), message_hook=events.append) as pilot:
        gates, baselines = app.run_control.gates.choices()
        app.run_control.gates.gate_choice = next(c for c in gates if c.label == "next_v2")
        app.run_control.gates.base_choice = next(c for c in baselines if c.key == "solution")
        await pilot.press("w")
        assert app.run_control.gates.watch_folder() == cand
        await wait_until(
            pilot,
            lambda: (
                app.run_control.gates.warm is not None and app.run_control.gates.warm.count() == 1
            ),
        )
        await pilot.pause(0.5)  # the watcher is armed
        saved = time.monotonic()
        (cand / "kernel.py").write_text(PY_TEMPLATE.format(body=BODIES["syntax"]))
        await wait_until(
            pilot, lambda: any(isinstance(e, JobFinished) for e in run_events(events)), timeout=60
        )
        first = time.monotonic() - saved
        await wait_until(
            pilot, lambda: any(isinstance(e, RunFinished) for e in run_events(events)), timeout=60
        )
        done = [e.result for e in run_events(events) if isinstance(e, JobFinished)]
        assert {(r.role, r.status) for r in done} == {("candidate", "COMPILE_ERROR")}, done
        assert [e.state for e in run_events(events) if isinstance(e, RunFinished)] == ["cancelled"]
        # the row comes before any of the slow baseline's calls: no job of the run ever started
        # the baseline (a wall-clock bound would only measure how loaded the machine is)
        started = [e for e in run_events(events) if isinstance(e, (JobStarted, JobStarting))]
        candidate = {r.solution for r in done}
        assert all(set(e.solutions) <= candidate for e in started), started
        # the run says why it stopped (a log line in the Runs pane)
        from fibtui.runners.events import LogLine

        said = [e.text for e in run_events(events) if isinstance(e, LogLine)]
        assert any("next_v2: COMPILE_ERROR; the pair was stopped" in t for t in said), said
        print(f"COMPILE_ERROR row {first:.2f} s after the save")
        await pilot.press("w")


async def test_without_file_events_watch_mode_polls_and_says_so(
    tmp_path: Path, monkeypatch
) -> None:
    """A host out of inotify instances (a shared GPU server, a container): the file watcher
    cannot start. Watch mode says so and polls; a save still reruns the gate, even one made
    before the poller first looked at the folder (the state taken when w was pressed counts)."""
    import watchfiles

    real = watchfiles.awatch
    asked: list = []

    def awatch(*args, **kwargs):
        asked.append(kwargs.get("force_polling"))
        if not kwargs.get("force_polling"):
            raise OSError(24, "Too many open files (os error 24)")
        # the user saves in the instant before the poller's first look at the folder: a poller
        # that takes that look as its starting state alone would never see this save
        kernel.write_text(GOOD_TRITON + "\n# saved\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(watchfiles, "awatch", awatch)
    root, app = tiny_app(tmp_path, monkeypatch, batch_sizes=(1,))
    kernel = root / "solution" / "triton" / "kernel.py"
    events: list = []
    async with app.run_test(size=(120, 40), message_hook=events.append) as pilot:
        await pilot.press("w")
        await wait_until(pilot, lambda: asked == [None, True])
        notes = [str(n.message) for n in app._notifications]
        assert any("no file events here (OSError" in n and "polling" in n for n in notes), notes
        await wait_until(pilot, lambda: any(isinstance(e, RunFinished) for e in run_events(events)))
        assert len(app.run_control.watch.latencies_ms) == 1


async def test_the_verdict_comes_first_and_the_other_panes_follow_it(
    tmp_path: Path, monkeypatch
) -> None:
    """At a paired run's end the Runs pane works out the verdict alone; History, Regimes and the
    Promotion panel refresh after its VerdictReady, and the panel is handed that comparison
    (the comparison is made once for the run, from the record in memory, not twice)."""
    import shutil

    from textual.worker import Worker

    from fibtui.runners.session import RunOptions
    from fibtui.services import decide

    monkeypatch.setenv("FIBTUI_WORKERS_DAEMON", "0")
    root, app = tiny_app(tmp_path, monkeypatch, batch_sizes=(1, 2))
    baseline = tmp_path / "baseline"
    shutil.copytree(root / "solution" / "triton", baseline)
    compared: list[str] = []  # compare(RUN_ID): a run read again from disk
    loaded: list[object] = []  # compare_loaded: every comparison made (compare's too)
    plain, plain_loaded = decide.compare, decide.compare_loaded

    def counted(ws, run_id, *args, **kwargs):
        compared.append(run_id)
        return plain(ws, run_id, *args, **kwargs)

    def counted_loaded(ws, base, *args, **kwargs):
        loaded.append(base)
        return plain_loaded(ws, base, *args, **kwargs)

    monkeypatch.setattr(decide, "compare", counted)
    monkeypatch.setattr(decide, "compare_loaded", counted_loaded)
    seen: list[tuple[float, object]] = []
    async with app.run_test(
        size=(120, 40), message_hook=lambda m: seen.append((time.monotonic(), m))
    ) as pilot:
        await pilot.press("3")
        runs = app.query_one(RunsPane)
        refreshes = ("history", "regimes", "promotion")

        def idle() -> bool:  # every pane loaded, none of their loading still going
            return len(app._loaded) == len(PANES) and not [
                w for w in app.workers if w.group in refreshes and w.is_running
            ]

        await wait_until(pilot, lambda: runs.built and idle())
        compared.clear()
        loaded.clear()
        start = len(seen)
        runs.start(
            RunOptions(backend="interpreter", workloads="all", baseline=str(baseline)), "gate"
        )
        await wait_until(
            pilot, lambda: any(isinstance(m, messages.VerdictReady) for _, m in seen[start:])
        )
        ready = next(m for _, m in seen[start:] if isinstance(m, messages.VerdictReady))
        run_id = ready.run_id
        assert ready.outcome is not None  # a paired run: the comparison travels with the line
        promotion = app.pane("promotion")
        await wait_until(pilot, lambda: promotion.run_id == run_id)
        await wait_until(pilot, idle)
        # one comparison, the Runs pane's, from the record it holds (nothing read again); the
        # panel took it from the message
        assert compared == [] and len(loaded) == 1, (compared, loaded)
        assert promotion.outcome is ready.outcome
        at_ready = next(t for t, m in seen[start:] if m is ready)
        for group in refreshes:
            began = [
                t
                for t, m in seen[start:]
                if isinstance(m, Worker.StateChanged)
                and m.worker.group == group
                and m.state.name == "RUNNING"
            ]
            assert began and min(began) >= at_ready, group
