"""Runner events: plain dataclasses, the same for every backend (the CLI prints them, the TUI
posts them as messages)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fibtui.core.runs import JobResult, RunHeader


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
    record: dict[str, Any] = field(default_factory=dict)
