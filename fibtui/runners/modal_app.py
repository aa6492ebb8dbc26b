"""The Modal App: one GPU function that runs fibtui's worker on a slice of jobs.

Only the Modal backend imports this module (``fibtui.runners.modal_runner`` does, lazily, when a
run actually goes to Modal or runs the function body in-process); fibtui.core and the TUI's start
never do. The container needs only this from fibtui: the standalone worker package
(``fibtui.worker``: standard library + torch + triton), the two standard-library tables it
imports (``fibtui.core.toolchain``, ``fibtui.core.presets``) and this file, added to the image with
``add_local_python_source`` (the function is registered with ``include_source=False``, so the rest
of fibtui, with its polars/textual imports, never travels).

The function body, :func:`run_slice`, is :func:`fibtui.worker.engine.execute` (the same entry point
as the local runner's worker) plus the time each job started and where it ran. It returns
structured data; nothing is read from a console.

Credentials are Modal's own (``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET`` or ``~/.modal.toml``, read
by the modal client itself); fibtui never reads, prints or records a token.
"""

from __future__ import annotations

import contextvars
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

import modal
from modal.exception import NotFoundError

from fibtui.worker.protocol import KILL_WAIT_S
from fibtui.worker.protocol import WATCHDOG_INTERVAL_S as _WATCH_S
from fibtui.worker.wire import (
    SCRATCH_ENV,
    Event,
    JobStarted,
    Result,
    SliceResult,
    bare_event,
    event_of,
)

#: What the container needs from fibtui (see the module docstring).
CONTAINER_MODULES = (
    "fibtui.worker",
    "fibtui.core.toolchain",
    "fibtui.core.gpuarch",
    "fibtui.core.status",
    "fibtui.core.presets",
    "fibtui.core.procs",
    "fibtui.runners.modal_app",
)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


#: Set by whatever runs :func:`run_slice` outside Modal (a test's fake container): called instead of
#: Modal's ``stop_fetching_inputs`` when the container must take no more inputs.
STOP_HOOK: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "fibtui_stop_hook", default=None
)


def stop_taking_inputs() -> bool:
    """This container takes no more inputs once the current one returns: after a kernel lost the
    CUDA context (only a fresh process recovers) or hung (its thread is still running). On Modal:
    ``modal.experimental.stop_fetching_inputs()`` (modal 1.6: "the container will exit gracefully
    after the current input is processed"). True when something was told."""
    hook = STOP_HOOK.get()
    if hook is not None:
        hook()
        return True
    if not os.environ.get("MODAL_TASK_ID"):
        return False  # in this process (Function.local()): there is no container to stop
    try:
        import modal.experimental

        modal.experimental.stop_fetching_inputs()
        return True
    except Exception:  # noqa: BLE001 - an older client: the runner still sends no more to a poisoned slice
        return False


#: What this container remembers between inputs: ``fault``, set after a fault (a hang, a crash, a
#: raise while loading, a lost CUDA context) to its reason. Modal stops giving this container
#: inputs once told (:func:`stop_taking_inputs`); should one come all the same, :func:`run_slice`
#: runs nothing on it and says so. On Modal one process is one container; whatever runs
#: :func:`run_slice` in this process (a test's fake container, ``Function.local()``) sets
#: :data:`CONTAINER_STATE` to a dict of each container's own.
_PROCESS_STATE: dict[str, Any] = {}
CONTAINER_STATE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "fibtui_container_state", default=None
)


def _container_state() -> dict[str, Any]:
    state = CONTAINER_STATE.get()
    return _PROCESS_STATE if state is None else state


#: The default build/load timeout when a request names none (``[modal] load_timeout_s``).
DEFAULT_LOAD_TIMEOUT_S = 600.0


