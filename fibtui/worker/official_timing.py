"""Official-equivalent timing (``fibtui run --timing official``): the method of flashinfer-bench's
main branch, which the contest runs, reproduced in fibtui's worker (docs/measurement.md,
"Official-equivalent timing").

flashinfer-bench times a solution per trial, each trial on an input set of its own (3 trials), and
within a trial it

1. calls the solution once and synchronizes (a first call it never times);
2. calls it 5 times, each after a zero-fill of the flush buffer (a pass that sizes the run when no
   counts are given; untimed, and made here too so the warm-up is the same);
3. calls it ``warmup`` times (10), each after a zero-fill; synchronizes;
4. times ``iterations`` calls (50): for each, a zero-fill of the flush buffer, a synchronize, the
   call, a synchronize. A call's latency is the span of the device work it launched, from the first
   kernel's start to the last one's end, read from CUPTI activity records.

The trial's latency is the median of its iterations; the solution's is the mean of its trials. The
reference is timed the same way (its speedup is the reference's over the solution's). The flush
buffer is twice the L2 size rounded down to whole MiB, written with zeros: a *write* flush, which
leaves the L2 full of dirty lines of that buffer (fibtui's own timing flushes by reading).

Here the activity records come from one ``torch.profiler`` session around the measured calls of a
trial (CUPTI underneath, as fibtui's own timing). flashinfer-bench finds a call's kernels by the
correlation ids of the launches made between two host timestamps; fibtui cuts the device activity at
its own flush kernel (``_fibtui_official_flush``), which each call is preceded by and synchronized
after, so every record between two flushes is that call's: the same set of kernels, side streams
included.

The method's structure (the order of flushes, synchronizes and calls; median per trial, mean over
trials) is :func:`time_trials`, run against a :class:`Timer`: :class:`CuptiTimer` on a GPU,
:class:`WallTimer` on the CPU interpreter (host wall time; no decision is ever made from it), or a
test's fake. Standard library + torch + triton only, like the rest of the worker.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from fibtui.core.measurement import OFFICIAL_KIND

#: the name of the flush kernel, which also delimits the calls in the activity list
FLUSH_NAME = "_fibtui_official_flush"
#: what the results call this timing (fibtui.core.measurement.OFFICIAL_KIND)
KIND = OFFICIAL_KIND
METHOD = (
    "flashinfer-bench main's: CUPTI span per call, zero-fill of 2 x L2 before each call, "
    "median per trial, mean over trials"
)
#: flashinfer-bench's untimed calls before its warm-up (a first call, then 5 sizing calls)
FIRST_CALLS = 1
SIZING_CALLS = 5
MIB = 2**20
#: the wall clock of the interpreter's timer, taken when this module is imported (before any
#: solution runs: a solution that swaps time.perf_counter cannot reach it)
_CLOCK = time.perf_counter


@dataclass
class OfficialPlan:
    """flashinfer-bench's defaults (``ResolvedEvalConfig``: warm-up 10, iterations 50, trials 3);
    a definition's contest flags change them (GDN prefill: 1, 5, 3)."""

    warmup: int = 10
    iterations: int = 50
    trials: int = 3
    #: time the reference too (its speedup); False is flashinfer-bench's --no-profile-baseline
    reference: bool = True

    @classmethod
    def from_json(cls, obj: dict[str, Any] | None) -> OfficialPlan:
        obj = obj or {}
        known: dict[str, Any] = {
            k: int(v) for k, v in obj.items() if k in ("warmup", "iterations", "trials")
        }
        if "reference" in obj:
            known["reference"] = bool(obj["reference"])
        plan = cls(**known)
        if plan.warmup < 0 or plan.iterations < 1 or plan.trials < 1:
            raise ValueError(f"bad official timing plan: {plan}")
        return plan


@dataclass
class OfficialTiming:
    """One solution's (or the reference's) official-equivalent latency."""

    latency_ms: float
    trial_medians_ms: list[float]
    plan: OfficialPlan = field(default_factory=OfficialPlan)

    def to_json(self) -> dict[str, Any]:
        plan = asdict(self.plan)
        if plan.pop("reference") is False:  # written only when the reference went untimed
            plan["reference"] = False
        return {
            "latency_ms": self.latency_ms,
            "trial_medians_ms": list(self.trial_medians_ms),
            **plan,
        }


