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
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core.errors import WriteFailed
from fibtui.core.runs import RunHeader, now_iso, pid_alive, release_lock, take_lock
from fibtui.core.status import INFRA_STATUSES
from fibtui.runners.events import JobStarted, LogLine, RunStarted, WorkerRestarted
from fibtui.runners.journaling import JobRecorder, SolutionIds, pending_groups, take_job_fields

EventSink = Callable[[object], None]

_EOF = object()

#: Environment variables a kernel never gets: tokens, secrets, passwords, keys (a kernel's prints and
#: errors land in logs and journals that are archived and committed).
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL", re.IGNORECASE)


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
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def config_for(self, slot: int) -> dict[str, Any]:
        cfg = dict(self.engine_config)
        cfg["device"] = "cpu" if self.interpreter or self.devices[slot] == "cpu" else "cuda:0"
        return cfg


SCRATCH_PREFIX = "fibtui-worker-cwd-"
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
        pid = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
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
        self.cwd = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        cwd = self.cwd
        # the worker removes its scratch folder itself if this runner is killed
        env = {**env, "FIBTUI_WORKER_SCRATCH": str(cwd), "FIBTUI_RUNNER_PID": str(os.getpid())}
        self._log_lock = threading.Lock()
        self.log_path = log_path
        self.log = open(log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fibtui.worker", "serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(cwd),
            start_new_session=True,
        )
        self.events: queue.Queue[Any] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                self.events.put(json.loads(raw))
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.events.put({"event": "garbage", "text": raw[:200].decode("utf-8", "replace")})
        self.events.put(_EOF)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = self.proc.stderr.read1(65536) if hasattr(self.proc.stderr, "read1") else self.proc.stderr.read(65536)
            if not chunk:
                break
            with self._log_lock:
                try:
                    self.log.write(chunk)
                    self.log.flush()
                except (OSError, ValueError):
                    pass

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
            if ev is _EOF or not isinstance(ev, dict) or ev.get("event") != "garbage":
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
        self._drainer.join(timeout=2)
        with self._log_lock:
            self.log.close()
        shutil.rmtree(self.cwd, ignore_errors=True)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send({"op": "shutdown"})
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
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"


class WarmWorkers:
    """Worker processes started ahead of time (torch and triton already imported), so watch mode
    can start a gate within a fraction of a second of a save. Keyed by the pool's environment."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._ready: dict[str, list[WorkerProcess]] = {}
        self._closed = False

    @staticmethod
    def key(pool: WorkerPool, slot: int) -> str:
        return f"{'interp' if pool.interpreter else 'gpu'}:{pool.devices[slot]}"

    def prewarm(self, pool: WorkerPool, slot: int = 0, timeout_s: float = 120.0) -> bool:
        """Start one worker for this pool slot and wait until it is ready (call from a thread)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        w = WorkerProcess(pool.env_for(slot), self.folder / f"warm-{time.time_ns()}.log")
        ev = w.next_event(time.monotonic() + timeout_s)
        if not (isinstance(ev, dict) and ev.get("event") == "ready"):
            w.kill()
            return False
        with self._lock:
            if not self._closed:
                self._ready.setdefault(self.key(pool, slot), []).append(w)
                return True
        w.close()  # the app closed while this worker started
        return False

    def take(self, pool: WorkerPool, slot: int) -> WorkerProcess | None:
        with self._lock:
            ready = self._ready.get(self.key(pool, slot), [])
            while ready:
                w = ready.pop(0)
                if w.proc.poll() is None:
                    return w
                w.kill()
        return None

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