def run_slice(request: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    """The GPU function's body: run one slice of jobs with fibtui's worker in a child process.

    ``request`` is the worker's one-shot request (``config``, ``definition``, ``solutions``,
    ``jobs``) plus ``slice_id``, ``job_timeout_s`` and ``load_timeout_s``. The child is
    ``python -m fibtui.worker run`` (:func:`fibtui.worker.engine.execute`, the local runner's entry
    point); this process only watches it. Returns what ``execute`` returns with, per job,
    ``started`` (ISO time), and ``slice_id`` / ``container`` (host, Modal task id, wall time).

    ``progress``: where live events go as they happen (anything with ``put``: a ``modal.Queue``
    on Modal, a ``queue.Queue`` in this process), each a dict with ``slice_id``, ``task_id`` and
    ``event``: ``slice_started`` (a container took the slice), ``loaded``, ``job_started``,
    ``result`` (with the job's results). Never needed for the result: the return value holds it all.

    Watchdogs, in this process (a kernel that holds the child's interpreter lock, or spins on the
    GPU, cannot stop them): the child must say ``loaded`` within ``load_timeout_s`` and each job
    must end within ``job_timeout_s``; past either, the child's whole process group is killed
    (SIGKILL). A hung job's solution whose call never returned is TIMEOUT and the jobs not run are
    marked ``not_run`` (the runner sends them to a fresh container without counting an attempt).
    After any fault (a kill, the child's crash, a raise while loading, a lost CUDA context) this
    container stops taking inputs (:func:`stop_taking_inputs`) before the result is returned.
    """
    t0 = time.monotonic()
    state = _container_state()
    task_id = os.environ.get("MODAL_TASK_ID")
    sender = _Progress(progress, request.get("slice_id"), task_id)
    sender.send(bare_event(Event.SLICE_STARTED))
    if state.get("fault"):
        # Modal gave a container that was told to stop another input: run nothing on it
        out = _refused(request, str(state["fault"]))
        out["stopped_taking_inputs"] = stop_taking_inputs()
    else:
        out = _SliceChild(request, sender).run()
        fault = out.get("fault")
        if fault or out.get("poisoned") or out.get("hung"):
            state["fault"] = str(fault or ("poisoned" if out.get("poisoned") else "hung"))
            out["stopped_taking_inputs"] = stop_taking_inputs()
    sender.close()
    out["slice_id"] = request.get("slice_id")
    out["container"] = {
        "host": socket.gethostname(),
        "task_id": task_id,
        "region": os.environ.get("MODAL_REGION"),
        "wall_s": time.monotonic() - t0,
    }
    return out


class _Progress:
    """Sends live events to ``sink`` from a thread of its own, so a slow network never delays the
    watchdog; a failure to send is dropped (the return value holds every result)."""

    def __init__(self, sink: Any, slice_id: Any, task_id: str | None) -> None:
        self.sink = sink
        self.base = {"slice_id": slice_id, "task_id": task_id, "host": socket.gethostname()}
        self._q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        if sink is not None:
            self._thread = threading.Thread(target=self._pump, daemon=True, name="fibtui-progress")
            self._thread.start()

    def send(self, event: dict[str, Any]) -> None:
        if self._thread is not None:
            self._q.put({**self.base, **event})

    def _pump(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                self.sink.put(item)
            except Exception:  # noqa: BLE001 - live status is a courtesy; the result is returned
                pass

    def close(self) -> None:
        if self._thread is not None:
            self._q.put(None)
            self._thread.join(timeout=10)


class _SliceChild:
    """The child process running ``python -m fibtui.worker run`` on one slice, and its watchdogs."""

    def __init__(self, request: dict[str, Any], progress: _Progress) -> None:
        config = request.get("config") or {}
        # the watchdog needs to know which solution is in a call
        self.request = {**request, "config": {**config, "report_calls": True}}
        self.progress = progress
        self.interpreter = config.get("backend") == "interpreter"
        self.job_timeout = float(request.get("job_timeout_s") or 0) or None
        self.load_timeout = float(request.get("load_timeout_s") or DEFAULT_LOAD_TIMEOUT_S)
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr_tail: list[str] = []
        self.started: dict[Any, str] = {}
        self.results: list[dict[str, Any]] = []
        self.load: dict[str, Any] | None = None
        self.environment: dict[str, Any] | None = None
        self.done: dict[str, Any] | None = None
        self.job: Any = None
        self.since: float | None = None
        self.calling: dict[str, Any] | None = None

    def run(self) -> dict[str, Any]:
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory(prefix="fibtui-slice-") as scratch:
            path = Path(scratch) / "request.json"
            path.write_text(json.dumps(self.request), encoding="utf-8")
            env = dict(os.environ)
            if self.interpreter:
                env["TRITON_INTERPRET"] = "1"
            env[SCRATCH_ENV] = scratch
            # the child imports the fibtui this file belongs to (the container's copy)
            root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
            proc = subprocess.Popen(
                [sys.executable, "-m", "fibtui.worker", "run", "--request", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=scratch,
                env=env,
                start_new_session=True,  # its own process group: a kill reaches all it started
            )
            readers = [
                threading.Thread(target=self._read_events, args=(proc.stdout,), daemon=True),
                threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True),
            ]
            for r in readers:
                r.start()
            try:
                return self._watch(proc)
            finally:
                _kill_group(proc)
                for r in readers:
                    r.join(timeout=KILL_WAIT_S)

    # -- reading the child ---------------------------------------------------------------------

    def _read_events(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        for raw in stream:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.put(event)
        self.events.put(None)  # end of stream: the child exited (or closed its stdout)

    def _read_stderr(self, stream: IO[bytes] | None) -> None:
        import sys

        assert stream is not None
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            try:
                print(line, file=sys.stderr)  # the container's log
            except (OSError, ValueError):
                pass
            self.stderr_tail = (self.stderr_tail + [line])[-40:]

    def _take(self, event: dict[str, Any]) -> None:
        kind = event_of(event)
        if kind == Event.LOADED:
            self.load, self.environment = event.get("solutions"), event.get("environment")
            self.progress.send(bare_event(Event.LOADED))
        elif kind == Event.JOB_STARTED:
            self.job, self.since, self.calling = event.get("job_id"), time.monotonic(), None
            self.started[self.job] = _now_iso()
            self.progress.send(JobStarted(self.job).to_dict())
        elif kind == Event.CALLING:
            self.calling = event
        elif kind == Event.RESULT:
            result = Result.from_dict(event).job
            result["started"] = self.started.get(result.get("job_id"))
            self.results.append(result)
            self.job, self.since, self.calling = None, None, None
            self.progress.send(SliceResult(result).to_dict())
        elif kind == Event.DONE:
            self.done = event

    # -- watching ------------------------------------------------------------------------------

    def _watch(self, proc: Any) -> dict[str, Any]:
        t0 = time.monotonic()
        ended = False
        while not ended:
            try:
                event = self.events.get(timeout=_WATCH_S)
            except queue.Empty:
                event = {}
            if event is None:
                ended = True
            elif event:
                self._take(event)
                continue
            now = time.monotonic()
            if self.load is None and not ended and now - t0 > self.load_timeout:
                _kill_group(proc)
                return self._load_failed(
                    f"the worker did not load within the {self.load_timeout:.0f} s build/load "
                    "timeout ([modal] load_timeout_s): it was killed",
                    "load timeout",
                )
            if (
                self.job_timeout is not None
                and self.since is not None
                and now - self.since > self.job_timeout
            ):
                _kill_group(proc)
                return self._hung(proc)
        code = _reap(proc)
        if self.done is not None:
            return self._finished()
        why = _exit_reason(code)
        if self.load is None:
            return self._load_failed(
                f"the worker failed while loading ({why}): {self._last_error()}",
                "raised while loading",
            )
        return self._crashed(why)

    def _last_error(self) -> str:
        lines = [x for x in self.stderr_tail if x.strip()]
        return (lines[-1] if lines else "no message")[:400]

    def _base(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "load": self.load or {},
            "jobs": list(self.results),
            "timing_kind": (self.done or {}).get("timing_kind"),
            "poisoned": bool((self.done or {}).get("poisoned")),
        }

    def _finished(self) -> dict[str, Any]:
        return self._base()

    def _unrun(self, skip: set[Any], make: Callable[[Any, str], dict[str, Any]]) -> list[Any]:
        """Result entries for every job of the request not in ``skip``, each solution's from ``make``."""
        done = {r.get("job_id") for r in self.results} | skip
        out = []
        for job in self.request.get("jobs", []):
            if job.get("job_id") in done:
                continue
            out.append(
                {
                    "job_id": job.get("job_id"),
                    "uuid": job["workload"]["uuid"],
                    "repeat": job.get("repeat", 0),
                    "results": [make(job, sid) for sid in job.get("solutions") or []],
                    "restart": True,
                    "started": self.started.get(job.get("job_id")),
                }
            )
        return out

    def _load_failed(self, why: str, fault: str) -> dict[str, Any]:
        out = self._base()
        out["jobs"] = self._unrun(
            set(), lambda job, sid: {"solution_id": sid, "status": "INFRA_ERROR", "error": why}
        )
        out["fault"] = fault
        return out

    def _crashed(self, why: str) -> dict[str, Any]:
        """The child ended without finishing (a segfault, os._exit, the OOM killer) after loading."""
        job, calling = self.job, self.calling or {}
        culprit = calling.get("sid") if calling.get("job_id") == job and job is not None else None

        def make(j: Any, sid: str) -> dict[str, Any]:
            if j.get("job_id") != job:
                why_not = "not run: the worker process of its slice died and the container stopped"
                return {"solution_id": sid, **_not_run(why_not)}
            if sid == culprit:
                phase = calling.get("phase")
                return {
                    "solution_id": sid,
                    "status": "RUNTIME_ERROR",
                    "error": f"the worker process died during this solution's "
                    f"{phase + ' ' if phase else ''}call ({why})",
                }
            if culprit is not None:
                return {
                    "solution_id": sid,
                    **_not_run(f"not measured: {culprit} crashed the worker in the same job"),
                }
            return {
                "solution_id": sid,
                "status": "INFRA_ERROR",
                "isolate": True,
                "error": f"the worker process died ({why}) outside one solution's own call: "
                "each solution is retried alone",
            }

        out = self._base()
        out["jobs"] += self._unrun(set(), make)
        out["fault"] = f"crashed ({why})"
        return out

    def _hung(self, proc: Any) -> dict[str, Any]:
        hung, calling = self.job, self.calling or {}
        culprit = calling.get("sid") if calling.get("job_id") == hung else None
        timeout = self.job_timeout or 0.0

        def make(job: Any, sid: str) -> dict[str, Any]:
            if job.get("job_id") != hung:
                return {
                    "solution_id": sid,
                    **_not_run(
                        "not run: an earlier job of its slice hung and the container stopped"
                    ),
                }
            if sid == culprit:
                return {
                    "solution_id": sid,
                    "status": "TIMEOUT",
                    "error": f"no result within the {timeout:.0f} s job timeout ({calling.get('phase')} call "
                    "never returned; the worker was killed)",
                }
            if culprit is not None:
                return {
                    "solution_id": sid,
                    **_not_run(f"not measured: {culprit} hung in the same job"),
                }
            where = calling.get("phase") or "outside a solution's call"
            return {
                "solution_id": sid,
                "status": "INFRA_ERROR",
                "isolate": True,
                "error": f"the job passed its {timeout:.0f} s timeout in its {where} phase, "
                "not in one solution's own call: each solution is retried alone",
            }

        _reap(proc)
        out = self._base()
        out["jobs"] += self._unrun(set(), make)
        out["hung"] = hung
        out["poisoned"] = False
        return out


def _not_run(why: str) -> dict[str, Any]:
    return {"status": "INFRA_ERROR", "not_run": True, "error": why}


def _refused(request: dict[str, Any], why: str) -> dict[str, Any]:
    """A container that had a fault got another input: nothing runs, every job goes elsewhere."""
    return {
        "environment": None,
        "load": {},
        "jobs": [
            {
                "job_id": job.get("job_id"),
                "uuid": job["workload"]["uuid"],
                "repeat": job.get("repeat", 0),
                "results": [
                    {
                        "solution_id": sid,
                        **_not_run(f"not run: this container had a fault earlier ({why})"),
                    }
                    for sid in job.get("solutions") or []
                ],
                "restart": True,
            }
            for job in request.get("jobs", [])
        ],
        "timing_kind": None,
        "poisoned": False,
        "refused": why,
    }


def _kill_group(proc: Any) -> None:
    """SIGKILL the child's process group (whatever it holds: the interpreter lock, a spinning
    kernel, a compiler it started)."""
    import signal

    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


def _reap(proc: Any) -> int | None:
    import subprocess

    try:
        return int(proc.wait(timeout=KILL_WAIT_S))
    except subprocess.TimeoutExpired:
        return None


def _exit_reason(code: int | None) -> str:
    import signal

    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def probe() -> dict[str, Any]:
    """The first live check's body (``fibtui modal doctor``): what the container is. Python, the
    worker's description of the device (GPU, capability, torch and its CUDA, the driver), what
    ``nvidia-smi`` says the driver supports, and whether ``ncu`` is there."""
    import platform
    import shutil
    import subprocess

    t0 = time.monotonic()
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "task_id": os.environ.get("MODAL_TASK_ID"),
    }
    try:
        from fibtui.worker.env import describe

        out["environment"] = describe("cuda:0", "modal")
    except Exception as exc:  # noqa: BLE001 - the answer says what failed
        out["environment_error"] = f"{type(exc).__name__}: {exc}"[:400]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            text = subprocess.run(
                [smi], capture_output=True, text=True, timeout=30, check=False
            ).stdout
            out["nvidia_smi"] = text[:4000]
        except (OSError, subprocess.SubprocessError) as exc:
            out["nvidia_smi_error"] = str(exc)[:400]
    ncu = shutil.which("ncu")
    out["ncu"] = ncu
    if ncu:
        try:
            version = subprocess.run(
                [ncu, "--version"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
            out["ncu_version"] = (version.strip().splitlines() or [""])[-1][:200]
        except (OSError, subprocess.SubprocessError):
            pass
    out["wall_s"] = time.monotonic() - t0
    return out


#: what ncu prints when the container may not read the GPU's performance counters
NCU_NO_PERMISSION = "ERR_NVGPUCTRPERM"


def profile_slice(request: dict[str, Any]) -> dict[str, Any]:
    """Nsight Compute in the container (``fibtui ncu profile --backend modal``): ``request`` holds
    the worker's profile request (``profile``), the ncu command line built by the client
    (``ncu_argv``, with ``{report}`` and ``{request}`` for the paths here) and its page exports
    (``exports``: name -> argv with ``{report}``), and ``timeout_s``. Returns the report's bytes,
    the exported pages and ncu's log; or, when the container may not read the counters,
    ``error: ERR_NVGPUCTRPERM`` at once (nothing else runs). The profiled worker runs in ncu's
    child process, killed with its whole group at the timeout."""
    import subprocess
    import sys
    import tempfile

    timeout = float(request.get("timeout_s") or 600.0)
    with tempfile.TemporaryDirectory(prefix="fibtui-ncu-") as scratch:
        req = Path(scratch) / "request.json"
        rep = Path(scratch) / "profile.ncu-rep"
        req.write_text(json.dumps(request["profile"]), encoding="utf-8")
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])

        def argv(template: list[str]) -> list[str]:
            return [
                a.replace("{report}", str(rep))
                .replace("{request}", str(req))
                .replace("{python}", sys.executable)
                for a in template
            ]

        def run(cmd: list[str], limit: float) -> tuple[int | None, str]:
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                cwd=scratch,
                env=env,
                start_new_session=True,
            )
            try:
                text, _ = proc.communicate(timeout=limit)
                return proc.returncode, text or ""
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                text, _ = proc.communicate()
                return None, text or ""

        try:
            code, log = run(argv(request["ncu_argv"]), timeout)
        except OSError as exc:
            return {"error": f"cannot run ncu in the container: {exc}", "log": ""}
        if NCU_NO_PERMISSION in log:
            return {"error": NCU_NO_PERMISSION, "log": log[-20000:]}
        if code is None:
            return {
                "error": f"ncu did not finish within {timeout:.0f} s and was stopped",
                "log": log[-20000:],
            }
        if code != 0 or not rep.is_file():
            return {"error": f"ncu exited with {code}", "log": log[-20000:]}
        pages: dict[str, str] = {}
        for name, template in (request.get("exports") or {}).items():
            pcode, text = run(argv(template), max(60.0, timeout / 2))
            if pcode != 0:
                return {
                    "error": f"exporting the {name} page failed ({pcode})",
                    "log": text[-20000:],
                }
            pages[name] = text
        return {"report": rep.read_bytes(), "pages": pages, "log": log[-200000:]}


@dataclass
class ModalHandles:
    app: Any  # modal.App
    function: Any  # modal.Function wrapping run_slice
    image: Any  # modal.Image
    volume: Any | None  # modal.Volume, when the slice reads safetensors from it
    #: makes the queue the containers' live events go through (``modal.Queue.ephemeral``)
    events: Callable[[], Any] | None = None
    #: modal.Function wrapping :func:`probe` (``fibtui modal doctor``)
    probe: Any = None
    #: modal.Function wrapping :func:`profile_slice` (``fibtui ncu profile --backend modal``)
    profile: Any = None


def image_for(image_ref: str, add_python: str | None = None, pip: Iterable[str] = ()) -> Any:
    """The contest image (or the configured one) with fibtui's worker added. Building it is lazy:
    nothing reaches Modal until the app runs."""
    image = modal.Image.from_registry(image_ref, add_python=add_python or None)
    image = image.env({"PYTHONUNBUFFERED": "1", "FIBTUI_CACHE_DIR": "/tmp/fibtui-cache"})
    extra = [p for p in pip if p]
    if extra:
        image = image.pip_install(*extra)
    return image.add_local_python_source(*CONTAINER_MODULES)


def build_app(
    *,
    app_name: str,
    gpu: str,
    image_ref: str,
    timeout_s: float,
    volume_name: str | None = None,
    mount_path: str = "/data",
    add_python: str | None = None,
    pip: Iterable[str] = (),
    max_containers: int | None = None,
    cpu: float | None = None,
    memory_mb: int | None = None,
    startup_timeout_s: float | None = None,
    scaledown_window_s: float | None = None,
    probe_timeout_s: float = 120.0,
    profile_timeout_s: float = 900.0,
) -> ModalHandles:
    """A Modal App holding the GPU function. Nothing here talks to Modal: objects are lazy until
    ``app.run()``; ``function.local(request)`` runs the body in this process."""
    app = modal.App(app_name)
    image = image_for(image_ref, add_python, pip)
    volume = modal.Volume.from_name(volume_name, create_if_missing=True) if volume_name else None
    kwargs: dict[str, Any] = {
        "image": image,
        "gpu": gpu,
        "timeout": max(10, int(timeout_s)),
        "retries": 0,  # the runner retries failed slices itself, alone, and merges them back
        "include_source": False,
        "name": "run_slice",
    }
    if volume is not None:
        kwargs["volumes"] = {mount_path: volume}
    if max_containers:
        kwargs["max_containers"] = int(max_containers)
    if cpu:
        kwargs["cpu"] = float(cpu)  # Modal's default reservation is 0.125 CPU
    if memory_mb:
        kwargs["memory"] = int(memory_mb)  # MiB; Modal's default is 128
    if startup_timeout_s:
        kwargs["startup_timeout"] = max(10, int(startup_timeout_s))
    if scaledown_window_s:
        kwargs["scaledown_window"] = min(3600, max(2, int(scaledown_window_s)))  # Modal: 2 to 3600
    function = app.function(**kwargs)(run_slice)
    # two more bodies on the same image and GPU: the first live check (``fibtui modal doctor``)
    # and Nsight Compute (``fibtui ncu profile --backend modal``); each call is bounded by its own
    # timeout (``probe_timeout_s``, ``profile_timeout_s``)
    probe_fn = app.function(**{**kwargs, "name": "probe", "timeout": int(probe_timeout_s)})(probe)
    profile_fn = app.function(
        **{**kwargs, "name": "profile_slice", "timeout": max(10, int(profile_timeout_s))}
    )(profile_slice)
    return ModalHandles(
        app,
        function,
        image,
        volume,
        events=modal.Queue.ephemeral,
        probe=probe_fn,
        profile=profile_fn,
    )


# --------------------------------------------------------------------------------------------
# Calling the function: on Modal (spawn, get, cancel) or in this process (Function.local())
# --------------------------------------------------------------------------------------------


class SliceTimeout(Exception):
    """A slice did not return within its per-call timeout."""


class ModalCall:
    """One spawned call (``modal.FunctionCall``)."""

    def __init__(self, call: Any) -> None:
        self.call = call

    def result(self, timeout_s: float | None) -> dict[str, Any]:
        try:
            return self.call.get(timeout=timeout_s)
        except TimeoutError:  # the builtin one: nothing came back in time (modal's own differ)
            self.cancel()
            raise SliceTimeout(f"no result within {timeout_s:.0f} s") from None

    def cancel(self) -> None:
        try:
            self.call.cancel(terminate_containers=True)
        except Exception:  # noqa: BLE001 - the call may be gone already; cancelling is best effort
            pass


class _LineStream:
    """A text stream that hands every complete line to ``sink`` (Modal's output, for the CLI's
    progress lines, the Runs pane and the run folder's modal.log)."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        self.sink = sink
        self._buf = ""

    def write(self, text: str) -> int:
        self._buf += text.replace("\r", "\n")
        while "\n" in self._buf:
            line, self._buf = self._buf.split("\n", 1)
            if line.strip():
                self.sink(line.rstrip())
        return len(text)

    def flush(self) -> None:
        if self._buf.strip():
            self.sink(self._buf.rstrip())
        self._buf = ""

    def isatty(self) -> bool:
        return False


@contextmanager
def modal_output(sink: Callable[[str], None] | None) -> Iterator[None]:
    """Modal's own output (image build and pull, container start, function logs) while the app
    runs, as ``modal.enable_output()`` gives it, but line by line to ``sink`` instead of this
    process's stdout (which is the TUI's screen, or --json's document). Without a sink, nothing."""
    if sink is None:
        yield
        return
    from rich.console import Console

    try:
        # private to the modal client (1.6): a client without them shows no output, and says so
        from modal._output.rich import RichOutputManager
        from modal.output import OutputManager

        manager = RichOutputManager()
        stream = _LineStream(sink)
        text_io = cast(IO[str], stream)  # rich only calls write() and flush() on its file
        # the manager's two consoles (modal 1.6: _console, _stderr_console) write to the sink
        for attr in ("_console", "_stderr_console"):
            if not hasattr(manager, attr):
                raise AttributeError(attr)
            setattr(
                manager, attr, Console(file=text_io, width=120, highlight=False, color_system=None)
            )
    except (ImportError, AttributeError) as exc:  # another client version: its output is not shown
        sink(
            f"Modal's own output (image build, logs) is not shown: this modal client lacks "
            f"{exc} (fibtui is tested with modal 1.6)"
        )
        yield
        return
    previous = OutputManager.get()
    OutputManager._set(manager)
    try:
        yield
    finally:
        stream.flush()
        OutputManager._set(previous)


class ModalCaller:
    """Spawns slices on Modal inside one ephemeral app run."""

    in_process = False

    def __init__(self, handles: ModalHandles, output: Callable[[str], None] | None = None) -> None:
        self.handles = handles
        self.output = output
        #: the ephemeral app's id and the image's, once the app runs (recorded in the run folder)
        self.app_id: str | None = None
        self.image_id: str | None = None

    @contextmanager
    def session(self) -> Iterator[ModalCaller]:
        with modal_output(self.output), self.handles.app.run():
            self.app_id = getattr(self.handles.app, "app_id", None)
            self.image_id = getattr(getattr(self.handles, "image", None), "object_id", None)
            # the containers' live events: an ephemeral modal.Queue, passed to every call
            factory = getattr(self.handles, "events", None)
            if factory is None:
                yield self
                return
            with factory() as events:
                self._events = events
                stop = threading.Event()
                reader = threading.Thread(
                    target=self._read, args=(events, stop), daemon=True, name="fibtui-modal-events"
                )
                reader.start()
                try:
                    yield self
                finally:
                    stop.set()
                    reader.join(timeout=5)
                    self._events = None

    _events: Any = None
    _sink: Callable[[Any], None] | None = None

    def listen(self, sink: Callable[[Any], None]) -> None:
        """Send the containers' live events (run_slice's ``progress``) to ``sink``."""
        self._sink = sink

    def _read(self, events: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                items = events.get_many(100, timeout=1.0)
            except Exception:  # noqa: BLE001 - the app is ending, or the network is: results still come back
                if stop.wait(1.0):
                    return
                continue
            for item in items or []:
                if self._sink is not None:
                    self._sink(item)

    def submit(self, request: dict[str, Any]) -> ModalCall:
        if self._events is None:
            return ModalCall(self.handles.function.spawn(request))
        return ModalCall(self.handles.function.spawn(request, self._events))


class LocalCall:
    def __init__(self, future: Any) -> None:
        self.future = future

    def result(self, timeout_s: float | None) -> dict[str, Any]:
        try:
            return self.future.result(timeout=timeout_s)
        except TimeoutError:
            self.cancel()
            raise SliceTimeout(f"no result within {timeout_s:.0f} s") from None

    def cancel(self) -> None:
        self.future.cancel()  # a slice already running in-process finishes in the background


class InProcessCaller:
    """Runs the Modal function's body in this process with ``Function.local()`` (modal 1.6: no
    credentials, no network), ``parallel`` slices at a time. For tests, and for checking the Modal
    path on a machine that cannot reach Modal."""

    in_process = True

    def __init__(self, function: Any, parallel: int = 1, interpreter: bool = False) -> None:
        self.function = function
        self.parallel = max(1, parallel)
        self.interpreter = interpreter
        self._pool: Any = None

    @contextmanager
    def session(self) -> Iterator[InProcessCaller]:
        from concurrent.futures import ThreadPoolExecutor

        old = os.environ.get("TRITON_INTERPRET")
        if self.interpreter:
            os.environ["TRITON_INTERPRET"] = "1"
        self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="fibtui-modal-local")
        try:
            yield self
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            if self.interpreter:
                if old is None:
                    os.environ.pop("TRITON_INTERPRET", None)
                else:
                    os.environ["TRITON_INTERPRET"] = old

    _sink: Callable[[Any], None] | None = None

    def listen(self, sink: Callable[[Any], None]) -> None:
        """Send the slices' live events (run_slice's ``progress``) to ``sink``."""
        self._sink = sink

    def submit(self, request: dict[str, Any]) -> LocalCall:
        assert self._pool is not None, "submit inside session()"
        progress = _Put(self._sink) if self._sink is not None else None
        return LocalCall(
            self._pool.submit(_fresh_container, self.function.local, request, progress)
        )


class _Put:
    """A ``put`` for run_slice's ``progress`` that hands each event to a function."""

    def __init__(self, sink: Callable[[Any], None]) -> None:
        self.put = sink


def _fresh_container(
    body: Callable[..., dict[str, Any]], request: dict[str, Any], progress: Any = None
) -> dict[str, Any]:
    """Run ``body`` as if in a container of its own (in-process calls share one process)."""
    CONTAINER_STATE.set({})
    return body(request, progress)


# --------------------------------------------------------------------------------------------
# The dataset's blobs on a Volume
# --------------------------------------------------------------------------------------------


def volume_listing(volume: Any, remote_dirs: Iterable[str]) -> dict[str, int]:
    """``{remote path: size}`` of every file under ``remote_dirs`` (absent folders list nothing)."""
    found: dict[str, int] = {}
    for folder in remote_dirs:
        try:
            entries = volume.listdir(folder, recursive=True)
        except NotFoundError:
            continue
        for e in entries:
            if int(getattr(e, "type", 1)) == 1:  # FileEntryType.FILE
                path = "/" + str(e.path).lstrip("/")
                found[path] = int(getattr(e, "size", 0))
    return found


def upload_files(volume: Any, files: Iterable[tuple[Path, str]], log: Callable[[str], None]) -> int:
    """Upload ``(local file, remote path)`` pairs in one batch (overwriting stale copies)."""
    files = list(files)
    if not files:
        return 0
    with volume.batch_upload(force=True) as batch:
        for local, remote in files:
            batch.put_file(str(local), remote)
    log(f"uploaded {len(files)} file(s) to the volume")
    return len(files)
