"""A stand-in for Modal's servers that keeps the semantics fibtui relies on (modal 1.6), so the
Modal backend's cost faults are tested without the network. Each behaviour is Modal's as its
client and documentation state it:

- ``max_containers``: at most that many containers run at once; an input waits in the queue for
  one (``App.function(max_containers=...)``);
- a container takes inputs one after the other and is reused while it lives (warm reuse), until
  the function body calls ``modal.experimental.stop_fetching_inputs()`` ("the container will exit
  gracefully after the current input is processed"): fibtui's ``STOP_HOOK`` stands for that call;
- starting a container costs its start-up (billed; not slept here: ``startup_s`` is added to the
  bill);
- ``timeout``: an input's execution time is limited, counted from when it starts to run in a
  container, never while it waits in the queue; past it the call fails (FunctionTimeoutError) and
  the container is terminated;
- ``FunctionCall.cancel(terminate_containers=True)`` stops the input and its container.

The bill of a container is its start-up, the seconds it spent running inputs, and its idle time
until it scales down: a container that ran out of inputs waits ``scaledown_s`` (Modal's
``scaledown_window``) for another before it stops, billed (not slept: added to the bill); one that
stopped fetching inputs exits after its input, unbilled past it.
The function body is :func:`fibtui.runners.modal_app.run_slice`, run in the container's thread
with a container state of its own (``modal_app.CONTAINER_STATE``): each fake container is one
Modal container, and its job runs in the child process run_slice starts, as on Modal.
"""

from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fibtui.runners import modal_app


class FunctionTimeoutError(TimeoutError):
    """Modal's exception for an input past the function's timeout (the same name as the client's)."""


@dataclass
class Container:
    number: int
    startup_s: float
    busy_s: float = 0.0
    inputs: list[int] = field(default_factory=list)
    stopped_fetching: bool = False
    terminated: bool = False
    idle_s: float = 0.0
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def billed_s(self) -> float:
        return self.startup_s + self.busy_s + self.idle_s


class FakeCall:
    def __init__(self, fake: FakeModal, number: int, request: dict[str, Any]) -> None:
        self.fake, self.number, self.request = fake, number, request
        self.done = threading.Event()
        self.outcome: Any = None
        self.cancelled = False
        self.container: Container | None = None
        self.started: float | None = None
        self.submitted = time.monotonic()

    def result(self, timeout_s: float | None) -> Any:
        if not self.done.wait(timeout_s):
            raise TimeoutError(f"no result within {timeout_s} s (the client's own wait)")
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def cancel(self) -> None:
        self.cancelled = True
        with self.fake.lock:
            if self.container is not None:
                self.container.terminated = True
        self._finish(RuntimeError("the call was cancelled"))

    def _finish(self, outcome: Any) -> bool:
        with self.fake.lock:
            if self.done.is_set():
                return False
            self.outcome = outcome
            self.done.set()
            self.fake.in_flight -= 1
            return True


class FakeModal:
    """The caller fibtui's ModalRunner talks to (``session()``, ``submit()``), with Modal's queue,
    containers, timeouts and billing behind it."""

    in_process = False

    def __init__(
        self,
        max_containers: int,
        startup_s: float,
        timeout_s: float,
        body=modal_app.run_slice,
        scaledown_s: float = 0.0,
    ) -> None:
        self.max_containers = max_containers
        self.startup_s = startup_s
        self.scaledown_s = scaledown_s
        self.timeout_s = timeout_s
        self.body = body
        self.lock = threading.Lock()
        self.queue: queue.Queue[FakeCall] = queue.Queue()
        self.containers: list[Container] = []
        self.calls: list[FakeCall] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.timeouts = 0
        self.app_id = "ap-fake"
        self.image_id = "im-fake"
        self._running = 0
        self._stop = threading.Event()

    # -- what fibtui's runner calls ---------------------------------------------------------

    @contextmanager
    def session(self):
        self._stop.clear()
        try:
            yield self
        finally:
            self._stop.set()

    def submit(self, request: dict[str, Any]) -> FakeCall:
        with self.lock:
            call = FakeCall(self, len(self.calls) + 1, request)
            self.calls.append(call)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            start = self._running < self.max_containers
            if start:
                self._running += 1
            else:
                self.queue.put(call)  # waits for a container
        if start:
            self._start_container(call)
        return call

    # -- the servers ------------------------------------------------------------------------

    @property
    def billed_s(self) -> float:
        return sum(c.billed_s for c in self.containers)

    def _start_container(self, first: FakeCall) -> None:
        with self.lock:
            c = Container(len(self.containers) + 1, self.startup_s)
            self.containers.append(c)
        threading.Thread(
            target=self._serve,
            args=(c, first),
            daemon=True,
            name=f"fake-modal-container-{c.number}",
        ).start()

    def _serve(self, c: Container, call: FakeCall | None) -> None:
        """Run ``call``, then the queued inputs one by one (warm reuse) until the queue is empty
        (the container scales down at once) or the body stopped fetching inputs."""
        while True:
            if call is not None and not call.done.is_set():
                self._run(c, call)
            with self.lock:
                if c.stopped_fetching or c.terminated or self._stop.is_set():
                    call = None
                else:
                    try:
                        call = self.queue.get_nowait()
                    except queue.Empty:
                        call = None
                if call is None:
                    if not (c.stopped_fetching or c.terminated):
                        c.idle_s += self.scaledown_s  # waits for an input until it scales down
                    self._running -= 1
                    # a container that stops leaves the queue to a fresh one
                    nxt = None
                    if not self.queue.empty() and self._running < self.max_containers:
                        nxt = self.queue.get_nowait()
                        self._running += 1
                    break
        if nxt is not None:
            self._start_container(nxt)

    def _run(self, c: Container, call: FakeCall) -> None:
        with self.lock:
            call.container = c
            c.inputs.append(call.number)
        call.started = time.monotonic()
        box: dict[str, Any] = {}

        def body() -> None:
            modal_app.STOP_HOOK.set(lambda: setattr(c, "stopped_fetching", True))
            modal_app.CONTAINER_STATE.set(c.state)
            try:
                box["out"] = self.body(call.request)
            except BaseException as exc:  # noqa: BLE001 - the call fails with it
                box["out"] = exc

        runner = threading.Thread(target=body, daemon=True, name=f"fake-modal-input-{call.number}")
        runner.start()
        runner.join(self.timeout_s)  # the execution timeout counts from the input's start
        elapsed = time.monotonic() - call.started
        with self.lock:
            c.busy_s += min(elapsed, self.timeout_s)
        if runner.is_alive():  # past the function's timeout: the call fails, the container goes
            self.timeouts += 1
            c.terminated = True
            call._finish(
                FunctionTimeoutError(
                    f"input {call.number} exceeded the {self.timeout_s:.0f} s timeout"
                )
            )
            return
        call._finish(box["out"])
