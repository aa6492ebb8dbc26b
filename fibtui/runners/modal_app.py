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
import os
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

from fibtui.worker.protocol import WATCHDOG_INTERVAL_S as _WATCH_S

#: What the container needs from fibtui (see the module docstring).
CONTAINER_MODULES = (
    "fibtui.worker",
    "fibtui.core.toolchain",
    "fibtui.core.gpuarch",
    "fibtui.core.status",
    "fibtui.core.presets",
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


def run_slice(request: dict[str, Any]) -> dict[str, Any]:
    """The GPU function's body: run one slice of jobs with fibtui's worker engine.

    ``request`` is the worker's one-shot request (``config``, ``definition``, ``solutions``,
    ``jobs``) plus ``slice_id`` and ``job_timeout_s``. Returns :func:`fibtui.worker.engine.execute`'s
    result with, per job, ``started`` (ISO time), and ``slice_id`` / ``container`` (host, Modal task
    id, wall time).

    A per-job watchdog (``job_timeout_s``, the local runner's job timeout): the jobs run in a thread
    of their own; a job that passes its timeout makes the slice return at once with what finished,
    the solution whose call never returned as TIMEOUT, and every job not run marked ``not_run`` (the
    runner sends those to a fresh container without counting an attempt). A hung or poisoned
    container then stops taking inputs, so Modal never gives it another slice.
    """
    t0 = time.monotonic()
    config = request.get("config") or {}
    if config.get("backend") == "interpreter":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from fibtui.worker.engine import execute

    started: dict[Any, str] = {}
    lock = threading.Lock()
    state: dict[str, Any] = {
        "job": None,
        "since": None,
        "calling": None,
        "results": [],
        "load": None,
        "environment": None,
    }

    def emit(event: dict[str, Any]) -> None:
        kind = event.get("event")
        with lock:
            if kind == "job_started":
                started[event.get("job_id")] = _now_iso()
                state.update(job=event.get("job_id"), since=time.monotonic(), calling=None)
            elif kind == "calling":
                state["calling"] = event
            elif kind == "result":
                state["results"].append({k: v for k, v in event.items() if k != "event"})
                state.update(job=None, since=None, calling=None)
            elif kind == "loaded":
                state.update(load=event.get("solutions"), environment=event.get("environment"))

    job_timeout = float(request.get("job_timeout_s") or 0)
    if job_timeout <= 0:
        out = execute(request, emit)
    else:  # the watchdog needs to know which solution is in a call
        request = {**request, "config": {**config, "report_calls": True}}
        out = _watched(request, emit, state, lock, job_timeout, execute)
    if out.get("poisoned") or out.get("hung"):
        out["stopped_taking_inputs"] = stop_taking_inputs()
    for job in out.get("jobs", []):
        job["started"] = started.get(job.get("job_id"))
    out["slice_id"] = request.get("slice_id")
    out["container"] = {
        "host": socket.gethostname(),
        "task_id": os.environ.get("MODAL_TASK_ID"),
        "region": os.environ.get("MODAL_REGION"),
        "wall_s": time.monotonic() - t0,
    }
    return out


def _watched(
    request: dict[str, Any],
    emit: Callable[[dict[str, Any]], None],
    state: dict[str, Any],
    lock: threading.Lock,
    job_timeout: float,
    execute: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """Run ``execute`` in a thread; return its result, or the partial one when a job hangs."""
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            box["out"] = execute(request, emit)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the function's own thread
            box["error"] = exc

    worker = threading.Thread(target=body, daemon=True, name="fibtui-slice")
    worker.start()
    while True:
        worker.join(_WATCH_S)
        if not worker.is_alive():
            if "error" in box:
                raise box["error"]
            return box["out"]
        with lock:
            hung = (
                state["job"]
                if state["since"] is not None and time.monotonic() - state["since"] > job_timeout
                else None
            )
            if hung is None:
                continue
            return _hung_result(request, state, hung, job_timeout)


def _hung_result(
    request: dict[str, Any], state: dict[str, Any], hung: Any, job_timeout: float
) -> dict[str, Any]:
    """The slice's result after job ``hung`` passed its timeout: the finished jobs as they are; in
    the hung job, the solution whose call never returned is TIMEOUT (when a call of one solution
    was in flight) and the others were not run; when no single solution can be blamed (the
    reference, or both solutions timed together), each solution of it is retried alone."""
    calling = state.get("calling") or {}
    culprit = calling.get("sid") if calling.get("job_id") == hung else None
    done = {r.get("job_id") for r in state["results"]}
    jobs: list[dict[str, Any]] = list(state["results"])
    for job in request.get("jobs", []):
        if job.get("job_id") in done:
            continue
        sids = list(job.get("solutions") or [])
        results = []
        for sid in sids:
            if job.get("job_id") != hung:
                results.append(
                    {
                        "solution_id": sid,
                        "status": "INFRA_ERROR",
                        "not_run": True,
                        "error": "not run: an earlier job of its slice hung and the container stopped",
                    }
                )
            elif sid == culprit:
                results.append(
                    {
                        "solution_id": sid,
                        "status": "TIMEOUT",
                        "error": f"no result within the {job_timeout:.0f} s job timeout ({calling.get('phase')} call "
                        "never returned)",
                    }
                )
            elif culprit is not None:
                results.append(
                    {
                        "solution_id": sid,
                        "status": "INFRA_ERROR",
                        "not_run": True,
                        "error": f"not measured: {culprit} hung in the same job",
                    }
                )
            else:
                where = calling.get("phase") or "outside a solution's call"
                results.append(
                    {
                        "solution_id": sid,
                        "status": "INFRA_ERROR",
                        "isolate": True,
                        "error": f"the job passed its {job_timeout:.0f} s timeout in its {where} phase, "
                        "not in one solution's own call: each solution is retried alone",
                    }
                )
        jobs.append(
            {
                "job_id": job.get("job_id"),
                "uuid": job["workload"]["uuid"],
                "repeat": job.get("repeat", 0),
                "results": results,
                "restart": True,
            }
        )
    return {
        "environment": state.get("environment"),
        "load": state.get("load") or {},
        "jobs": jobs,
        "timing_kind": None,
        "poisoned": False,
        "hung": hung,
    }


@dataclass
class ModalHandles:
    app: Any  # modal.App
    function: Any  # modal.Function wrapping run_slice
    image: Any  # modal.Image
    volume: Any | None  # modal.Volume, when the slice reads safetensors from it


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
    function = app.function(**kwargs)(run_slice)
    return ModalHandles(app, function, image, volume)


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
    from modal.output import OutputManager
    from rich.console import Console

    try:
        from modal._output.rich import RichOutputManager

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
    except (ImportError, AttributeError):  # another client version: its output is not shown
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
            yield self

    def submit(self, request: dict[str, Any]) -> ModalCall:
        return ModalCall(self.handles.function.spawn(request))


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

    def submit(self, request: dict[str, Any]) -> LocalCall:
        assert self._pool is not None, "submit inside session()"
        return LocalCall(self._pool.submit(self.function.local, request))


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