class LocalRunner:
    def __init__(self, folder: Path, header: RunHeader, definition: dict[str, Any],
                 solutions: dict[str, dict[str, Any]], workloads: dict[str, dict[str, Any]], pool: WorkerPool) -> None:
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
        self._outstanding = 0
        self._workers: dict[int, WorkerProcess] = {}
        #: ready worker processes to use before starting new ones (watch mode keeps some warm)
        self.warm: WarmWorkers | None = None
        #: the journal could not be written (a full disk): the run stops, resumable
        self._write_failed: WriteFailed | None = None

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
            self._cond.notify_all()

    # -- running ------------------------------------------------------------------------------

    def run(self, on_event: EventSink, cancel: threading.Event | None = None) -> dict[str, Any]:
        cancel = cancel or threading.Event()
        take_lock(self.folder)
        try:
            done_keys = self.recorder.resume()
            done = self.recorder.done
            on_event(RunStarted(self.header, str(self.folder), resumed=done > 0, done_before=done))
            for (uuid, repeat), sids in pending_groups(self.header, done_keys, self.sid_of).items():
                self._push(Task(uuid, repeat, sids))
            threads = [threading.Thread(target=self._slot, args=(slot, on_event, cancel), daemon=True, name=f"fibtui-slot-{slot}")
                       for slot in range(len(self.pool.devices))]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.2)
            if self._write_failed is not None:
                raise WriteFailed(self._write_failed.path, self._write_failed,
                                  f"; the run stopped: free some space, then fibtui run --resume {self.header.run_id}")
            return self.recorder.finish(cancel.is_set(), on_event)
        finally:
            for w in self._workers.values():
                w.kill()
            release_lock(self.folder)

    def _start_worker(self, slot: int, on_event: EventSink) -> WorkerProcess | None:
        old = self._workers.pop(slot, None)
        if old is not None:
            old.kill()
        log = self.folder / f"worker-{slot}.log"
        w = self.warm.take(self.pool, slot) if self.warm is not None else None
        if w is not None:
            w.switch_log(log)
        else:
            w = WorkerProcess(self.pool.env_for(slot), log)
            ev = w.next_event(time.monotonic() + self.pool.load_timeout_s)
            if not isinstance(ev, dict) or ev.get("event") != "ready":
                self._workers[slot] = w
                on_event(LogLine(f"worker {slot} did not start: {self._describe(ev, w)}", "error"))
                return None
        self._workers[slot] = w
        cfg = self.pool.config_for(slot)
        cfg["workdir"] = str(w.cwd / "build")  # the built sources go away with the worker
        w.send({"op": "load", "config": cfg, "definition": self.definition, "solutions": self.solutions})
        ev = w.next_event(time.monotonic() + self.pool.load_timeout_s)
        if not isinstance(ev, dict) or ev.get("event") != "loaded":
            on_event(LogLine(f"worker {slot} failed to load the solutions: {self._describe(ev, w)}", "error"))
            return None
        for sid, rep in (ev.get("solutions") or {}).items():
            if not rep.get("ok"):
                on_event(LogLine(f"{self.ref_of[sid][1]}: COMPILE_ERROR: {rep.get('error')}", "error"))
        return w

    def _describe(self, ev: Any, w: WorkerProcess) -> str:
        if ev is None:
            return "timed out"
        if ev is _EOF:
            time.sleep(0.05)
            return f"worker {w.exit_description()}" + self._log_tail(w)
        if isinstance(ev, dict) and ev.get("event") == "error":
            return str(ev.get("message"))
        return f"unexpected event {ev!r:.200}"

    def _log_tail(self, w: WorkerProcess, lines: int = 3) -> str:
        try:
            time.sleep(0.05)
            data = Path(w.log_path).read_bytes()[-4000:].decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        tail = " | ".join(line.strip() for line in data[-lines:] if line.strip())
        return f" ({tail[:400]})" if tail else ""

    def _slot(self, slot: int, on_event: EventSink, cancel: threading.Event) -> None:
        worker: WorkerProcess | None = None
        while not cancel.is_set():
            task = self._pop(cancel, slot)
            if task is None:
                break
            try:
                if worker is None or worker.proc.poll() is not None:
                    worker = self._start_worker(slot, on_event)
                    if worker is None:
                        self._infra(task, "the worker could not start or load the solutions", on_event)
                        continue
                worker = self._run_task(slot, worker, task, on_event, cancel)
            except WriteFailed as exc:  # the journal cannot take the result: stop every slot
                self._write_failed = self._write_failed or exc
                cancel.set()
            finally:
                self._task_done()
        if worker is not None:
            worker.close()
            self._workers.pop(slot, None)

    def _infra(self, task: Task, reason: str, on_event: EventSink) -> None:
        if task.attempt <= self.pool.max_infra_retries:
            on_event(LogLine(f"retrying {task.uuid[:8]} (attempt {task.attempt + 1}): {reason}", "warning"))
            self._push(Task(task.uuid, task.repeat, task.sids, task.attempt + 1, slot=task.slot), front=True)
            return
        for sid in task.sids:
            self._record(sid, task, {"status": "INFRA_ERROR", "error": reason}, on_event)

    def _run_task(self, slot: int, worker: WorkerProcess, task: Task, on_event: EventSink,
                  cancel: threading.Event) -> WorkerProcess | None:
        on_event(JobStarted(task.uuid, task.repeat, [self.ref_of[s][1] for s in task.sids], slot))
        started_at = now_iso()
        job = {"op": "job", "job_id": f"{task.repeat}|{task.uuid}", "workload": self.workloads[task.uuid],
               "repeat": task.repeat, "solutions": task.sids}
        if not worker.send(job):
            self._infra(task, f"worker {worker.exit_description()} before the job", on_event)
            worker.kill()
            return None
        deadline = time.monotonic() + self.pool.job_timeout_s
        began = False
        while True:
            if cancel.is_set():
                worker.kill()
                return None
            ev = worker.next_event(min(deadline, time.monotonic() + 0.5))
            if ev is None:
                if time.monotonic() < deadline:
                    continue
                worker.kill()
                on_event(WorkerRestarted(slot, f"job {task.uuid[:8]} passed its {self.pool.job_timeout_s:.0f} s timeout"))
                self._blame(task, "TIMEOUT", f"no result within {self.pool.job_timeout_s:.0f} s", on_event, slot)
                return None
            if ev is _EOF:
                why = worker.exit_description(wait_s=5.0) + self._log_tail(worker)
                worker.kill()
                on_event(WorkerRestarted(slot, f"worker {why}"))
                if began:
                    self._blame(task, "RUNTIME_ERROR", f"the worker process died during the job: {why}", on_event, slot)
                else:
                    self._infra(task, f"worker {why} before the job began", on_event)
                return None
            kind = ev.get("event")
            if kind == "job_started":
                began = True
            elif kind == "result":
                for r in ev.get("results", []):
                    sid = r.get("solution_id")
                    if sid not in task.sids:
                        continue
                    take_job_fields(r, ev, started_at)
                    if r.get("status") in INFRA_STATUSES and task.attempt <= self.pool.max_infra_retries:
                        self._infra(Task(task.uuid, task.repeat, [sid], task.attempt), str(r.get("error")), on_event)
                        continue
                    self._record(sid, task, r, on_event, slot)
                if ev.get("restart"):
                    worker.kill()
                    on_event(WorkerRestarted(slot, "the CUDA context was lost; starting a fresh worker"))
                    return None
                return worker
            elif kind == "error":
                on_event(LogLine(f"worker {slot}: {ev.get('message')}", "error"))

    def _blame(self, task: Task, status: str, reason: str, on_event: EventSink, slot: int) -> None:
        """A job took the worker down: run each solution alone (on the same GPU) to find which."""
        if len(task.sids) > 1:
            on_event(LogLine(f"{task.uuid[:8]}: {reason}; rerunning each solution alone to attribute it", "warning"))
            for sid in reversed(task.sids):
                self._push(Task(task.uuid, task.repeat, [sid], task.attempt, slot=slot), front=True)
            return
        self._record(task.sids[0], task, {"status": status, "error": reason}, on_event, slot)

    def _record(self, sid: str, task: Task, r: dict[str, Any], on_event: EventSink, slot: int | None = None) -> None:
        where = {"slot": slot, "worker_device": self.pool.devices[slot]} if slot is not None else None
        self.recorder.record(sid, task.uuid, task.repeat, task.attempt, r, on_event, where)
