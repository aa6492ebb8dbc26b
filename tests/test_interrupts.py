"""Interrupts are never a kernel's fault (issue 17).

SIGINT, SIGTERM and SIGHUP (an SSH drop) cancel the run first, then the runner stops its workers:
a job whose worker the runner stopped stays pending (never RUNTIME_ERROR, TIMEOUT or INFRA_ERROR in
the journal), the run reads ``interrupted`` (``cancelled`` for the user's own cancel) and
``fibtui run --resume`` finishes it with every job exactly once. Checked for the CLI in a
subprocess before the first job, during a job, between two jobs and after the last one, with and
without a slow exit, the signal sent to the process group and to the pid alone; for the runner
(a cancel mid-job, KeyboardInterrupt in the calling thread); for the TUI (the app closing, SIGTERM).

Phases are found, not guessed: the kernel appends its workload's size to a marks file at every call
(3 calls a job on the interpreter, 0.3 s each), so "job 2 is running" is a line in that file; the
test-only variables ``FIBTUI_TEST_PAUSE_AFTER_JOB_S`` and ``FIBTUI_TEST_SLOW_EXIT_S`` hold the CLI
between two jobs or before it returns.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fibtui.core.runs import list_runs, read_journal
from fibtui.core.workspace import open_workspace
from fibtui.runners.journaling import interrupt
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.conftest import REPO, run_cli
from tests.runner_helpers import PY_TEMPLATE, make_tiny_workspace

#: a correct kernel that says when it is called (its workload's n) and takes a known time per call
MARKED = PY_TEMPLATE.format(
    body=(
        "    with open(os.environ['FIBTUI_TEST_MARKS'], 'a') as f:\n"
        "        f.write(f'{x.shape[0]}\\n')\n"
        "    time.sleep(0.3)\n"
        "    y.copy_(x * alpha)"
    )
)
BAD = ("RUNTIME_ERROR", "TIMEOUT", "INFRA_ERROR")
TOTAL = 3
TIMEOUT_S = 120.0


def wait_until(condition, what: str, timeout_s: float = TIMEOUT_S, step_s: float = 0.02) -> None:
    """Poll ``condition`` until it holds, with a deadline (never a blind sleep)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step_s)


def make_ws(tmp_path: Path) -> Path:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, TOTAL + 1)))
    (root / "solution" / "triton" / "kernel.py").write_text(MARKED)
    return root


def marks(tmp_path: Path) -> list[int]:
    try:
        return [int(line) for line in (tmp_path / "marks").read_text().split()]
    except FileNotFoundError:
        return []


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "FIBTUI_CACHE_DIR": str(tmp_path / "cache"),
        "FIBTUI_TEST_MARKS": str(tmp_path / "marks"),
        **extra,
    }


def only_run(root: Path):
    runs = list_runs(root / "optimize_ops")
    assert len(runs) == 1, runs
    return runs[0]


def check_journal(root: Path, done: int) -> None:
    """Exactly ``done`` results, all PASSED: nothing blamed on the good kernel, nothing pending
    written as a result."""
    run = only_run(root)
    journal = read_journal(run.path / "journal.jsonl")
    statuses = [r.status for r in journal.results.values()]
    assert not [s for s in statuses if s in BAD], statuses
    assert statuses == ["PASSED"] * done, statuses
    assert not journal.duplicate_lines and not journal.corrupt_lines


