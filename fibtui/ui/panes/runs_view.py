"""What the Runs pane shows, worked out apart from the widget: a job's row, its details, the
run's status line under the progress bar, its build errors and its verdict line."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text

from fibtui.core.measurement import Measurement
from fibtui.verdict_colours import colour_of

if TYPE_CHECKING:
    from fibtui.core.runs import JobResult, JobSpec, RunHeader, RunRecord
    from fibtui.core.stats import CompareOutcome
    from fibtui.core.workspace import Workspace

STATUS_STYLE = {
    "PASSED": "bold green",
    "INCORRECT_NUMERICAL": "bold red",
    "INCORRECT_SHAPE": "bold red",
    "INCORRECT_DTYPE": "bold red",
    "RUNTIME_ERROR": "bold magenta",
    "COMPILE_ERROR": "bold magenta",
    "TIMEOUT": "bold yellow",
    "INCORRECT_TIMED": "bold red",
    "INPUT_MUTATED": "bold red",
    "CACHED_TIMING": "bold red",
    "HARNESS_TAMPERED": "bold red",
    "INFRA_ERROR": "yellow",
    "UNSUPPORTED_HERE": "yellow",
    "RUNNING": "cyan",
    "QUEUED": "dim",
    "STARTING": "dim cyan",
    "NOT RUN": "dim",  # a cancelled or interrupted run left it unfinished (resumable)
    "SKIPPED": "dim",  # an adaptive run did not need it (its workload was decided)
}
#: what a job of a cancelled, interrupted or failed run that never finished shows (resumable)
NOT_RUN = "NOT RUN"
#: run states that ``r`` (and ``fibtui run --resume``) can pick up
RESUMABLE = ("cancelled", "interrupted")
JOB_COLUMNS = ("status", "role", "solution", "axes", "rep", "latency", "ref", "SoL %", "error")
STATE_STYLE = {
    "complete": "green",
    "running": "cyan",
    "interrupted": "yellow",
    "cancelled": "yellow",
    "failed": "red",
}


def _official(timing: dict[str, Any], key: str) -> str:
    """`` | 7.912 us`` when the job carries an official-equivalent timing, else empty."""
    off = timing.get("official") if isinstance(timing, dict) else None
    value = off.get(key) if isinstance(off, dict) else None
    return f" | {fmt_latency(value)}" if isinstance(value, (int, float)) else ""


def fmt_latency(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.2f} ms" if ms >= 1.0 else f"{ms * 1000:.2f} us"


@dataclass
class JobView(Measurement):
    """What one row shows (derived from the record or from a live event)."""

    key: str
    uuid: str
    axes: dict[str, int]
    solution: str
    role: str
    repeat: int
    status: str = "QUEUED"
    speed_of_light_pct: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    #: which evaluator judged it, with its numbers (JobResult.correctness)
    correctness: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, job: JobSpec) -> JobView:
        """A planned job's row, not run yet (QUEUED)."""
        return cls(
            key=job.key,
            uuid=job.uuid,
            axes=job.axes,
            solution=job.solution,
            role=job.role,
            repeat=job.repeat,
        )

    def fill(self, j: JobResult, floor_us: float | None) -> None:
        """The job's result, and its speed of light against ``floor_us``."""
        from fibtui.core.roofline import speed_of_light_pct

        self.status = j.status
        self.take_measurement(j)
        self.timing = dict(j.timing or {})
        self.correctness = dict(j.correctness or {})
        self.speed_of_light_pct = speed_of_light_pct(self.latency_ms, floor_us)


def compute_floors(
    ws: Workspace, definition_name: str, planned: list[JobSpec], gpu: str | None = None
) -> dict[str, float]:
    """Floor (us) per workload on the run's GPU (B200 when unknown or on the interpreter).
    Reads the dataset: call it from a thread."""
    from fibtui.core import roofline
    from fibtui.core.errors import FibError

    try:
        definition = ws.dataset().definition(definition_name)
        try:
            device = roofline.get_device(gpu or "B200", ws.root)
        except FibError:
            device = roofline.get_device("B200", ws.root)
        floors: dict[str, float] = {}
        for job in planned:
            if job.uuid not in floors:
                floors[job.uuid] = roofline.floor(
                    definition, {**definition.const_axes, **job.axes}, device
                ).floor_us
        return floors
    except (FibError, KeyError, OSError):
        return {}


def header_of_record(record: RunRecord) -> dict[str, Any]:
    """What the status line shows of a run read from its journal."""
    from fibtui.core.presets import describe_judging

    return {
        "run_id": record.run_id,
        "backend": record.backend,
        "timing_kind": record.timing_kind,
        "l2_policy": record.l2_policy,
        "state": record.state,
        "judged": describe_judging(record.settings.get("engine")),
    }


def header_of_start(run_id: str, header: RunHeader) -> dict[str, Any]:
    """What the status line shows of a run that has just started (its journal's header)."""
    from fibtui.core.presets import describe_judging

    return {
        "run_id": run_id,
        "backend": header.backend,
        "timing_kind": header.timing_kind,
        "l2_policy": header.l2_policy,
        "judged": describe_judging((header.settings or {}).get("engine")),
    }


#: one row of the jobs table, a cell per JOB_COLUMNS
Row = tuple[Text, str, str, str, str, str, str, str, str]


