"""The Modal App: one GPU function that runs fibtui's worker on a slice of jobs.

Only the Modal backend imports this module (``fibtui.runners.modal_runner`` does, lazily, when a
run actually goes to Modal or runs the function body in-process); fibtui.core and the TUI's start
never do. The container needs only two things from fibtui: the standalone worker package
(``fibtui.worker``: standard library + torch + triton) and this file, added to the image with
``add_local_python_source`` (the function is registered with ``include_source=False``, so the rest
of fibtui, with its polars/textual imports, never travels).

The function body, :func:`run_slice`, is :func:`fibtui.worker.engine.execute` (the same entry point
as the local runner's worker) plus the time each job started and where it ran. It returns
structured data; nothing is read from a console.

Credentials are Modal's own (``MODAL_TOKEN_ID``/``MODAL_TOKEN_SECRET`` or ``~/.modal.toml``, read
by the modal client itself); fibtui never reads, prints or records a token.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import modal
from modal.exception import NotFoundError

#: What the container needs from fibtui (see the module docstring).
CONTAINER_MODULES = ("fibtui.worker", "fibtui.runners.modal_app")


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_slice(request: dict[str, Any]) -> dict[str, Any]:
    """The GPU function's body: run one slice of jobs with fibtui's worker engine.

    ``request`` is the worker's one-shot request (``config``, ``definition``, ``solutions``,
    ``jobs``) plus ``slice_id``. Returns :func:`fibtui.worker.engine.execute`'s result with, per
    job, ``started`` (ISO time), and ``slice_id`` / ``container`` (host, Modal task id, wall time).
    """
    t0 = time.monotonic()
    config = request.get("config") or {}
    if config.get("backend") == "interpreter":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    from fibtui.worker.engine import execute

    started: dict[Any, str] = {}

    def emit(event: dict[str, Any]) -> None:
        if event.get("event") == "job_started":
            started[event.get("job_id")] = _now_iso()

    out = execute(request, emit)
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


class ModalCaller:
    """Spawns slices on Modal inside one ephemeral app run."""

    in_process = False

    def __init__(self, handles: ModalHandles) -> None:
        self.handles = handles

    @contextmanager
    def session(self):
        with self.handles.app.run():
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
    def session(self):
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
