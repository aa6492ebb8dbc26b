"""The local runner: persistent worker processes (one per GPU, or several CPU-interpreter
workers), one job queue, one journal.

Containment: a worker is a separate process in its own session. A kernel that raises gets
RUNTIME_ERROR from the worker itself; one that kills the process (segfault, ``os._exit``, the
OOM killer) or hangs past the job timeout is attributed by rerunning each solution of that job
alone on a fresh worker: the one that crashes alone gets RUNTIME_ERROR (or TIMEOUT), the other
its normal result. Infrastructure failures (a worker that died before the job started, a
reference that failed, a measurement that failed) are retried alone up to a limit and merged
back; kernel failures are never retried. Every finished job is appended to the journal at once
(fsync), so a run killed at any moment resumes without redoing or losing finished jobs. The
paired baseline and candidate of one workload always run in the same worker, on the same GPU.

Stopping is never a kernel's fault: a cancel (the user's, or an interrupt: SIGINT, SIGTERM, SIGHUP,
the TUI closing) is set before any worker is stopped, and every wait on a worker checks it, so a
slot thread whose worker ended tells "it died by itself" (blamed as above) from "the runner stopped
it" (the job stays pending, nothing is written for it, ``--resume`` redoes it).
"""

from __future__ import annotations

import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core.errors import WriteFailed
from fibtui.core.procs import process_alive
from fibtui.core.runs import RunHeader, RunRecord, now_iso, release_lock, take_lock
from fibtui.core.status import INFRA_STATUSES
from fibtui.runners import killed
from fibtui.runners.events import EventSink, JobStarted, LogLine, RunStarted, WorkerRestarted
from fibtui.runners.journaling import (
    JobRecorder,
    SolutionIds,
    interrupt,
    interrupted_by,
    pending_groups,
    report_builds,
    take_job_fields,
)
from fibtui.worker import wire
from fibtui.worker.wire import Event

_EOF = object()
#: what a wait on a worker returns once the run is stopping (cancelled, interrupted, shutting down)
_HALT = object()
#: how often a wait on a worker looks at the cancel event (the longest a cancel waits to be seen)
_POLL_S = 0.2
#: how long an interrupted runner waits for its slot threads once it has stopped their workers
_STOP_JOIN_S = 15.0
#: how often the stderr drainer looks whether it must stop (a worker being detached)
_DRAIN_POLL_S = 0.1
#: how long a worker has to answer ``release`` at the end of a run
RELEASE_TIMEOUT_S = 10.0
#: how long a take waits for a worker this process is giving back (the last run's) to be back
GIVE_BACK_WAIT_S = 15.0

#: Environment variables a kernel never gets: tokens, secrets, passwords, keys (a kernel's prints and
#: errors land in logs and journals that are archived and committed).
_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL", re.IGNORECASE
)


def scrubbed_environment(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not _SECRET_NAME.search(k)}


@dataclass
class WorkerPool:
    """Where workers run: one slot per entry of ``devices`` (``cuda:N`` or ``cpu``)."""

    devices: list[str]
    engine_config: dict[str, Any]
    interpreter: bool = False
    job_timeout_s: float = 300.0
    load_timeout_s: float = 600.0
    max_infra_retries: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)

    def env_for(self, slot: int) -> dict[str, str]:
        env = scrubbed_environment(dict(os.environ))
        env.update(self.extra_env)
        env["PYTHONUNBUFFERED"] = "1"
        device = self.devices[slot]
        if self.interpreter:
            env["TRITON_INTERPRET"] = "1"
            env.setdefault("CUDA_VISIBLE_DEVICES", "")
        elif device.startswith("cuda:"):
            env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
        # the worker must import this very fibtui, wherever it is installed
        pkg_root = str(Path(__file__).resolve().parents[2])
        # (each entry once: the worker service keys its ready workers by this environment, so a
        # command started with PYTHONPATH naming this fibtui already must get the same key)
        paths = [pkg_root, *(env.get("PYTHONPATH") or "").split(os.pathsep)]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
        return env

    def config_for(self, slot: int) -> dict[str, Any]:
        cfg = dict(self.engine_config)
        cfg["device"] = "cpu" if self.interpreter or self.devices[slot] == "cpu" else "cuda:0"
        return cfg


SCRATCH_PREFIX = wire.SCRATCH_PREFIX
_swept = False


def sweep_stale_scratch(tmp: str | None = None) -> int:
    """Remove worker scratch folders whose runner is dead (a runner and its starting worker killed
    together leave one behind). The folder names carry the runner's pid; a live pid is left alone.
    Returns how many were removed."""
    removed = 0
    base = Path(tmp or tempfile.gettempdir())
    try:
        folders = list(base.glob(SCRATCH_PREFIX + "*"))
    except OSError:
        return 0
    for folder in folders:
        pid = folder.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


