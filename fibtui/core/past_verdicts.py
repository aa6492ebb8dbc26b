"""Past verdicts: every paired run of a workspace (a baseline and a candidate, at least one
finished job), newest first, with what tells them apart (device, timing kind, scope), and which
one the Promotion pane shows first. A CPU interpreter gate never hides a GPU verdict: the
default is the newest GPU-timed paired run when there is one (interpreter wall times give no
speed verdict), else the newest. Reads files: call from a worker. No Textual here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fibtui.core.measurement import CUPTI

if TYPE_CHECKING:
    from fibtui.core.runs import JournalContents
    from fibtui.core.stats import CompareOutcome
    from fibtui.core.workspace import Workspace

#: the timing kinds whose latencies can give a speed verdict (a GPU's)
GPU_TIMING = (CUPTI,)


@dataclass(frozen=True)
class PairedRun:
    run_id: str
    started: str
    state: str
    definition: str
    backend: str
    timing_kind: str
    #: the GPU its rows were timed on ("NVIDIA H200"), or "CPU" for the interpreter, or "?"
    device: str
    #: distinct workloads the run holds, and the definition's total (None when unknown)
    workloads: int
    total_workloads: int | None
    candidates: tuple[str, ...] = ()

    @property
    def gpu(self) -> bool:
        return self.timing_kind in GPU_TIMING

    @property
    def scope(self) -> str:
        """``full`` (every workload of the definition) or ``sample n/N``."""
        if self.total_workloads is not None and self.workloads >= self.total_workloads:
            return "full"
        total = f"/{self.total_workloads}" if self.total_workloads is not None else ""
        return f"sample {self.workloads}{total}"

    @property
    def device_short(self) -> str:
        return self.device.removeprefix("NVIDIA ").strip() or "?"


def _device_of(contents: JournalContents) -> str:
    for r in contents.results.values():
        env = (r.timing or {}).get("environment") if isinstance(r.timing, dict) else None
        if isinstance(env, dict):
            if env.get("gpu") and not env.get("triton_interpret"):
                return str(env["gpu"])
            if env.get("triton_interpret") or env.get("cpu"):
                return "CPU"
    return "CPU" if contents.header.timing_kind == "cpu-interpreter" else "?"


def paired_runs(ws: Workspace, limit: int | None = None) -> list[PairedRun]:
    """Every paired run of the workspace's archive, newest first (``limit``: at most that many)."""
    from fibtui.core.errors import FibError
    from fibtui.core.runs import list_runs, read_journal

    totals: dict[str, int | None] = {}

    def total_of(definition: str) -> int | None:
        if definition not in totals:
            try:
                totals[definition] = len(ws.dataset().workloads(definition))
            except (FibError, KeyError, OSError):
                totals[definition] = None
        return totals[definition]

    out: list[PairedRun] = []
    for listing in reversed(list_runs(ws.archive_root)):
        if limit is not None and len(out) >= limit:
            break
        if not listing.jobs_done:
            continue
        try:
            contents = read_journal(listing.path / "journal.jsonl")
        except FibError:
            continue
        header = contents.header
        roles = {s.role for s in header.solutions}
        if not {"baseline", "candidate"} <= roles:
            continue
        out.append(
            PairedRun(
                run_id=listing.run_id,
                started=header.started,
                state=listing.state,
                definition=header.definition,
                backend=header.backend,
                timing_kind=header.timing_kind,
                device=_device_of(contents),
                workloads=len({j.uuid for j in header.jobs}),
                total_workloads=total_of(header.definition),
                candidates=tuple(s.name for s in header.solutions if s.role == "candidate"),
            )
        )
    return out


@dataclass(frozen=True)
class Shown:
    """Which paired run the pane shows and why (one line the pane prints)."""

    run: PairedRun | None
    why: str


def default_shown(runs: list[PairedRun]) -> Shown:
    """The newest GPU-timed paired run when there is one, else the newest (``runs`` newest
    first); ``why`` says which it is and what newer CPU gates it passed over."""
    if not runs:
        return Shown(None, "no paired run yet")
    gpu = next((r for r in runs if r.gpu), None)
    if gpu is None:
        return Shown(runs[0], f"the newest paired run ({runs[0].device_short}, no GPU run yet)")
    newer = runs.index(gpu)
    if newer == 0:
        return Shown(gpu, f"the newest paired run, on the {gpu.device_short}")
    return Shown(
        gpu,
        f"the newest GPU verdict ({gpu.device_short}); {newer} newer CPU gate(s) listed "
        "(interpreter times give no speed verdict)",
    )


def verdict_word(outcome: CompareOutcome | None) -> str:
    """The list's one word for a run's comparison: a full run's verdict (PROMOTE, REJECT, ...),
    a sample's measured word ("faster (sample)"), or what stopped it (no speed verdict)."""
    if outcome is None:
        return "-"
    c = outcome.single or (outcome.entries[0].comparison if outcome.entries else None)
    if c is None:
        return "-"
    if c.no_speed_reason is not None:
        return f"{c.verdict} (no speed)" if c.verdict else "no speed verdict"
    if c.scope == "sample" and c.measured is not None:
        return f"{c.measured.word} (sample)"
    return str(c.verdict)