class Cli:
    """``python -m fibtui ...`` in its own session (so a group signal reaches it and nothing else
    of this test), its output collected line by line by a reader thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fibtui", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def wait_for(self, needle: str) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(
                    f"exited ({self.proc.returncode}) before {needle!r}:\n{self.out[-3000:]}"
                )
            return any(needle in line for line in list(self.lines))

        wait_until(seen, f"{needle!r} in the output")

    def send(self, sig: signal.Signals, target: str) -> None:
        if target == "group":
            os.killpg(self.proc.pid, sig)
        else:
            os.kill(self.proc.pid, sig)

    def finish(self) -> int:
        code = self.proc.wait(timeout=TIMEOUT_S)
        self._reader.join(timeout=10)
        return code


def runs_list_json(root: Path, tmp_path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "fibtui", "runs", "list", "--json", "--workspace", str(root)],
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        check=True,
        timeout=TIMEOUT_S,
    )
    (entry,) = json.loads(out.stdout)["runs"]
    return entry


def resume_finishes_each_job_once(root: Path, tmp_path: Path, done: int) -> None:
    """``fibtui run --resume RUN_ID`` runs exactly the jobs without a result, each once; the run
    ends complete with every job PASSED exactly once."""
    run_id = only_run(root).run_id
    resumed = Cli(["run", "--resume", run_id, "--workspace", str(root)], env_for(tmp_path))
    code = resumed.finish()
    assert code == 0, resumed.out
    ran = [line for line in resumed.lines if line.startswith("[") and "/3]" in line]
    assert len(ran) == TOTAL - done, resumed.out
    check_journal(root, TOTAL)
    entry = runs_list_json(root, tmp_path)
    assert entry["state"] == "complete" and entry["jobs_done"] == TOTAL


# the phase, what to wait for before the signal, and the jobs in the journal after it
PHASES = {
    "before": ("run ", 0),  # RunStarted printed: the worker is still starting
    "during": (None, 1),  # job 2's kernel is running (its first call's mark)
    "between": ("[1/3]", 1),  # job 1 recorded, the slot thread held before job 2
    "after_last": ("[3/3]", TOTAL),  # the last job recorded, the run not closed yet
    "exiting": ("complete:", TOTAL),  # the run closed and reported; the CLI is slow to exit
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "target", "phase", "slow_exit_s"),
    [
        (
            signal.SIGINT,
            "group",
            "during",
            2.0,
        ),  # the reported case: Ctrl-C in a terminal, a slow exit
        (signal.SIGTERM, "pid", "during", 2.0),
        (signal.SIGHUP, "group", "during", 0.0),  # an SSH drop
        (signal.SIGINT, "pid", "before", 0.0),
        (signal.SIGHUP, "group", "before", 2.0),
        (signal.SIGTERM, "group", "between", 0.0),
        (signal.SIGINT, "pid", "between", 2.0),
        (signal.SIGHUP, "pid", "after_last", 0.0),
        (signal.SIGTERM, "pid", "exiting", 2.0),
    ],
)
def test_a_signal_cancels_first_and_leaves_the_jobs_in_flight_pending(
    tmp_path: Path, sig: signal.Signals, target: str, phase: str, slow_exit_s: float
) -> None:
    root = make_ws(tmp_path)
    needle, done = PHASES[phase]
    extra = {"FIBTUI_TEST_SLOW_EXIT_S": str(slow_exit_s)}
    if phase in ("between", "after_last"):
        extra["FIBTUI_TEST_PAUSE_AFTER_JOB_S"] = "1.5"
    cli = Cli(
        ["run", "--backend", "interpreter", "--workloads", "all", "--workspace", str(root)],
        env_for(tmp_path, **extra),
    )
    if needle is None:
        wait_until(lambda: 2 in marks(tmp_path), "job 2's kernel to run")
        assert only_run(root).jobs_done == 1  # job 1 recorded, job 2 in flight
    else:
        cli.wait_for(needle)
    cli.send(sig, target)
    interrupted = done < TOTAL
    if interrupted:
        # the run closed before the CLI exits: nothing is recorded while it lingers (the bug:
        # the slot thread blamed the kernel for the worker the runner had killed, and ran on)
        cli.wait_for("interrupted: resume with")
        during_exit = (only_run(root).path / "journal.jsonl").read_bytes()
        if slow_exit_s:
            assert cli.proc.poll() is None
            entry = runs_list_json(root, tmp_path)
            assert entry["state"] == "interrupted" and entry["jobs_done"] == done
    code = cli.finish()
    out = cli.out
    assert "restarted" not in out and "died during the job" not in out and "Traceback" not in out, (
        out
    )
    check_journal(root, done)
    entry = runs_list_json(root, tmp_path)
    assert entry["jobs_done"] == done and entry["jobs_total"] == TOTAL
    if not interrupted:
        assert code == 0 and entry["state"] == "complete", out
        return
    assert (only_run(root).path / "journal.jsonl").read_bytes() == during_exit
    assert code == 128 + sig, out
    assert entry["state"] == "interrupted", out
    assert f"{sig.name}: stopping the run" in out
    end = read_journal(only_run(root).path / "journal.jsonl").end
    assert end is not None and end["state"] == "interrupted" and sig.name in end["reason"]
    if phase == "between":
        assert 2 not in marks(tmp_path)  # the signal came between the jobs: job 2 never began
    resume_finishes_each_job_once(root, tmp_path, done)


@pytest.mark.slow
def test_a_second_signal_stops_at_once_and_still_blames_nobody(tmp_path: Path) -> None:
    """Two Ctrl-Cs: the second kills the workers at once (KeyboardInterrupt in the runner), and the
    job in flight is still pending."""
    root = make_ws(tmp_path)
    cli = Cli(
        ["run", "--backend", "interpreter", "--workloads", "all", "--workspace", str(root)],
        env_for(tmp_path, FIBTUI_TEST_PAUSE_AFTER_JOB_S="1.5"),
    )
    cli.wait_for("[1/3]")  # the slot thread is held between job 1 and job 2: the first signal waits
    cli.send(signal.SIGINT, "group")
    cli.wait_for("SIGINT: stopping the run")
    cli.send(signal.SIGINT, "group")
    code = cli.finish()
    assert code == 130, cli.out
    assert "interrupted: resume with" in cli.out and "Traceback" not in cli.out
    check_journal(root, 1)
    assert runs_list_json(root, tmp_path)["state"] == "interrupted"
    resume_finishes_each_job_once(root, tmp_path, 1)


@pytest.mark.parametrize("backend", ["interpreter", "local", "modal"])
@pytest.mark.parametrize("workers", ["0", "-1"])
def test_workers_below_one_is_refused_for_every_backend(
    tmp_path: Path, capsys, backend: str, workers: str
) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    for extra in ([], ["--plan"]):
        code, out, err = run_cli(
            capsys,
            "run",
            "--backend",
            backend,
            "--workers",
            workers,
            *extra,
            "--workspace",
            str(root),
        )
        assert code == 2
        assert err.strip() == f"fibtui: error: --workers must be at least 1, got {workers}"
        assert not (root / "optimize_ops" / "runs").exists()  # refused before anything was written


# -- the runner, no CLI ------------------------------------------------------------------------------


def _runner(root: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FIBTUI_TEST_MARKS", str(tmp_path / "marks"))
    return prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all"))


def _when_job_2_runs(tmp_path: Path, action) -> threading.Thread:
    def go() -> None:
        wait_until(lambda: 2 in marks(tmp_path), "job 2's kernel to run")
        action()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


@pytest.mark.slow
@pytest.mark.parametrize("how", ["interrupt", "cancel"])
def test_the_runner_stopped_mid_job_records_nothing_for_it(
    tmp_path: Path, monkeypatch, how: str
) -> None:
    root = make_ws(tmp_path)
    prepared = _runner(root, monkeypatch, tmp_path)
    cancel = threading.Event()
    events: list[object] = []
    stop = (lambda: interrupt(cancel, "a test's interrupt")) if how == "interrupt" else cancel.set
    helper = _when_job_2_runs(tmp_path, stop)
    record = prepared.runner.run(events.append, cancel).to_json()
    helper.join(timeout=10)
    assert record["state"] == ("interrupted" if how == "interrupt" else "cancelled")
    assert record["summary"]["done"] == 1
    assert not [e for e in events if type(e).__name__ == "WorkerRestarted"]
    assert all(w.proc.poll() is not None for w in prepared.runner._workers.values())
    check_journal(root, 1)
    record = (
        prepare_resume(open_workspace(root), prepared.run_id).runner.run(lambda e: None).to_json()
    )
    assert record["state"] == "complete" and record["summary"]["passed"] == TOTAL
    check_journal(root, TOTAL)


@pytest.mark.slow
def test_keyboard_interrupt_in_the_calling_thread_cancels_before_it_stops_the_workers(
    tmp_path: Path, monkeypatch
) -> None:
    """Ctrl-C as Python delivers it (KeyboardInterrupt in the main thread, inside runner.run):
    the runner sets the cancel event, stops its workers, waits for its slot threads and raises;
    the job in flight is pending, not the kernel's RUNTIME_ERROR."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("KeyboardInterrupt is delivered to the main thread only")
    root = make_ws(tmp_path)
    prepared = _runner(root, monkeypatch, tmp_path)
    cancel = threading.Event()
    events: list[object] = []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        helper = _when_job_2_runs(tmp_path, _thread.interrupt_main)
        with pytest.raises(KeyboardInterrupt):
            prepared.runner.run(events.append, cancel)
        helper.join(timeout=10)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert cancel.is_set()
    # joined, not left running (a thread that has just ended can still be listed, as stopped,
    # for a moment after its join returned)
    assert not [
        t for t in threading.enumerate() if t.name.startswith("fibtui-slot-") and t.is_alive()
    ]
    assert all(w.proc.poll() is not None for w in prepared.runner._workers.values())
    assert not [e for e in events if type(e).__name__ == "WorkerRestarted"]
    check_journal(root, 1)
    journal = read_journal(prepared.folder / "journal.jsonl")
    assert journal.end is not None and journal.end["state"] == "interrupted"
    assert only_run(root).state == "interrupted"


