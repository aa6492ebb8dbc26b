"""Every message of the UI, in one place, with typed fields.

Panes post them from their thread workers (their data) and the app's run controller listens for
the Runs pane's ones (a run's events, its verdict, the run slot freed). Every one bubbles, as
Textual's messages do by default. The types of their fields are imported for type checking only:
this module imports nothing of the core at run time (the first frame must not wait for polars).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from fibtui.core.dataset import Definition, WorkloadSet
    from fibtui.core.ncu import KernelSummary, ReportDiff
    from fibtui.core.past_verdicts import PairedRun
    from fibtui.core.recon import ReconNote, RefRepo, RefreshResult, SearchResult
    from fibtui.core.regimes import RegimeReport
    from fibtui.core.runs import JobSpec, RunListing, RunRecord
    from fibtui.core.stats import CompareOutcome
    from fibtui.runners.events import RunEvent as RunnerEvent
    from fibtui.runners.parity import ParityStatus
    from fibtui.services.archive import DecisionResult

# ---------------------------------------------------------------- the app


@dataclass
class WatchFired(Message):
    """Watch mode saw saves of kernel files (``detected``: time.monotonic() when it did)."""

    paths: list[str]
    detected: float


@dataclass
class BackendChosen(Message):
    """The backend g, s and watch mode run on, decided in a worker (RunControl)."""

    name: str


# ---------------------------------------------------------------- Runs pane


@dataclass
class RunsListed(Message):
    runs: list[RunListing]


@dataclass
class RecordLoaded(Message):
    run_id: str
    record: RunRecord
    #: every job of the plan, finished or not (the record holds the finished ones)
    planned: list[JobSpec]
    floors: dict[str, float]
    verdict: str = ""


@dataclass
class VerdictReady(Message):
    """A finished run's verdict line (a sample: what it measured per band; '' when the run
    is not paired or has none), with the comparison it came from. Posted once after every
    run the Runs pane followed to its end, also when the verdict could not be had, so the app
    can refresh the other panes after it (it bubbles)."""

    run_id: str
    text: str
    outcome: CompareOutcome | None = None


@dataclass
class RunEvent(Message):
    run_id: str
    event: RunnerEvent


@dataclass
class RunFailed(Message):
    title: str
    reason: str


@dataclass
class RunStartedHere(Message):
    """A run the Runs pane started (watch mode and the palette use it to follow along)."""

    run_id: str
    started_monotonic: float


@dataclass
class LaunchEnded(Message):
    """The thread of a run has ended (the run finished, failed to start or was abandoned):
    the run slot is free again. ``run_id``: None when no run was made."""

    cancel: threading.Event
    run_id: str | None = None


# ---------------------------------------------------------------- History pane


@dataclass
class HistoryLoaded(Message):
    rounds: list[Path]
    series: dict[str, list[tuple[str, float]]]  # candidate -> [(started, mean latency ms)]
    runs: int
    #: the paired runs, newest first (core.past_verdicts): enter opens one's verdict
    paired: list[PairedRun] = field(default_factory=list)


@dataclass
class OpenVerdict(Message):
    """Show this paired run's verdict in the Promotion pane (the app switches to it)."""

    run_id: str


@dataclass
class DocLoaded(Message):
    path: Path
    text: str


# ---------------------------------------------------------------- NCU pane


@dataclass
class NcuListed(Message):
    reports: list[Path]


@dataclass
class NcuLoaded(Message):
    path: Path
    summaries: list[KernelSummary]
    diff: ReportDiff | None
    baseline: Path | None


@dataclass
class NcuFailed(Message):
    reason: str
    path: Path | None = None


# ---------------------------------------------------------------- Promotion pane


@dataclass
class Evaluated(Message):
    run_id: str | None
    outcome: CompareOutcome | None
    reason: str = ""
    parity: ParityStatus | None = None
    #: which run this is and why (core.past_verdicts.default_shown, or "picked")
    why: str = ""


@dataclass
class PairedListed(Message):
    """Every paired run, newest first (core.past_verdicts.paired_runs)."""

    runs: list[PairedRun]


@dataclass
class RowVerdict(Message):
    run_id: str
    word: str


@dataclass
class Decided(Message):
    action: str
    result: DecisionResult


# ---------------------------------------------------------------- Recon pane


@dataclass
class ReconRefreshed(Message):
    results: list[RefreshResult]
    repos: list[RefRepo]


@dataclass
class Searched(Message):
    result: SearchResult


@dataclass
class NoteLoaded(Message):
    note: ReconNote | None


@dataclass
class ReconFailed(Message):
    reason: str


# ---------------------------------------------------------------- Regimes pane


@dataclass
class Analyzed(Message):
    report: RegimeReport
    definition: Definition
    workloads: WorkloadSet


@dataclass
class RegimesFailed(Message):
    reason: str
