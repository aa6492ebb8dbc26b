"""A small Modal control plane of fibtui's own, for tests: a gRPC server on 127.0.0.1 that speaks
Modal's protocol (``modal_proto``, shipped in the modal wheel), so the real modal client, the
pinned version, talks to it as it talks to Modal: ``App.run()``, ``Function.spawn``,
``FunctionCall.get`` and ``cancel``, ``modal.Queue``; and the real container entrypoint
(``python -m modal._container_entrypoint``) runs in a subprocess per container, fetching its
inputs and sending its outputs here.

What it keeps of Modal's behaviour (docs/modal.md lists the client source lines each rests on):

- a call's input waits until a container takes it; at most ``max_containers`` containers run
  (the function's ``concurrency_limit``); a container takes inputs one after the other, and one
  that got ``ContainerStop(graceful)`` (``modal.experimental.stop_fetching_inputs``) is given no
  more (the next fetch gets the kill switch, and the entrypoint exits);
- the execution timeout (the function's ``timeout_secs``) counts from when a container takes the
  input; past it the container is killed and the call fails with a timeout result
  (``GENERIC_STATUS_TIMEOUT``, which the client raises as ``FunctionTimeoutError``);
- a container idle for ``task_idle_timeout_secs`` (``scaledown_window``) is stopped;
- ``FunctionCallCancel(terminate_containers)`` kills the containers running the call's inputs.

What it is not: images are not built (every ``ImageGetOrCreate`` succeeds at once) and the
container runs this machine's Python with this checkout on ``PYTHONPATH`` (what
``add_local_python_source`` would have mounted); volumes and blobs are not served. Each
container's billed seconds are its process's lifetime (start to exit), kept in ``containers``.

Every RPC it receives is counted in ``calls``; one it does not implement answers UNIMPLEMENTED
and is listed in ``unimplemented`` (tests assert that list is empty).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpclib.const
import grpclib.server
from google.protobuf import empty_pb2
from grpclib import GRPCError, Status
from modal_proto import api_grpc, api_pb2

ROOT = Path(__file__).resolve().parents[1]
_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("modal_test_task", default=None)
SUCCESS = api_pb2.GenericResult.GENERIC_STATUS_SUCCESS


@dataclass
class Input:
    input_id: str
    call_id: str
    function_id: str
    args: bytes
    data_format: int
    taken_by: str | None = None
    taken_at: float | None = None
    output: Any = None  # api_pb2.FunctionGetOutputsItem, once there


@dataclass
class Container:
    task_id: str
    function_id: str
    proc: subprocess.Popen
    started: float
    ended: float | None = None
    stopped: bool = False  # ContainerStop(graceful): no more inputs
    killed: str | None = None
    inputs: list[str] = field(default_factory=list)
    idle_since: float | None = None
    log: Path | None = None

    @property
    def billed_s(self) -> float:
        return (self.ended or time.monotonic()) - self.started


class ModalServer:
    """The servicer and its state. ``start()`` serves on 127.0.0.1 and returns the URL."""

    def __init__(self, container_env: dict[str, str] | None = None) -> None:
        self.container_env = dict(container_env or {})
        self.calls: Counter[str] = Counter()
        self.unimplemented: list[str] = []
        self.functions: dict[str, api_pb2.Function] = {}
        self.function_data: dict[str, api_pb2.FunctionData] = {}
        self.function_names: dict[str, str] = {}
        self.inputs: dict[str, Input] = {}
        self.containers: list[Container] = []
        self.queues: dict[str, deque[bytes]] = {}
        self.cancelled: set[str] = set()
        self.apps_done: set[str] = set()
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpclib.server.Server | None = None
        self._scratch = Path(tempfile.mkdtemp(prefix="fibtui-modal-servicer-"))
        self._stop = threading.Event()
        self.url = ""

    # -- serving -------------------------------------------------------------------------------

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        names = {p.rsplit("/", 1)[1] for p in _base_paths()}
        out = {}
        for path, handler in _base_paths().items():
            name = path.rsplit("/", 1)[1]
            out[path] = grpclib.const.Handler(
                self._dispatch(name), handler.cardinality, handler.request_type, handler.reply_type
            )
        assert names
        return out

    def _dispatch(self, name: str):
        async def handle(stream) -> None:
            request = await stream.recv_message()
            # which container asks: each is started with its task id in a header of every request
            # (MODAL_OVERRIDE_HEADERS); Modal knows it from the container's own credentials
            _TASK.set(dict(stream.metadata or {}).get("x-fibtui-test-task"))
            with self.lock:
                self.calls[name] += 1
            impl = getattr(self, name, None)
            if impl is None:
                self.unimplemented.append(name)
                raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not served by the test servicer")
            reply = await impl(request)
            if reply is not None:
                await stream.send_message(reply)

        return handle

    def start(self) -> str:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            self._server = grpclib.server.Server([self])
            loop.run_until_complete(self._server.start("127.0.0.1", 0))
            port = self._server._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            ready.set()
            loop.run_forever()

        threading.Thread(target=main, daemon=True, name="modal-servicer").start()
        ready.wait(10)
        threading.Thread(target=self._monitor, daemon=True, name="modal-servicer-timeouts").start()
        return self.url

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            for c in self.containers:
                self._kill(c, "the servicer stopped")
        if self._loop is not None and self._server is not None:
            self._server.close()
            self._loop.call_soon_threadsafe(self._loop.stop)

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    # -- the client's app ----------------------------------------------------------------------

    async def ClientHello(self, req):
        return api_pb2.ClientHelloResponse()

    async def AppCreate(self, req):
        return api_pb2.AppCreateResponse(app_id=self._id("ap"))

    async def EnvironmentGetOrCreate(self, req):
        return api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-1",
            metadata=api_pb2.EnvironmentMetadata(
                name="main", settings=api_pb2.EnvironmentSettings(image_builder_version="2025.06")
            ),
        )

    async def AppHeartbeat(self, req):
        return empty_pb2.Empty()

    async def AppPublish(self, req):
        return api_pb2.AppPublishResponse()

    async def AppClientDisconnect(self, req):
        with self.lock:
            self.apps_done.add(req.app_id)
            for c in self.containers:  # an ephemeral app's containers go with it
                self._kill(c, "the app stopped")
        return empty_pb2.Empty()

    async def AppGetLogs(self, req):
        while req.app_id not in self.apps_done and not self._stop.is_set():
            await asyncio.sleep(0.2)
        return api_pb2.TaskLogsBatch(app_done=True)

    async def ImageGetOrCreate(self, req):
        return api_pb2.ImageGetOrCreateResponse(
            image_id=self._id("im"),
            result=api_pb2.GenericResult(status=SUCCESS),
            metadata=api_pb2.ImageMetadata(
                python_version_info=sys.version.split()[0], image_builder_version="2025.06"
            ),
        )

    async def MountGetOrCreate(self, req):
        return api_pb2.MountGetOrCreateResponse(mount_id=self._id("mo"))

    async def MountBatchedCheckExistence(self, req):
        return api_pb2.MountBatchedCheckExistenceResponse()

    async def MountPutFile(self, req):
        return api_pb2.MountPutFileResponse(exists=True)

    async def FunctionPrecreate(self, req):
        fid = self._id("fu")
        with self.lock:
            self.function_names[fid] = req.function_name
        return api_pb2.FunctionPrecreateResponse(
            function_id=fid,
            handle_metadata=api_pb2.FunctionHandleMetadata(
                function_name=req.function_name, function_type=req.function_type
            ),
        )

    async def FunctionCreate(self, req):
        fid = req.existing_function_id or self._id("fu")
        data = api_pb2.FunctionData()
        if req.HasField("function_data"):
            data.CopyFrom(req.function_data)
            fn = api_pb2.Function()
            fn.CopyFrom(req.function_data.ranked_functions[0].function)
        else:  # the client sends a Function without GPU ranks: FunctionData is what it reads back
            fn = req.function
            data.module_name, data.function_name = fn.module_name, fn.function_name
            data.function_type = fn.function_type
            data.timeout_secs, data.concurrency_limit = fn.timeout_secs, fn.concurrency_limit
            data.task_idle_timeout_secs = fn.task_idle_timeout_secs
            data.supported_input_formats.extend(fn.supported_input_formats)
            data.supported_output_formats.extend(fn.supported_output_formats)
            data.ranked_functions.append(api_pb2.FunctionData.RankedFunction(rank=0, function=fn))
        # the limits Modal enforces, wherever this client put them
        for name in (
            "timeout_secs",
            "concurrency_limit",
            "task_idle_timeout_secs",
            "startup_timeout_secs",
        ):
            if getattr(data, name, 0) and hasattr(fn, name) and not getattr(fn, name):
                setattr(fn, name, getattr(data, name))
        with self.lock:
            self.functions[fid] = fn
            self.function_data[fid] = data
        return api_pb2.FunctionCreateResponse(
            function_id=fid,
            function_data=data,
            handle_metadata=api_pb2.FunctionHandleMetadata(
                function_name=data.function_name,
                function_type=data.function_type,
                supported_input_formats=list(data.supported_input_formats),
                supported_output_formats=list(data.supported_output_formats),
            ),
        )

    # -- calls ---------------------------------------------------------------------------------

    async def FunctionMap(self, req):
        call_id = self._id("fc")
        items = []
        with self.lock:
            for item in req.pipelined_inputs:
                inp = Input(
                    self._id("in"),
                    call_id,
                    req.function_id,
                    item.input.args,
                    item.input.data_format,
                )
                self.inputs[inp.input_id] = inp
                items.append(
                    api_pb2.FunctionPutInputsResponseItem(idx=item.idx, input_id=inp.input_id)
                )
            self._schedule(req.function_id)
        return api_pb2.FunctionMapResponse(
            function_call_id=call_id,
            pipelined_inputs=items,
            retry_policy=api_pb2.FunctionRetryPolicy(retries=0),
        )

    async def FunctionGetOutputs(self, req):
        deadline = time.monotonic() + min(float(req.timeout or 0), 5.0)
        while True:
            with self.lock:
                mine = [i for i in self.inputs.values() if i.call_id == req.function_call_id]
                done = [i.output for i in mine if i.output is not None]
                if done or time.monotonic() >= deadline:
                    return api_pb2.FunctionGetOutputsResponse(
                        outputs=done,
                        num_unfinished_inputs=len(mine) - len(done),
                        last_entry_id="0-0",
                    )
            await asyncio.sleep(0.05)

    async def FunctionCallCancel(self, req):
        with self.lock:
            self.cancelled.add(req.function_call_id)
            for inp in self.inputs.values():
                if inp.call_id != req.function_call_id or inp.output is not None:
                    continue
                inp.output = _failure(
                    inp, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED, "the call was cancelled"
                )
                if req.terminate_containers and inp.taken_by:
                    self._kill(self._container(inp.taken_by), "its call was cancelled")
        return empty_pb2.Empty()

    # -- queues (modal.Queue.ephemeral: the containers' live events) --------------------------

    async def QueueGetOrCreate(self, req):
        qid = self._id("qu")
        with self.lock:
            self.queues[qid] = deque()
        return api_pb2.QueueGetOrCreateResponse(queue_id=qid)

    async def QueueHeartbeat(self, req):
        return empty_pb2.Empty()

    async def QueuePut(self, req):
        with self.lock:
            self.queues.setdefault(req.queue_id, deque()).extend(req.values)
        return empty_pb2.Empty()

    async def QueueGet(self, req):
        deadline = time.monotonic() + min(float(req.timeout or 0), 5.0)
        while True:
            with self.lock:
                q = self.queues.get(req.queue_id, deque())
                if q or time.monotonic() >= deadline:
                    n = max(1, req.n_values)
                    values = [q.popleft() for _ in range(min(n, len(q)))]
                    return api_pb2.QueueGetResponse(values=values)
            await asyncio.sleep(0.05)

    async def QueueDelete(self, req):
        with self.lock:
            self.queues.pop(req.queue_id, None)
        return empty_pb2.Empty()

    # -- containers ----------------------------------------------------------------------------

    def _container(self, task_id: str) -> Container:
        return next(c for c in self.containers if c.task_id == task_id)

    def _schedule(self, function_id: str) -> None:
        """Start a container for waiting inputs while the function has room (lock held)."""
        fn = self.functions.get(function_id)
        if fn is None:
            return
        waiting = [
            i
            for i in self.inputs.values()
            if i.function_id == function_id and i.taken_by is None and i.output is None
        ]
        live = [c for c in self.containers if c.function_id == function_id and c.ended is None]
        idle = [c for c in live if not c.stopped and c.idle_since is not None]
        cap = fn.concurrency_limit or (fn.autoscaler_settings.max_containers or 10)
        room = cap - len(live)
        for _ in range(max(0, min(len(waiting) - len(idle), room))):
            self._launch(function_id, fn)

    def _launch(self, function_id: str, fn: api_pb2.Function) -> None:
        task_id = self._id("ta")
        args = api_pb2.ContainerArguments(
            task_id=task_id, function_id=function_id, app_id="ap-1", function_def=fn
        )
        path = self._scratch / f"{task_id}.args"
        path.write_bytes(args.SerializeToString())
        log = self._scratch / f"{task_id}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MODAL_TOKEN", "PYTEST"))}
        env.update(
            {
                "MODAL_SERVER_URL": self.url,
                "MODAL_IS_REMOTE": "1",
                "MODAL_TASK_ID": task_id,
                "MODAL_CONTAINER_ARGUMENTS_PATH": str(path),
                "MODAL_OVERRIDE_HEADERS": f"x-fibtui-test-task:{task_id}",
                "PYTHONPATH": os.pathsep.join(
                    [str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]
                ),
            }
        )
        env.update(self.container_env)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "modal._container_entrypoint"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self._scratch,
                env=env,
                start_new_session=True,
            )
        self.containers.append(Container(task_id, function_id, proc, time.monotonic(), log=log))

    def _kill(self, c: Container, why: str) -> None:
        if c.ended is not None:
            return
        c.killed = c.killed or why
        try:
            os.killpg(c.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _monitor(self) -> None:
        """Modal's side: execution timeouts, scale-down, exits."""
        while not self._stop.is_set():
            time.sleep(0.05)
            now = time.monotonic()
            with self.lock:
                for c in self.containers:
                    if c.ended is None and c.proc.poll() is not None:
                        c.ended = now
                        for inp in self.inputs.values():  # a container that died with an input
                            if inp.taken_by == c.task_id and inp.output is None:
                                inp.output = _failure(
                                    inp,
                                    api_pb2.GenericResult.GENERIC_STATUS_TERMINATED
                                    if not c.killed or "timeout" not in c.killed
                                    else api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT,
                                    c.killed or f"the container exited (code {c.proc.returncode})",
                                )
                        self._schedule(c.function_id)
                for inp in self.inputs.values():
                    if inp.output is not None or inp.taken_at is None:
                        continue
                    limit = self.functions[inp.function_id].timeout_secs
                    if limit and now - inp.taken_at > limit:
                        c = self._container(inp.taken_by or "")
                        self._kill(c, f"input {inp.input_id} timed out after {limit} s (timeout)")
                for c in self.containers:
                    fn = self.functions[c.function_id]
                    window = fn.task_idle_timeout_secs or 60
                    if c.ended is None and c.idle_since is not None and now - c.idle_since > window:
                        c.stopped = True  # scaled down: its next fetch gets the kill switch

    async def ContainerHello(self, req):
        return empty_pb2.Empty()

    async def ContainerHeartbeat(self, req):
        await asyncio.sleep(1.0)
        return api_pb2.ContainerHeartbeatResponse()

    async def ContainerStop(self, req):
        with self.lock:
            self._container(req.task_id).stopped = True
        return api_pb2.ContainerStopResponse()

    async def FunctionGetInputs(self, req):
        deadline = time.monotonic() + 2.0
        task = _TASK.get()
        while True:
            with self.lock:
                c = next((x for x in self.containers if x.task_id == task), None)
                if c is None or c.stopped:
                    return api_pb2.FunctionGetInputsResponse(
                        inputs=[api_pb2.FunctionGetInputsItem(kill_switch=True)]
                    )
                inp = next(
                    (
                        i
                        for i in self.inputs.values()
                        if i.function_id == req.function_id
                        and i.taken_by is None
                        and i.output is None
                    ),
                    None,
                )
                if inp is not None:
                    inp.taken_by, inp.taken_at = c.task_id, time.monotonic()
                    c.inputs.append(inp.input_id)
                    c.idle_since = None
                    return api_pb2.FunctionGetInputsResponse(
                        inputs=[
                            api_pb2.FunctionGetInputsItem(
                                input_id=inp.input_id,
                                function_call_id=inp.call_id,
                                input=api_pb2.FunctionInput(
                                    args=inp.args, data_format=inp.data_format
                                ),
                            )
                        ]
                    )
                if c.idle_since is None:
                    c.idle_since = time.monotonic()
                if time.monotonic() >= deadline:
                    return api_pb2.FunctionGetInputsResponse()
            await asyncio.sleep(0.05)

    async def FunctionPutOutputs(self, req):
        with self.lock:
            for item in req.outputs:
                inp = self.inputs.get(item.input_id)
                if inp is None or inp.output is not None:
                    continue
                inp.output = api_pb2.FunctionGetOutputsItem(
                    result=item.result,
                    idx=0,
                    input_id=item.input_id,
                    data_format=item.data_format,
                    task_id=inp.taken_by or "",
                )
                c = self._container(inp.taken_by or "")
                c.idle_since = time.monotonic()
        return empty_pb2.Empty()

    async def TaskResult(self, req):
        return empty_pb2.Empty()


def _failure(inp: Input, status: int, why: str) -> api_pb2.FunctionGetOutputsItem:
    return api_pb2.FunctionGetOutputsItem(
        result=api_pb2.GenericResult(status=status, exception=why),
        idx=0,
        input_id=inp.input_id,
        task_id=inp.taken_by or "",
    )


def _base_paths() -> dict[str, grpclib.const.Handler]:
    class _Names:
        def __getattr__(self, name: str) -> None:
            return None

    return api_grpc.ModalClientBase.__mapping__(_Names())  # type: ignore[arg-type]
