"""Runner events: plain dataclasses, the same for every backend (the CLI prints them, the TUI
posts them as messages), the one sink type they go to, and what every runner offers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fibtui.core.runs import JobResult, RunHeader, RunRecord


@dataclass
class RunStarted:
    header: RunHeader
    folder: str
    resumed: bool
    done_before: int


@dataclass
class JobStarted:
    uuid: str
    repeat: int
    solutions: list[str]
    slot: int = 0


@dataclass
class JobStarting:
    """Jobs a container has taken and not begun (Modal: the container is up, the worker builds
    the solutions and loads); before it they are queued, after it :class:`JobStarted` says
    they run. ``containers_up``: the run's calls that have a container now."""

    uuid: str
    repeat: int
    solutions: list[str]
    slot: int = 0
    containers_up: int = 0


@dataclass
class JobFinished:
    result: JobResult
    done: int
    total: int
    passed: int
    failed: int
    eta_s: float | None


@dataclass
class WorkerRestarted:
    slot: int
    reason: str


@dataclass
class LogLine:
    text: str
    level: str = "info"


@dataclass
class RunFinished:
    state: str  # complete | failed | interrupted | cancelled
    record: RunRecord


#: Every event a runner emits.
RunEvent = (
    RunStarted | JobStarting | JobStarted | JobFinished | WorkerRestarted | LogLine | RunFinished
)

#: Where a runner sends its events (the CLI's printer, the TUI's message poster).
EventSink = Callable[[RunEvent], None]


class Runner(Protocol):
    """A prepared run of any backend: ``run`` sends the events to ``on_event`` until the run
    ends (or ``cancel`` is set) and returns the run record (``run.json``'s content)."""

    def run(self, on_event: EventSink, cancel: threading.Event | None = None) -> RunRecord: ...