class WorkerProcess:
    """One ``python -m fibtui.worker serve`` with a thread turning its stdout into events and one
    draining its stderr into a log file (which can be switched when a warm worker joins a run).

    The worker's current folder is a fresh temporary folder outside the run and the workspace
    (removed when the worker stops), so a kernel writing relative paths cannot touch a run folder."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        global _swept
        if not _swept:
            _swept = True
            sweep_stale_scratch()
        cwd = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        # the worker removes its scratch folder itself if this runner is killed
        env = {**env, wire.SCRATCH_ENV: str(cwd), wire.RUNNER_PID_ENV: str(os.getpid())}
        proc = subprocess.Popen(
            [sys.executable, "-m", "fibtui.worker", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
            start_new_session=True,
        )
        self._attach(proc, cwd, log_path)

    def _attach(self, proc: Any, cwd: Path, log_path: Path) -> None:
        """Read the events of ``proc`` (a Popen, or what stands for one) and drain its stderr
        into ``log_path``; ``cwd`` is its scratch folder, removed when it is stopped."""
        self.cwd = cwd
        self._log_lock = threading.Lock()
        self.log_path = log_path
        self.log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = proc
        self.events: queue.Queue[Any] = queue.Queue()
        #: set once the worker may go to another reader (:meth:`release`): the threads stop
        self.detached = False
        self._detaching = threading.Event()
        #: runs this worker has served, as it said in its last ``released``
        self.runs = 0
        #: its peak resident memory as last sampled (bytes), None before the first sample
        self.peak_rss: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                ev = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                ev = wire.Garbage(raw[:200].decode("utf-8", "replace")).to_dict()
            self.events.put(ev)
            if wire.event_of(ev) == Event.RELEASED:
                return  # idle until its next request: it may go to another reader (release)
        self.events.put(_EOF)

    def _drain(self) -> None:
        """Copy the worker's stderr into its log until it ends or :meth:`detach` stops this
        (stderr is read straight from the descriptor, so nothing stays buffered here)."""
        assert self.proc.stderr is not None
        try:
            fd = self.proc.stderr.fileno()
        except (OSError, ValueError):
            return
        while not self._detaching.is_set():
            try:
                if not select.select([fd], [], [], _DRAIN_POLL_S)[0]:
                    continue
                chunk = os.read(fd, 65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            with self._log_lock:
                try:
                    self.log.write(chunk)
                    self.log.flush()
                except (OSError, ValueError):
                    pass

    def sample_memory(self) -> None:
        """Remember the worker's peak resident memory (said if it is killed from outside)."""
        if self.proc.poll() is None:
            peak = killed.peak_rss_bytes(self.proc.pid)
            if peak is not None:
                self.peak_rss = max(self.peak_rss or 0, peak)

    def note(self, text: str) -> None:
        """A line of fibtui's own in this worker's log."""
        with self._log_lock:
            try:
                self.log.write(f"fibtui: {text}\n".encode())
                self.log.flush()
            except (OSError, ValueError):
                pass

    def release(self, timeout_s: float | None = None) -> bool:
        """After a run's last job: ask the worker to forget that run (``release``). True when it
        says it is fit for another run; it is then detached (nothing reads its pipes here any more)
        and may be handed to the next run. False: close it as before."""
        if self.proc.poll() is not None or not self.send(wire.bare(wire.Op.RELEASE)):
            return False
        ev = self.next_event(time.monotonic() + (timeout_s or RELEASE_TIMEOUT_S))
        if wire.event_of(ev) != Event.RELEASED:
            self.note(f"worker {self.proc.pid} did not answer release: not kept for another run")
            return False
        if ev.get("keep") is not True:
            self.note(f"worker {self.proc.pid} not kept for another run: {ev.get('why')}")
            return False
        self.runs = int(ev.get("runs") or 0)
        self.note(f"worker {self.proc.pid} kept for another run ({self.runs} served so far)")
        self.detach()
        return True

    def detach(self) -> None:
        """Stop reading the worker (after ``released``): its pipes may go to another reader."""
        self._detaching.set()
        self._drainer.join(timeout=2)
        self._reader.join(timeout=2)
        with self._log_lock:
            self.log.close()
        self.detached = True

    def reattach(self, log_path: Path) -> None:
        """Read a detached worker again, its stderr going to ``log_path`` (the next run's log)."""
        runs = self.runs
        self._attach(self.proc, self.cwd, log_path)
        self.runs = runs

    def switch_log(self, log_path: Path) -> None:
        """Send what the worker prints from now on to ``log_path`` (a warm worker joining a run)."""
        with self._log_lock:
            old = self.log
            self.log = open(log_path, "ab")  # noqa: SIM115
            self.log_path = log_path
            old.close()

    def send(self, obj: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def next_event(self, deadline: float) -> Any:
        """The next event, ``_EOF`` when the process ended, None at the deadline."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                ev = self.events.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if ev is _EOF or wire.event_of(ev) != Event.GARBAGE:
                return ev

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._detaching.set()
        self._drainer.join(timeout=2)
        with self._log_lock:
            self.log.close()
        shutil.rmtree(self.cwd, ignore_errors=True)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send(wire.bare(wire.Op.SHUTDOWN))
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def exit_description(self, wait_s: float = 0.0) -> str:
        """How the process ended; ``wait_s``: how long to wait for it to be gone (a killed GPU
        process closes its pipes before the driver has let it go)."""
        try:
            code = self.proc.wait(timeout=wait_s) if wait_s > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        return describe_exit(code)


def describe_exit(code: int | None) -> str:
    """A worker's exit status in words (``killed by SIGSEGV``), as crash attribution says it."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class GiveBacks:
    """Workers on their way back after a run (:meth:`WorkerProcess.release` and handing back run
    in a thread, so a run's verdict never waits for them). A take waits for them first: the
    worker of the run that just ended is the warmest there is. The threads are not daemons: a
    command that ends waits for its worker to be back."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0

    def start(self, work: Any) -> threading.Thread:
        with self._cond:
            self._in_flight += 1

        def run() -> None:
            try:
                work()
            finally:
                with self._cond:
                    self._in_flight -= 1
                    self._cond.notify_all()

        thread = threading.Thread(target=run, name="fibtui-give-back", daemon=False)
        thread.start()
        return thread

    def wait(self, timeout_s: float = GIVE_BACK_WAIT_S) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._in_flight == 0, timeout_s)


#: this process's workers on their way back (every warm-worker pool's takes wait for them)
GIVE_BACKS = GiveBacks()


class WarmWorkers:
    """Worker processes started ahead of time (torch and triton already imported), so watch mode
    can start a gate within a fraction of a second of a save, and the workers of finished runs
    (given back: they serve the next run warm). Keyed by the pool's environment."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._ready: dict[str, list[WorkerProcess]] = {}
        self._closed = False
        #: keep the workers of finished runs for the next (the TUI's ``[tui] keep_worker_warm``)
        self.keep_given_back = True

    @staticmethod
    def key(pool: WorkerPool, slot: int) -> str:
        return f"{'interp' if pool.interpreter else 'gpu'}:{pool.devices[slot]}"

    def prewarm(self, pool: WorkerPool, slot: int = 0, timeout_s: float = 120.0) -> bool:
        """Have one worker ready for this pool slot: start one and wait until it is ready (call
        from a thread), unless one is ready already (the last run's, given back: waited for when
        it is on its way)."""
        GIVE_BACKS.wait()
        with self._lock:
            if any(w.proc.poll() is None for w in self._ready.get(self.key(pool, slot), [])):
                return True
        self.folder.mkdir(parents=True, exist_ok=True)
        w = WorkerProcess(pool.env_for(slot), self.folder / f"warm-{time.time_ns()}.log")
        ev = w.next_event(time.monotonic() + timeout_s)
        if wire.event_of(ev) != Event.READY:
            w.kill()
            return False
        with self._lock:
            if not self._closed:
                self._ready.setdefault(self.key(pool, slot), []).append(w)
                return True
        w.close()  # the app closed while this worker started
        return False

    def take(
        self, pool: WorkerPool, slot: int, log: Path | None = None, **_: Any
    ) -> WorkerProcess | None:
        """A ready worker for this pool slot (its stderr going to ``log`` from now on), or None.
        (The worker service's take, fibtui.runners.service.client, takes ``cancel`` and ``say``
        too; these need neither.)"""
        GIVE_BACKS.wait()
        w: WorkerProcess | None = None
        with self._lock:
            ready = self._ready.get(self.key(pool, slot), [])
            while ready:
                candidate = ready.pop(0)
                if candidate.proc.poll() is None:
                    w = candidate
                    break
                candidate.kill()
        if w is None:
            return None
        if w.detached:
            w.reattach(log or self.folder / f"warm-{time.time_ns()}.log")
        elif log is not None:
            w.switch_log(log)
        return w

    def give_back(self, pool: WorkerPool, slot: int, w: WorkerProcess) -> None:
        """After a run's last job on this slot: keep its worker for the next run when it says it
        is fit for one (:meth:`WorkerProcess.release`), else shut it down. In a thread."""

        def back() -> None:
            if not self.keep_given_back or not w.release():
                w.close()
                return
            with self._lock:
                if not self._closed:
                    self._ready.setdefault(self.key(pool, slot), []).insert(0, w)
                    return
            w.close()

        GIVE_BACKS.start(back)

    def count(self) -> int:
        with self._lock:
            return sum(1 for ws in self._ready.values() for w in ws if w.proc.poll() is None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = [w for ws in self._ready.values() for w in ws]
            self._ready.clear()
        for w in workers:
            w.close()


@dataclass
class Task:
    uuid: str
    repeat: int
    sids: list[str]
    attempt: int = 1
    #: the slot (GPU) this task must run on: the halves of a split paired job stay on the GPU
    #: where the pair started, so baseline and candidate are never compared across GPUs
    slot: int | None = None
    #: how many times a worker running this task was killed from outside (fibtui.runners.killed):
    #: the first is an infrastructure failure, retried in a fresh worker; the second is the kernel's
    kills: int = 0


class LocalRunner:
    def __init__(
        self,
        folder: Path,
        header: RunHeader,
        definition: dict[str, Any],
        solutions: dict[str, dict[str, Any]],
        workloads: dict[str, dict[str, Any]],
        pool: WorkerPool,
    ) -> None:
        self.folder = folder
        self.header = header
        self.definition = definition
        self.pool = pool
        self.workloads = workloads
        # worker-side ids: one per solution of the run, in header order
        ids = SolutionIds(header, solutions)
        self.sid_of, self.ref_of, self.solutions = ids.sid_of, ids.ref_of, ids.solutions
        self.recorder = JobRecorder(folder, header, self.ref_of)
        self.journal = self.recorder.journal
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._tasks: list[Task] = []
        #: candidates (sid -> the build error) that do not build in a paired run: the pair stops
        self._unbuilt: dict[str, str] = {}
        #: why the runner itself stopped the run (the end line says it)
        self._stop_reason: str | None = None
        self._outstanding = 0
        self._workers: dict[int, WorkerProcess] = {}
        #: ready worker processes to use before starting new ones (watch mode keeps some warm)
        self.warm: WarmWorkers | None = None
        #: the journal could not be written (a full disk): the run stops, resumable
        self._write_failed: WriteFailed | None = None
        #: set before the runner stops its workers (an interrupt, the end of the run): from then on
        #: a worker that ends is the runner's doing, and its job stays pending, never a result
        self._stopping = threading.Event()
        self._workers_lock = threading.Lock()
        #: adaptive repeats (``fibtui run --adaptive``): the rule (fibtui.core.sequential) that
        #: says after each pass which workloads get another repeat; None: every planned job runs
        self.adaptive: Any = None
        self._on_event: EventSink = lambda _e: None
        self._cancel: threading.Event | None = None
        #: the cgroup's memory figures when the run started (OOM kills during the run are counted)
        self._memory_at_start = killed.cgroup_memory()

    # -- the queue ----------------------------------------------------------------------------

    def _push(self, task: Task, front: bool = False) -> None:
        with self._cond:
            if front:
                self._tasks.insert(0, task)
            else:
                self._tasks.append(task)
            self._outstanding += 1
            self._cond.notify_all()

    def _pop(self, cancel: threading.Event, slot: int) -> Task | None:
        with self._cond:
            while True:
                for i, task in enumerate(self._tasks):
                    if task.slot is None or task.slot == slot:
                        return self._tasks.pop(i)
                if self._outstanding == 0 or cancel.is_set():
                    return None
                self._cond.wait(timeout=0.2)

    def _task_done(self) -> None:
        with self._cond:
            self._outstanding -= 1
            if self._outstanding == 0 and not self._tasks and self.adaptive is not None:
                for task in self._next_pass():  # an adaptive run's pass ended: the rule decides
                    self._tasks.append(task)
                    self._outstanding += 1
            self._cond.notify_all()

    def _next_pass(self) -> list[Task]:
        """An adaptive run between passes (every slot idle): write the stops the rule decided and
        return the tasks of the next pass (none: the run is over). Called with the queue's lock."""
        from fibtui.core.sequential import schedule

        cancel = self._cancel
        if cancel is None or self._halted(cancel):
            return []
        sizes: dict[tuple[str, int], int] = {}
        for job in self.header.jobs:
            sizes[(job.uuid, job.repeat)] = sizes.get((job.uuid, job.repeat), 0) + 1
        try:
            step = schedule(
                self.adaptive, sizes, list(self.recorder.results.values()), self.recorder.stops
            )
            for stop in step.stops:
                self.recorder.stop(stop.to_json())
        except WriteFailed as exc:
            self._write_failed = self._write_failed or exc
            cancel.set()
            return []
        except Exception as exc:  # noqa: BLE001 - the rule failing must not lose the run
            self.adaptive = None
            self._on_event(
                LogLine(
                    f"adaptive: the rule failed ({type(exc).__name__}: {exc}); the planned "
                    "repeats of the workloads not stopped run as a fixed design",
                    "error",
                )
            )
            settled = set(self.recorder.results) | self.recorder.skipped
            return [
                Task(u, r, sids)
                for (u, r), sids in pending_groups(self.header, settled, self.sid_of).items()
            ]
        if step.stops:
            reasons: dict[str, int] = {}
            for stop in step.stops:
                reasons[stop.reason] = reasons.get(stop.reason, 0) + 1
            said = ", ".join(f"{n} {why}" for why, n in reasons.items())
            self._on_event(
                LogLine(
                    f"adaptive: after {step.assessment.look if step.assessment else 0} repeat(s), "
                    f"{len(step.stops)} workload(s) stop ({said}); {len(step.run)} get another repeat",
                    "info",
                )
            )
        missing = pending_groups(self.header, set(self.recorder.results), self.sid_of)
        return [Task(u, r, missing[(u, r)]) for u, r in step.run if (u, r) in missing]

    # -- running ------------------------------------------------------------------------------

    def run(self, on_event: EventSink, cancel: threading.Event | None = None) -> RunRecord:
        """Run the pending jobs; returns the run record. ``cancel``: set it to stop (the user's
        cancel reads ``cancelled``; :func:`~fibtui.runners.journaling.interrupt` reads
        ``interrupted``): the slot threads stop their workers and the jobs in flight stay pending.
        A KeyboardInterrupt (or any exception) in the thread that called this cancels first, then
        stops the workers, waits for the slot threads and raises again."""
        cancel = cancel or threading.Event()
        take_lock(self.folder)
        threads: list[threading.Thread] = []
        closing = False
        try:
            done_keys = self.recorder.resume()
            done = self.recorder.done
            self._on_event, self._cancel = on_event, cancel
            on_event(RunStarted(self.header, str(self.folder), resumed=done > 0, done_before=done))
            if self.adaptive is not None:
                with self._cond:  # the first pass (or the rest of an interrupted one)
                    self._outstanding += 1
                self._task_done()
            else:
                for (uuid, repeat), sids in pending_groups(
                    self.header, done_keys, self.sid_of
                ).items():
                    self._push(Task(uuid, repeat, sids))
            threads = [
                threading.Thread(
                    target=self._slot,
                    args=(slot, on_event, cancel),
                    daemon=True,
                    name=f"fibtui-slot-{slot}",
                )
                for slot in range(len(self.pool.devices))
            ]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.2)
            closing = True
            if self._write_failed is not None:
                raise WriteFailed(
                    self._write_failed.path,
                    self._write_failed,
                    f"; the run stopped: free some space, then fibtui run --resume {self.header.run_id}",
                )
            return self.recorder.finish(
                cancel.is_set(),
                on_event,
                interrupted=interrupted_by(cancel),
                reason=self._stop_reason,
            )
        except BaseException as exc:
            if closing:
                raise  # every slot thread had ended: nothing is left to stop
            # an interrupt in this thread (Ctrl-C, a second signal): cancel first, then stop the
            # workers, so the slot threads never take their workers' ends for a kernel's crash
            interrupt(cancel, f"interrupted ({type(exc).__name__})", self.recorder)
            if self._stop_workers(threads):
                try:  # the end line and run.json, so the record says interrupted too
                    self.recorder.finish(True, lambda _e: None, interrupted=interrupted_by(cancel))
                except Exception:  # noqa: BLE001 - best effort: the journal alone already says it all
                    pass
            raise
        finally:
            self._stopping.set()
            self._kill_workers()
            release_lock(self.folder)

    def _kill_workers(self) -> None:
        with self._workers_lock:
            workers = list(self._workers.values())
        for w in workers:
            w.kill()

    def _stop_workers(self, threads: list[threading.Thread]) -> bool:
        """Stop every worker (the cancel event is already set) and wait for the slot threads;
        True when they all ended."""
        self._stopping.set()
        self._kill_workers()
        deadline = time.monotonic() + _STOP_JOIN_S
        for t in threads:
            while t.is_alive() and time.monotonic() < deadline:
                t.join(timeout=0.2)
        return not any(t.is_alive() for t in threads)

    def _halted(self, cancel: threading.Event) -> bool:
        """Is the run stopping? Then a worker that ends was (or is about to be) stopped by the
        runner: its job stays pending."""
        return cancel.is_set() or self._stopping.is_set()

    def _next(self, w: WorkerProcess, deadline: float, cancel: threading.Event) -> Any:
        """The worker's next event before ``deadline`` (None past it, ``_EOF`` when it ended), or
        ``_HALT`` as soon as the run is stopping."""
        while True:
            if self._halted(cancel):
                return _HALT
            w.sample_memory()
            ev = w.next_event(min(deadline, time.monotonic() + _POLL_S))
            if ev is not None or time.monotonic() >= deadline:
                return _HALT if ev is _EOF and self._halted(cancel) else ev

    def _set_worker(self, slot: int, w: WorkerProcess | None) -> WorkerProcess | None:
        with self._workers_lock:
            old = self._workers.pop(slot, None)
            if w is not None:
                self._workers[slot] = w
        return old if old is not w else None

    def _start_worker(
        self, slot: int, on_event: EventSink, cancel: threading.Event
    ) -> WorkerProcess | None:
        old = self._set_worker(slot, None)
        if old is not None:
            old.kill()
        log = self.folder / f"worker-{slot}.log"
        w = self._take_warm(slot, log, on_event, cancel)
        fresh = w is None
        if w is None:
            w = WorkerProcess(self.pool.env_for(slot), log)
        # known to the runner at once, so an interrupt stops it even while it starts
        self._set_worker(slot, w)
        if self._halted(cancel):  # stopped while it was being started: stop it here
            w.kill()
            return None
        if fresh:  # wait for it to be ready (a warm worker already is)
            ev = self._next(w, time.monotonic() + self.pool.load_timeout_s, cancel)
            if ev is _HALT:
                w.kill()
                return None
            if wire.event_of(ev) != Event.READY:
                on_event(LogLine(f"worker {slot} did not start: {self._describe(ev, w)}", "error"))
                return None
        cfg = self.pool.config_for(slot)
        cfg["workdir"] = str(w.cwd / "build")  # the built sources go away with the worker
        w.send(
            wire.Load(
                cfg, self.definition, self.solutions, prefetch=self._next_workloads(slot)
            ).to_dict()
        )
        ev = self._next(w, time.monotonic() + self.pool.load_timeout_s, cancel)
        if ev is _HALT:
            w.kill()
            return None
        if wire.event_of(ev) != Event.LOADED:
            on_event(
                LogLine(
                    f"worker {slot} failed to load the solutions: {self._describe(ev, w)}", "error"
                )
            )
            return None
        report = ev.get("solutions") or {}
        report_builds(self.folder, self.ref_of, report, on_event)
        roles = {sid: ref[0] for sid, ref in self.ref_of.items()}
        if "baseline" in roles.values():
            with self._lock:
                for sid, rep in report.items():
                    if (
                        roles.get(sid) == "candidate"
                        and not rep.get("ok")
                        and (rep.get("status") or "COMPILE_ERROR") == "COMPILE_ERROR"
                    ):
                        self._unbuilt.setdefault(
                            sid, str(rep.get("error") or "the candidate does not build")
                        )
        return w

    def _take_warm(
        self, slot: int, log: Path, on_event: EventSink, cancel: threading.Event
    ) -> WorkerProcess | None:
        """A ready worker (watch mode's warm ones, or the worker service's), or None: start one."""
        if self.warm is None or self._halted(cancel):
            return None
        return self.warm.take(
            self.pool,
            slot,
            log=log,
            cancel=cancel,
            say=lambda text: on_event(LogLine(text, "warning")),
        )

    def _stop_pair(self, task: Task, on_event: EventSink, cancel: threading.Event) -> None:
        """A candidate of a paired run does not build: every job of it is its COMPILE_ERROR at
        once, and the run stops before the baseline is measured for nothing (its jobs stay pending:
        ``fibtui run --resume`` measures them if wanted)."""
        with self._lock:
            tasks, self._tasks = [task, *self._tasks], []
            self._outstanding -= len(tasks) - 1  # the slot's own task is done by its caller
            unbuilt = dict(self._unbuilt)
            announce = None  # the reason, said once by the first slot to stop the pair
            if self._stop_reason is None:
                names = ", ".join(self.ref_of[sid][1] for sid in unbuilt)
                announce = self._stop_reason = (
                    f"{names}: COMPILE_ERROR; the pair was stopped before its baseline was measured"
                )
        for t in tasks:
            for sid in t.sids:
                if sid in unbuilt:
                    self._record(
                        sid, t, {"status": "COMPILE_ERROR", "error": unbuilt[sid]}, on_event
                    )
        if announce is not None:
            on_event(LogLine(announce, "error"))
        cancel.set()

    def _next_workloads(self, slot: int, n: int = 4) -> list[dict[str, Any]]:
        """The workloads of the next few tasks this slot will run: their reference outputs are
        computed while CUDA/C++ builds compile."""
        with self._lock:
            uuids = [t.uuid for t in self._tasks if t.slot in (None, slot)]
        return [self.workloads[u] for u in dict.fromkeys(uuids[:n])]

    def _describe(self, ev: Any, w: WorkerProcess) -> str:
        if ev is None:
            return "timed out"
        if ev is _EOF:
            time.sleep(0.05)
            return f"worker {w.exit_description()}" + self._log_tail(w)
        if wire.event_of(ev) == Event.ERROR:
            return str(ev.get("message"))
        return f"unexpected event {ev!r:.200}"

    def _log_tail(self, w: WorkerProcess, lines: int = 3) -> str:
        try:
            time.sleep(0.05)
            data = (
                Path(w.log_path)
                .read_bytes()[-4000:]
                .decode("utf-8", "replace")
                .strip()
                .splitlines()
            )
        except OSError:
            return ""
        tail = " | ".join(line.strip() for line in data[-lines:] if line.strip())
        return f" ({tail[:400]})" if tail else ""

    def _slot(self, slot: int, on_event: EventSink, cancel: threading.Event) -> None:
        worker: WorkerProcess | None = None
        while not self._halted(cancel):
            task = self._pop(cancel, slot)
            if task is None:
                break
            try:
                if worker is None or worker.proc.poll() is not None:
                    worker = self._start_worker(slot, on_event, cancel)
                    if worker is None:
                        self._infra(
                            task,
                            "the worker could not start or load the solutions",
                            on_event,
                            cancel,
                        )
                        continue
                if self._unbuilt:
                    self._stop_pair(task, on_event, cancel)
                    continue
                worker = self._run_task(slot, worker, task, on_event, cancel)
            except WriteFailed as exc:  # the journal cannot take the result: stop every slot
                self._write_failed = self._write_failed or exc
                cancel.set()
            finally:
                self._task_done()
        if worker is not None:
            if self._stopping.is_set():
                worker.kill()
            elif not self._give_back(slot, worker, cancel):
                worker.close()  # idle between jobs: it shuts down by itself
            self._set_worker(slot, None)

    def _give_back(self, slot: int, worker: WorkerProcess, cancel: threading.Event) -> bool:
        """The run is over on this slot: its worker goes back to the warm workers it may have come
        from (the worker service's, watch mode's) to serve the next run, when the run ended as
        planned (never after a cancel or an interrupt) and the worker is alive."""
        give = getattr(self.warm, "give_back", None)
        if give is None or self._halted(cancel) or worker.proc.poll() is not None:
            return False
        give(self.pool, slot, worker)
        return True

    def _infra(self, task: Task, reason: str, on_event: EventSink, cancel: threading.Event) -> None:
        if self._halted(cancel):
            return  # the run is stopping (the runner stopped this worker): the job stays pending
        if task.attempt <= self.pool.max_infra_retries:
            on_event(
                LogLine(
                    f"retrying {task.uuid[:8]} (attempt {task.attempt + 1}): {reason}", "warning"
                )
            )
            self._push(
                Task(task.uuid, task.repeat, task.sids, task.attempt + 1, slot=task.slot),
                front=True,
            )
            return
        for sid in task.sids:
            self._record(sid, task, {"status": "INFRA_ERROR", "error": reason}, on_event)

    def _run_task(
        self,
        slot: int,
        worker: WorkerProcess,
        task: Task,
        on_event: EventSink,
        cancel: threading.Event,
    ) -> WorkerProcess | None:
        if self._halted(cancel):
            return worker  # stopped before this job began: it stays pending
        on_event(JobStarted(task.uuid, task.repeat, [self.ref_of[s][1] for s in task.sids], slot))
        started_at = now_iso()
        job = wire.Job(
            f"{task.repeat}|{task.uuid}", self.workloads[task.uuid], task.repeat, task.sids
        )
        if not worker.send(job.to_dict()):
            self._infra(
                task, f"worker {worker.exit_description()} before the job", on_event, cancel
            )
            worker.kill()
            return None
        deadline = time.monotonic() + self.pool.job_timeout_s
        began = False
        while True:
            ev = self._next(worker, deadline, cancel)
            if ev is _HALT:
                # cancelled or interrupted: the runner stops the worker, the job stays pending
                worker.kill()
                return None
            if ev is None:
                worker.kill()
                on_event(
                    WorkerRestarted(
                        slot,
                        f"job {task.uuid[:8]} passed its {self.pool.job_timeout_s:.0f} s timeout",
                    )
                )
                self._blame(
                    task,
                    "TIMEOUT",
                    f"no result within {self.pool.job_timeout_s:.0f} s",
                    on_event,
                    slot,
                    cancel,
                )
                return None
            if ev is _EOF:
                # the worker ended while the run was going on: it died by itself (the runner sets
                # the cancel event before it stops any worker, and _next looked at it after the end)
                why = worker.exit_description(wait_s=5.0) + self._log_tail(worker)
                worker.kill()
                if self._halted(cancel):
                    return None  # an interrupt came meanwhile: not judged, the job stays pending
                on_event(WorkerRestarted(slot, f"worker {why}"))
                if began and killed.killed_from_outside(worker.proc.returncode):
                    self._killed(task, worker, on_event, slot, cancel)
                elif began:
                    self._blame(
                        task,
                        "RUNTIME_ERROR",
                        f"the worker process died during the job: {why}",
                        on_event,
                        slot,
                        cancel,
                    )
                else:
                    self._infra(task, f"worker {why} before the job began", on_event, cancel)
                return None
            kind = wire.event_of(ev)
            if kind == Event.JOB_STARTED:
                began = True
            elif kind == Event.RESULT:
                for r in ev.get("results", []):
                    sid = r.get("solution_id")
                    if sid not in task.sids:
                        continue
                    take_job_fields(r, ev, started_at)
                    if (
                        r.get("status") in INFRA_STATUSES
                        and task.attempt <= self.pool.max_infra_retries
                    ):
                        self._infra(
                            Task(task.uuid, task.repeat, [sid], task.attempt),
                            str(r.get("error")),
                            on_event,
                            cancel,
                        )
                        continue
                    self._record(sid, task, r, on_event, slot)
                if ev.get("restart"):
                    worker.kill()
                    why = ev.get("restart_reason") or "the CUDA context was lost"
                    on_event(WorkerRestarted(slot, f"{why}; starting a fresh worker"))
                    return None
                return worker
            elif kind == Event.ERROR:
                on_event(LogLine(f"worker {slot}: {ev.get('message')}", "error"))

    def _killed(
        self,
        task: Task,
        worker: WorkerProcess,
        on_event: EventSink,
        slot: int,
        cancel: threading.Event,
    ) -> None:
        """The worker was killed from outside mid-job (SIGKILL, as the OOM killer sends it): not
        the kernel's doing the first time; the job is run again once in a fresh worker. Killed
        again: the kernel's RUNTIME_ERROR, "killed, likely out of memory", with the figures."""
        how = worker.exit_description()
        after = killed.cgroup_memory()
        if task.kills == 0:
            reason = killed.describe_kill(
                how, worker.peak_rss, self._memory_at_start, after, twice=False
            )
            on_event(
                LogLine(f"{task.uuid[:8]}: {reason}; retrying it in a fresh worker", "warning")
            )
            self._push(
                Task(task.uuid, task.repeat, task.sids, task.attempt + 1, task.slot, kills=1),
                front=True,
            )
            return
        reason = killed.describe_kill(
            how, worker.peak_rss, self._memory_at_start, after, twice=True
        )
        self._blame(task, "RUNTIME_ERROR", reason, on_event, slot, cancel)

    def _blame(
        self,
        task: Task,
        status: str,
        reason: str,
        on_event: EventSink,
        slot: int,
        cancel: threading.Event,
    ) -> None:
        """A job took the worker down: run each solution alone (on the same GPU) to find which."""
        if self._halted(cancel):
            return  # the run is stopping: the job stays pending, nobody is blamed
        if len(task.sids) > 1:
            on_event(
                LogLine(
                    f"{task.uuid[:8]}: {reason}; rerunning each solution alone to attribute it",
                    "warning",
                )
            )
            for sid in reversed(task.sids):
                self._push(
                    Task(task.uuid, task.repeat, [sid], task.attempt, slot=slot, kills=task.kills),
                    front=True,
                )
            return
        self._record(task.sids[0], task, {"status": status, "error": reason}, on_event, slot)

    def _record(
        self, sid: str, task: Task, r: dict[str, Any], on_event: EventSink, slot: int | None = None
    ) -> None:
        where = (
            {"slot": slot, "worker_device": self.pool.devices[slot]} if slot is not None else None
        )
        self.recorder.record(sid, task.uuid, task.repeat, task.attempt, r, on_event, where)


def worker_pool(backend: str, found: Any, config: dict[str, Any], options: Any) -> WorkerPool:
    """The workers of a local or interpreter run: one per GPU this process may use, or
    ``options.workers`` CPU interpreters (``found``: fibtui.core.backends.detect())."""
    interpreter = backend == "interpreter"
    if interpreter:
        devices = ["cpu"] * max(1, options.workers or 1)
        timeout = options.job_timeout_s or 900.0
    else:
        # one worker per GPU this process may use (CUDA_VISIBLE_DEVICES respected): each worker
        # gets that GPU's own entry as its CUDA_VISIBLE_DEVICES
        ids = found.gpu_ids or ["0"]
        n = min(options.workers or len(ids), len(ids))
        devices = [f"cuda:{ids[i]}" for i in range(max(1, n))]
        timeout = options.job_timeout_s or 300.0
    return WorkerPool(
        devices=devices, engine_config=config, interpreter=interpreter, job_timeout_s=timeout
    )