# -- the TUI --------------------------------------------------------------------------------------


async def _start_sweep(app, pilot, tmp_path: Path) -> None:
    app.run_control.note_acknowledged = True
    await pilot.press("3")
    await pilot.press("s")
    deadline = time.monotonic() + TIMEOUT_S
    while 2 not in marks(tmp_path):
        assert time.monotonic() < deadline, "the sweep never reached job 2"
        await pilot.pause(0.05)


def _after_the_app(root: Path, tmp_path: Path) -> None:
    """The runner's thread winds down after the app: wait for it to close the run."""
    wait_until(lambda: only_run(root).state != "running", "the run to close")
    run = only_run(root)
    assert run.state == "interrupted" and run.jobs_done == 1
    check_journal(root, 1)
    record = prepare_resume(open_workspace(root), run.run_id).runner.run(lambda e: None).to_json()
    assert record["state"] == "complete"
    check_journal(root, TOTAL)


@pytest.mark.slow
async def test_closing_the_tui_during_a_run_interrupts_it_first(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("FIBTUI_TEST_MARKS", str(tmp_path / "marks"))
    root = make_ws(tmp_path)
    from fibtui.ui.app import make_app

    app = make_app(open_workspace(root))
    async with app.run_test(size=(120, 40)) as pilot:
        await _start_sweep(app, pilot, tmp_path)
        app.exit()
    _after_the_app(root, tmp_path)


@pytest.mark.slow
async def test_sigterm_to_the_tui_interrupts_the_run_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("FIBTUI_TEST_MARKS", str(tmp_path / "marks"))
    root = make_ws(tmp_path)
    from fibtui.ui.app import make_app

    app = make_app(open_workspace(root))
    before = signal.getsignal(signal.SIGTERM)
    async with app.run_test(size=(120, 40)) as pilot:
        if signal.SIGTERM not in app._hangups.caught:
            pytest.skip("the app could not install its signal handlers here (not the main thread)")
        await _start_sweep(app, pilot, tmp_path)
        os.kill(
            os.getpid(), signal.SIGTERM
        )  # handled by the app's event loop, not the default action
        deadline = time.monotonic() + TIMEOUT_S
        while app.return_code is None:
            assert time.monotonic() < deadline, "the app did not end on SIGTERM"
            await pilot.pause(0.05)
        assert app.return_code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # the app put the previous handler back
    _after_the_app(root, tmp_path)


@pytest.mark.slow
def test_sigint_at_any_moment_of_start_up_is_one_line(tmp_path: Path) -> None:
    """A signal while the command line is imported, parsed, or the workspace opened (before the
    run folder exists): ``fibtui: interrupted``, 130, never a traceback (issue 37 item 4). The
    moments are spread over start-up; whichever phase each lands in, the answer is the same."""
    root = make_ws(tmp_path)
    # Python's own start-up (site, runpy finding the package) is not fibtui's: the clock starts
    # once the package is imported
    launcher = (
        "import sys, runpy, fibtui; sys.stderr.write('up\\n'); sys.stderr.flush(); "
        "sys.argv = ['fibtui', *sys.argv[1:]]; runpy.run_module('fibtui', run_name='__main__')"
    )
    for delay in (0.01, 0.03, 0.1, 0.25):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                launcher,
                "run",
                "--backend",
                "interpreter",
                "--no-daemon",
                "--workspace",
                str(root),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(tmp_path),
        )
        assert proc.stderr is not None and proc.stderr.readline() == "up\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT_S)
        assert "Traceback" not in err, (delay, err)
        assert proc.returncode == 130, (delay, proc.returncode, err)
        assert "interrupted" in err, (delay, err)
