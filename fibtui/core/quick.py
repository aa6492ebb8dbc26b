"""The CPU quick gate: the smallest workload of each band, capped by an estimated time.

On Triton's CPU interpreter a correctness gate should take seconds: wall times there say nothing
about GPU speed, so one small workload per band is enough to reach every regime's code path. A
band whose smallest workload is still large (the GDN demo's batch 48 and 64) can take minutes
alone, so the bands are taken cheapest first while the estimated time of the whole gate stays
within a budget (``DEFAULT_BUDGET_S``, 20 s on a 2-core machine); the cheapest band is always in,
and every workload left out is named with its band and estimate.

Estimates, per solution job, best source first:
1. that workload's own wall time in past interpreter runs of the definition (the median);
2. the median seconds per unit of size (product of the varying axes) over those runs' jobs;
3. with no past run, ``DEFAULT_SMALLEST_S`` for the definition's smallest workload, scaled
   linearly by size (a cautious guess: the interpreter runs one program instance at a time).

The TUI's ``g`` uses :func:`choose` with the Regimes pane's report; the CLI can call
:func:`quick_gate_for` (``fibtui run --quick``): it builds the same report and reads the history.
No Textual, no torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fibtui.core import numbers

if TYPE_CHECKING:
    from fibtui.core.regimes import RegimeReport
    from fibtui.core.workspace import Workspace

#: the gate's estimated time at most (seconds, all its jobs, on the 2-core machine it was set on)
DEFAULT_BUDGET_S = 20.0
#: seconds of one solution job on the smallest workload when no past run says better (the GDN
#: demo's batch-1 job took 2.9 s on a loaded 2-core machine, with a cold worker)
DEFAULT_SMALLEST_S = 2.0
#: how many past interpreter runs of the definition the estimates read
HISTORY_RUNS = 5


@dataclass(frozen=True)
class Excluded:
    uuid: str
    band: str
    estimate_s: float


@dataclass(frozen=True)
class History:
    """Past interpreter seconds per solution job: per workload, and per unit of size."""

    per_workload: dict[str, float] = field(default_factory=dict)
    per_size_unit: float | None = None
    source: str = "no past interpreter run of this definition"


@dataclass(frozen=True)
class QuickGate:
    #: the workloads the gate runs, in band order
    workloads: list[str]
    #: their bands, in the same order
    bands: list[str]
    #: the smallest workloads of the bands left out by the budget, with why
    excluded: list[Excluded]
    #: estimated seconds of the gate (every solution of every chosen workload)
    estimate_s: float
    budget_s: float
    source: str

    def summary(self) -> str:
        """One line: what runs, its estimate and what was left out."""
        line = (
            f"{len(self.workloads)} workload(s), the smallest of each band, "
            f"~{self.estimate_s:.0f} s estimated (cap {self.budget_s:.0f} s)"
        )
        if self.excluded:
            line += "; left out: " + ", ".join(
                f"{e.band} ({e.uuid[:8]}, ~{e.estimate_s:.0f} s)" for e in self.excluded
            )
        return line


def _sizes(report: RegimeReport) -> dict[str, tuple[str, float, int]]:
    """uuid -> (band, size, file line) of every workload of the report."""
    out: dict[str, tuple[str, float, int]] = {}
    cols = ["uuid", "band", "line", *report.varying_axes]
    for r in report.table.select(cols).iter_rows(named=True):
        size = 1.0
        for a in report.varying_axes:
            value = r.get(a)
            size *= float(value) if isinstance(value, (int, float)) and value > 0 else 1.0
        out[r["uuid"]] = (r["band"], size, int(r["line"] or 0))
    return out


def estimate_s(
    uuid: str, size: float, smallest_size: float, history: History, solutions: int
) -> float:
    """Estimated seconds of one workload's jobs (``solutions`` of them)."""
    per_job = history.per_workload.get(uuid)
    if per_job is None and history.per_size_unit is not None:
        per_job = history.per_size_unit * size
    if per_job is None:
        per_job = DEFAULT_SMALLEST_S * size / max(smallest_size, 1.0)
    return per_job * max(1, solutions)


def choose(
    report: RegimeReport,
    history: History | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    solutions: int = 2,
) -> QuickGate:
    """The quick gate of a regime report: the smallest workload (size, then file order) of each
    band, the cheapest bands first while the estimate stays within ``budget_s`` (the cheapest
    always), returned in band order with the rest named."""
    history = history or History()
    sizes = _sizes(report)
    if not sizes:
        return QuickGate([], [], [], 0.0, budget_s, history.source)
    smallest: dict[str, tuple[float, int, str]] = {}
    for uuid, (band, size, line) in sizes.items():
        key = (size, line, uuid)
        if band not in smallest or key < smallest[band]:
            smallest[band] = key
    floor = min(size for size, _, _ in smallest.values())
    cost = {
        band: estimate_s(uuid, size, floor, history, solutions)
        for band, (size, _, uuid) in smallest.items()
    }
    taken: set[str] = set()
    total = 0.0
    for band in sorted(smallest, key=lambda b: (cost[b], smallest[b])):
        if taken and total + cost[band] > budget_s:
            continue
        taken.add(band)
        total += cost[band]
    order = [b.name for b in report.bands if b.name in smallest]
    order += [b for b in smallest if b not in order]
    return QuickGate(
        workloads=[smallest[b][2] for b in order if b in taken],
        bands=[b for b in order if b in taken],
        excluded=[Excluded(smallest[b][2], b, cost[b]) for b in order if b not in taken],
        estimate_s=total,
        budget_s=budget_s,
        source=history.source,
    )


def read_history(
    archive_root: Path,
    definition: str,
    sizes: Mapping[str, float] | None = None,
    last_runs: int = HISTORY_RUNS,
) -> History:
    """Seconds per solution job of the newest interpreter runs of ``definition`` (a paired
    group's wall time is shared by its solutions), per workload and, with ``sizes`` (uuid ->
    size), per unit of size. Reads files: call it from a worker."""
    from fibtui.core.runs import recent_job_seconds

    runs = recent_job_seconds(archive_root, definition, "cpu-interpreter", last_runs)
    used = len(runs)
    per: dict[str, list[float]] = {}
    for run in runs:
        for (uuid, _), seconds in run.items():
            per.setdefault(uuid, []).append(seconds)
    if not per:
        return History()
    per_workload = {u: numbers.median(v) or 0.0 for u, v in per.items()}
    unit = None
    if sizes:
        ratios = [s / sizes[u] for u, s in per_workload.items() if sizes.get(u)]
        unit = numbers.median(ratios) if ratios else None
    return History(
        per_workload,
        unit,
        f"{sum(len(v) for v in per.values())} job time(s) of {used} past interpreter run(s)",
    )


def quick_gate_for(
    ws: Workspace,
    definition: str | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    solutions: int = 2,
) -> QuickGate:
    """The quick gate of a workspace's definition, as the TUI's ``g`` runs it on the CPU
    interpreter: the regime analysis of ``fibtui run --workloads rep`` (core.plan), the past
    interpreter runs' job times, ``budget_s``. ``solutions``: 2 for a paired gate, 1 alone. Its
    ``workloads`` go to RunOptions.representatives with ``workloads="rep"``."""
    from fibtui.core.plan import workspace_regimes

    report = workspace_regimes(ws, definition).report
    sizes = {u: s for u, (_, s, _) in _sizes(report).items()}
    history = read_history(ws.archive_root, report.definition, sizes)
    return choose(report, history, budget_s=budget_s, solutions=solutions)