class Timer(Protocol):
    """What the method needs of a device: flush the L2, synchronize, record the calls."""

    def flush(self) -> None: ...

    def sync(self) -> None: ...

    def recording(self) -> Any:
        """A context manager around the measured calls of one trial."""
        ...

    def begin_call(self) -> None: ...

    def end_call(self) -> None: ...

    def spans(self, calls: int) -> list[float]:
        """The latency in ms of each of the ``calls`` recorded calls of the last recording."""
        ...


class TimingFailed(Exception):
    """The official-equivalent measurement itself failed (not the kernel)."""


def time_trial(call: Callable[[], None], plan: OfficialPlan, timer: Timer) -> list[float]:
    """One trial of flashinfer-bench's method (module docstring): the untimed first and sizing
    calls, the warm-up, then ``plan.iterations`` recorded calls; their spans in ms."""
    timer.sync()
    for _ in range(FIRST_CALLS):
        call()
    timer.sync()
    for _ in range(SIZING_CALLS):
        timer.flush()
        call()
    timer.sync()
    for _ in range(plan.warmup):
        timer.flush()
        call()
    timer.sync()
    with timer.recording():
        for _ in range(plan.iterations):
            timer.flush()
            timer.sync()
            timer.begin_call()
            call()
            timer.end_call()
            timer.sync()
    spans = timer.spans(plan.iterations)
    if len(spans) != plan.iterations:
        raise TimingFailed(f"{len(spans)} timed calls seen, {plan.iterations} made")
    return spans


def time_trials(
    calls: Sequence[Callable[[], None]], plan: OfficialPlan, timer: Timer
) -> OfficialTiming:
    """``calls[k]`` calls the solution on trial ``k``'s input set: the median of each trial's
    spans, and their mean."""
    medians = [statistics.median(time_trial(call, plan, timer)) for call in calls]
    if not medians:
        raise TimingFailed("no trial to time")
    return OfficialTiming(statistics.fmean(medians), medians, plan)


# --------------------------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------------------------


class WallTimer:
    """The CPU interpreter's: host wall time of each call (no L2 to flush; never a decision)."""

    def __init__(self) -> None:
        self._starts: list[float] = []
        self._spans: list[float] = []

    def flush(self) -> None:
        return None

    def sync(self) -> None:
        return None

    @contextmanager
    def recording(self) -> Iterator[None]:
        self._spans = []
        yield

    def begin_call(self) -> None:
        self._starts.append(_CLOCK())

    def end_call(self) -> None:
        self._spans.append((_CLOCK() - self._starts.pop()) * 1000.0)

    def spans(self, calls: int) -> list[float]:
        return list(self._spans)