def job_row(v: JobView, cupti: bool) -> Row:
    """The jobs table's row of a job (``cupti``: the run's timings are CUPTI's, so its speed of
    light is shown)."""
    # imported here: roofline pulls in polars, which the first frame must not wait for
    from fibtui.core.roofline import format_speed_of_light

    axes = " ".join(f"{k}={val}" for k, val in v.axes.items())
    pct = format_speed_of_light(v.speed_of_light_pct) if cupti else "-"
    return (
        Text(v.status, style=STATUS_STYLE.get(v.status, "")),
        v.role[:4],
        v.solution[:28],
        axes,
        str(v.repeat),
        # a job timed with --timing official shows that latency beside fibtui's own
        fmt_latency(v.latency_ms) + _official(v.timing, "latency_ms"),
        fmt_latency(v.reference_latency_ms) + _official(v.timing, "reference_latency_ms"),
        pct,
        (v.error or "")[:60],
    )


def errors_text(jobs: Iterable[JobView]) -> str:
    """The run's build errors, on screen until the next run (a COMPILE_ERROR's first line,
    with how many jobs it failed): a syntax error is seen without moving onto its row."""
    errors: dict[str, int] = {}
    for v in jobs:
        if v.status == "COMPILE_ERROR":
            first = (v.error or "compile error").strip().splitlines()[0][:160]
            errors[first] = errors.get(first, 0) + 1
    lines = [
        f"\n[bold magenta]COMPILE_ERROR[/] {escape(e)}" + (f" [dim]({n} jobs)[/]" if n > 1 else "")
        for e, n in list(errors.items())[:2]
    ]
    return "".join(lines)


def status_text(
    h: dict[str, Any],
    progress: tuple[int, int, int, int],
    eta_left: float | None,
    running_here: bool,
    what: str | None,
    verdict: str,
) -> str:
    """The line under the progress bar (rich markup): the run, its backend and timings, its
    counts, the ETA (``eta_left`` seconds), its state, what it is and its verdict."""
    done, total, passed, failed = progress
    kind = h.get("timing_kind") or ""
    label = (
        "CPU-interpreter timings"
        if kind == "cpu-interpreter"
        else f"{kind} L2 {h.get('l2_policy')}"
    )
    eta_text = ""
    if eta_left is not None and done < total:
        eta_text = (
            f" · ETA {int(eta_left) // 60}:{int(eta_left) % 60:02d}"
            if eta_left >= 1
            else " · ETA passed (the jobs left take longer than the average so far)"
        )
    running = " · [cyan]running[/]" if running_here else ""
    state = h.get("state")
    if not running and state in RESUMABLE and done < total:
        running = f" · [yellow]{state}, resumable[/] (r resumes)"
    elif not running and state and state != "complete":
        running = f" · [yellow]{escape(str(state))}[/]"
    judged = f"\n[dim]judged by the {escape(h['judged'])}[/]" if h.get("judged") else ""
    if what:
        judged = f"\n[b]{escape(what)}[/b]" + judged
    return (
        f"[b]{h.get('run_id', '')}[/b] · {h.get('backend', '')} ({label}) · {done}/{total} done · "
        f"[green]{passed} passed[/] · [red]{failed} failed[/]{eta_text}{running}{judged}{verdict}"
    )


def detail_lines(view: JobView) -> list[str | Text]:
    """What the log under the table shows of the selected job (strings are rich markup)."""
    out: list[str | Text] = [
        f"[b]{view.solution}[/b] ({view.role}) · {view.uuid} · {view.axes} · repeat {view.repeat} · {view.status}"
    ]
    if view.error:
        out.append(Text(view.error, style="red"))
    if view.correctness.get("evaluator"):
        numbers = " · ".join(
            f"{k} {v:.4g}"
            for k, v in view.correctness.items()
            if k in ("matched_ratio", "tvd") and isinstance(v, (int, float))
        )
        out.append(
            Text(
                f"judged by the {view.correctness['evaluator']} evaluator"
                + (f" · {numbers}" if numbers else ""),
                style="dim",
            )
        )
    t = view.timing
    if t.get("block_medians_ms"):
        medians = ", ".join(fmt_latency(m) for m in t["block_medians_ms"])
        out.append(
            f"timing {t.get('kind')} · L2 {t.get('l2_policy')} · {t.get('blocks')} blocks x {t.get('calls_per_block')} calls · "
            f"block medians: {medians}"
        )
        if t.get("kernel_names"):
            out.append(
                f"kernels/call {t.get('kernels_per_call')}: {', '.join(t['kernel_names'])} · SM clocks {t.get('sm_clocks_mhz') or 'n/a'}"
            )
    env = t.get("environment") or {}
    if env:
        out.append(
            f"[dim]{env.get('gpu') or env.get('cpu')} · torch {env.get('torch')} · triton {env.get('triton')} · "
            f"driver {env.get('driver') or '-'} · worker {t.get('worker_device', '-')}[/dim]"
        )
    return out


def verdict_line(outcome: CompareOutcome) -> str:
    """One line (rich markup) per candidate of a compared run: a sample (a representative gate)
    says what it measured per band ("MIXED faster at batch_size=1 by 24% ..."); the full set its
    verdict, the mean latency's change with its interval, p95 and G."""
    lines: list[str] = []
    for entry in outcome.entries:
        c = entry.comparison
        if c is None:
            continue
        name = escape(c.candidate.name)
        if c.scope == "sample" and c.measured is not None:
            m = c.measured
            style = f"bold {colour_of(m.word)}"
            lines.append(
                f"[{style}]{m.word.upper()}[/] {name}: {escape(m.text)} "
                f"[dim](a sample of {c.workloads}: PROMOTE is the full sweep's)[/]"
            )
            continue
        style = f"bold {colour_of(c.verdict)}"
        short = c.short_line()  # the mean latency first, G as context (core decides the words)
        lines.append(f"[{style}]{c.verdict}[/] {name}" + (f" {escape(short)}" if short else ""))
    return "\n".join(lines)