def flush_bytes(l2_bytes: int | None) -> int:
    """flashinfer's flush size: twice the L2 size, in whole MiB (64 MiB of L2 when unknown)."""
    l2 = int(l2_bytes or 64 * MIB)
    return (2 * l2 // MIB) * MIB


def cut_calls(events: Sequence[tuple[str, int, int]], flush_name: str = FLUSH_NAME) -> list[float]:
    """The span in ms of each call in a device activity list ``(name, start_ns, end_ns)`` sorted
    by start: the records between one flush kernel and the next are one call's (activity before
    the first flush is no call's, as fibtui's own timing leaves it out). A call with no device work
    is refused (:class:`TimingFailed`)."""
    spans: list[float] = []
    current: list[tuple[str, int, int]] | None = None
    segments: list[list[tuple[str, int, int]]] = []
    for ev in events:
        if flush_name in ev[0]:
            current = []
            segments.append(current)
        elif current is not None:
            current.append(ev)
    for i, seg in enumerate(segments):
        if not seg:
            raise TimingFailed(f"timed call {i} launched no device work")
        spans.append((max(e[2] for e in seg) - min(e[1] for e in seg)) / 1e6)
    return spans


class CuptiTimer:
    """A GPU's: the zero-fill flush as a Triton kernel of fibtui's own (its name cuts the activity
    list), synchronizes, and one torch.profiler session (CUPTI) per trial."""

    def __init__(self, device: Any) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        # taken before any timed call: a solution cannot swap them under the timer
        self._synchronize = torch.cuda.synchronize
        self._profile, self._activity = profile, ProfilerActivity.CUDA
        self.device = device
        props = torch.cuda.get_device_properties(device)
        self.flush_bytes = flush_bytes(getattr(props, "L2_cache_size", None))
        self._flush = _zero_fill(device, self.flush_bytes)
        self._prof: Any = None

    def flush(self) -> None:
        self._flush()

    def sync(self) -> None:
        self._synchronize(self.device)

    @contextmanager
    def recording(self) -> Iterator[None]:
        with self._profile(activities=[self._activity]) as prof:
            yield
            self.sync()
        self._prof = prof

    def begin_call(self) -> None:
        return None

    def end_call(self) -> None:
        return None

    def spans(self, calls: int) -> list[float]:
        from fibtui.worker.timing import _device_events

        if self._prof is None:
            raise TimingFailed("nothing was recorded")
        return cut_calls([(e.name, e.start, e.end) for e in _device_events(self._prof)])


def _zero_fill(device: Any, nbytes: int) -> Callable[[], None]:
    """A launcher of ``_fibtui_official_flush``: zeros written over ``nbytes`` of a buffer of its
    own, as flashinfer's ``buffer.zero_()`` of a 2 x L2 int8 buffer does."""
    import torch
    import triton

    from fibtui.worker.gpu_kernels import _fibtui_official_flush

    n = nbytes // 4
    buf = torch.empty(n, dtype=torch.int32, device=device)
    block = 4096
    grid = (triton.cdiv(n, block),)

    def launch() -> None:
        _fibtui_official_flush[grid](buf, n, BLOCK=block)

    launch()  # the first launch compiles
    torch.cuda.synchronize(device)
    return launch


# --------------------------------------------------------------------------------------------
# One job: every timed solution and the reference
# --------------------------------------------------------------------------------------------

#: (definition fingerprint, workload uuid, device, plan) -> the reference's timing, kept for the
#: worker's life: a sweep's repeats do not time a slow reference again
_REFERENCE: dict[tuple[str, str, str, tuple[int, int, int]], OfficialTiming] = {}

#: the seeds of the trials' input sets (apart from the correctness trials' and fibtui's blocks')
TRIAL_SEED_BASE = 2000


def time_job(engine: Any, sids: list[str], workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``timing.official`` object of each solution in ``sids`` on ``workload``: its
    official-equivalent latency, the reference's, and the speedup, timed with the engine's
    solutions, input maker and reference (fibtui.worker.engine.Engine). A failure of the
    measurement itself, or a call that raises, is that object's ``error``: fibtui's own timing of
    the job, which already passed every check, stands."""
    try:
        return _time_job(engine, sids, workload)
    except TimingFailed as exc:
        return {sid: {"kind": KIND, "method": METHOD, "error": str(exc)} for sid in sids}
    except Exception as exc:  # noqa: BLE001 - a call that raises here: said, never hidden
        why = f"a call raised during the official-equivalent timing: {type(exc).__name__}: {exc}"
        return {sid: {"kind": KIND, "method": METHOD, "error": why[:500]} for sid in sids}


def _time_job(engine: Any, sids: list[str], workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    import torch

    from fibtui.worker.inputs import seed_for

    plan = OfficialPlan.from_json(getattr(engine.config, "official", None))
    timer: Timer = CuptiTimer(engine.device) if engine.device.type == "cuda" else WallTimer()
    sets = [
        engine.maker.make(
            workload, seed_for(workload["uuid"], TRIAL_SEED_BASE + k, engine.config.seed)
        )
        for k in range(plan.trials)
    ]
    out: dict[str, dict[str, Any]] = {}
    with torch.no_grad():
        ref_key = (
            engine.reference.fp,
            str(workload["uuid"]),
            str(engine.device),
            (plan.warmup, plan.iterations, plan.trials),
        )
        ref = _REFERENCE.get(ref_key) if plan.reference else None
        if ref is None and plan.reference:
            run = engine.reference.run
            ref = time_trials([functools.partial(run, *s) for s in sets], plan, timer)
            _REFERENCE[ref_key] = ref
        for sid in sids:
            sol = engine.solutions[sid]
            calls: list[Callable[[], None]] = []
            for s in sets:
                if sol.dps:  # flashinfer-bench allocates the outputs once per trial
                    outs = engine.maker.allocate_outputs(workload, poison=False)
                    calls.append(functools.partial(sol.fn, *s, *outs))
                else:
                    calls.append(functools.partial(sol.fn, *s))
            timing = time_trials(calls, plan, timer)
            out[sid] = {
                "kind": KIND,
                "method": METHOD,
                **timing.to_json(),
                "reference_latency_ms": ref.latency_ms if ref else None,
                "reference_trial_medians_ms": list(ref.trial_medians_ms) if ref else [],
                "speedup": ref.latency_ms / timing.latency_ms
                if ref and timing.latency_ms > 0
                else None,
                "flush_bytes": getattr(timer, "flush_bytes", None),
            }
    return out
