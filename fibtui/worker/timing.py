"""Timing the solution's own device time.

GPU (``cupti``): torch.profiler (Kineto, i.e. CUPTI activity records) around blocks of launches.
Before every solution call the worker launches one delimiter kernel of its own: an L2 flush
(``_fibtui_l2_flush``, reading twice the L2 size, so the cache is cold but clean: a flush by
writing would leave dirty lines whose write-back the next call would pay for; measured on the
H200 as +8% at batch 64 against Nsight Compute) under the default cold policy, or a one-thread
marker (``_fibtui_marker``) under the warm policy. The device activity list, sorted by start time,
is cut at the delimiters: each segment is one call of the solution, and its latency is the span
from the first kernel's start to the last kernel's end (launch gaps inside a multi-kernel call
count; the delimiters do not). A block is ``calls`` launches summarized by the median; blocks of
baseline and candidate alternate ABBA in one profiling session on the same input sets, so drift
lands on both. All inputs are made before profiling starts, so no input-generation kernel lands in
a segment. The clocks, power and temperature are read at each block when NVML is there; a block
that ran throttled, or whose SM clock sagged below 85% of the job's median clock, is measured
again after a bounded cool-down (fibtui.worker.env).

CPU interpreter (``cpu-interpreter``): wall time of each call (Triton's interpreter runs on the
CPU synchronously); few calls, labelled as interpreter timings everywhere.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import torch

from fibtui.worker import env as envmod
from fibtui.worker.phases import NOTHING, Phases
from fibtui.worker.wire import TimingPlan as TimingPlan  # re-exported: defined in the wire

FLUSH_NAME = "_fibtui_l2_flush"
MARKER_NAME = "_fibtui_marker"
#: fibtui's own copy kernels (fibtui.worker.rotation): the live inputs refilled before a call, a
#: sampled call's outputs kept after it; never part of a call's time
REFILL_NAME = "_fibtui_refill"
KEEP_NAME = "_fibtui_keep"
#: the wall clock of the CPU timer, taken when this module is imported (before any solution runs)
_CLOCK = time.perf_counter
#: the process's CPU time (all its threads), taken likewise: beside the interpreter's wall times,
#: what a call cost in CPU, which another process taking the CPU does not inflate
_PROCESS_CPU = time.process_time


class TimingError(Exception):
    """The measurement itself failed (not the kernel): an infrastructure failure."""


@dataclass
class SolutionTiming:
    latency_ms: float
    block_medians_ms: list[float]
    busy_ms: float | None = None
    kernels_per_call: float | None = None
    kernel_names: list[str] = field(default_factory=list)
    sm_clocks_mhz: list[int] = field(default_factory=list)
    redone_blocks: int = 0
    #: per block, what NVML said at its start (fibtui.worker.env.BlockClock), and the seconds a
    #: cool-down waited before throttled blocks were measured again
    block_clocks: list[dict[str, Any] | None] = field(default_factory=list)
    cooled_s: float = 0.0
    #: the probe calls' spans: calls on inputs the solution had never seen
    probe_ms: list[float] = field(default_factory=list)
    probe_kernel_names: list[str] = field(default_factory=list)
    #: timed calls in all, and those that launched no device work
    timed_calls: int = 0
    empty_calls: int = 0
    side_stream_kernels: int = 0
    late_kernels: int = 0
    #: sampled timed calls' outputs, for the worker to check (not written to the record)
    kept: list[Kept] = field(default_factory=list)
    #: CPU interpreter: the process's CPU time of the probe calls and each block's median
    #: (the cached-answer check's second witness, not written to the record)
    probe_cpu_ms: list[float] = field(default_factory=list)
    block_cpu_medians_ms: list[float] = field(default_factory=list)

    def to_json(self, kind: str, plan: TimingPlan) -> dict[str, Any]:
        checks: dict[str, Any] = {"rotation": plan.checks}
        if plan.checks:
            checks.update(
                probe_ms=self.probe_ms,
                checked_calls=len(self.kept),
                timed_calls=self.timed_calls,
            )
            if kind == "cupti":
                checks.update(
                    empty_calls=self.empty_calls,
                    side_stream_kernels=self.side_stream_kernels,
                    late_kernels=self.late_kernels,
                    probe_kernel_names=self.probe_kernel_names[:8],
                )
                # the kernels a call on unseen inputs launched against the timed calls': a
                # difference is shown (the row's timing), and fails only when they share none
                probe_only = sorted(set(self.probe_kernel_names) - set(self.kernel_names))
                timed_only = sorted(set(self.kernel_names) - set(self.probe_kernel_names))
                if self.probe_kernel_names and (probe_only or timed_only):
                    checks["kernels_differ"] = {
                        "probe_only": probe_only[:8],
                        "timed_only": timed_only[:8],
                    }
        return {
            "kind": kind,
            "l2_policy": plan.l2_policy if kind == "cupti" else "n/a",
            "blocks": len(self.block_medians_ms),
            "calls_per_block": plan.calls_per_block,
            "block_medians_ms": self.block_medians_ms,
            "busy_ms": self.busy_ms,
            "kernels_per_call": self.kernels_per_call,
            "kernel_names": self.kernel_names[:8],
            "sm_clocks_mhz": self.sm_clocks_mhz,
            "redone_blocks": self.redone_blocks,
            "block_clocks": self.block_clocks,
            "cooled_s": self.cooled_s,
            "checks": checks,
        }


def warmup_calls(plan: TimingPlan, pool_sets: int) -> int:
    """Warm-up calls per solution: the plan's, and with the checks at least one on every pool
    set, so the timed calls meet no values the solution has not seen (a call on unseen values
    is the probe's, and an answer kept by value shows as the difference)."""
    return max(plan.warmup_calls, pool_sets if plan.checks else 0)


def abba_order(sids: list[str], blocks: int) -> list[str]:
    """A B B A A B B A ... for two solutions; round-robin with alternating direction for more."""
    order: list[str] = []
    for b in range(blocks):
        seq = sids if b % 2 == 0 else list(reversed(sids))
        order.extend(seq)
    return order


# --------------------------------------------------------------------------------------------
# GPU delimiters
# --------------------------------------------------------------------------------------------

_delims: dict[str, Any] = {}


def _delimiters(device: torch.device) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(flush(), marker()) launching our own named Triton kernels on ``device``."""
    key = str(device)
    if key in _delims:
        return _delims[key]
    import triton

    from fibtui.worker.gpu_kernels import _fibtui_l2_flush, _fibtui_marker

    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
    n = max(2 * l2, 64 * 2**20) // 4
    buf = torch.zeros(n, dtype=torch.int32, device=device)
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    block = 4096
    grid = (triton.cdiv(n, block),)
    sink = torch.zeros(grid[0], dtype=torch.int32, device=device)

    # the first launch through the JIT compiles; later launches go straight to the compiled
    # kernel when this Triton allows it (the JIT's per-launch argument binding and cache lookup
    # cost ~40 us a launch on the H200, and a job launches 240 delimiters)
    flush_kernel = _fibtui_l2_flush[grid](buf, sink, n, BLOCK=block)
    marker_kernel = _fibtui_marker[(1,)](flag)
    stream = torch.cuda.current_stream(device).cuda_stream
    flush = direct_launcher(flush_kernel, grid, (buf, sink, n, block), stream) or (
        lambda: _fibtui_l2_flush[grid](buf, sink, n, BLOCK=block)
    )
    marker = direct_launcher(marker_kernel, (1,), (flag,), stream) or (
        lambda: _fibtui_marker[(1,)](flag)
    )
    torch.cuda.synchronize(device)
    _delims[key] = (flush, marker)
    return _delims[key]


def direct_launcher(
    compiled: Any, grid: tuple[int, ...], args: tuple[Any, ...], stream: int
) -> Callable[[], Any] | None:
    """A launcher of an already compiled Triton kernel that skips the JIT's binding, or None when
    this Triton has no such launcher or it fails (then the JIT launches it, as before).
    ``FIBTUI_DIRECT_DELIMITERS=0`` always uses the JIT."""
    import os

    if os.environ.get("FIBTUI_DIRECT_DELIMITERS", "1") == "0":
        return None
    try:
        runner = compiled[grid3(grid)]
        runner(*args, stream=stream)  # one launch now: a launcher that does not work is not used
    except Exception:  # noqa: BLE001 - another Triton: the JIT path stays
        return None
    return lambda: runner(*args, stream=stream)


def grid3(grid: tuple[int, ...]) -> tuple[int, int, int]:
    """A launch grid of three dimensions: a compiled kernel's launcher reads all three."""
    x, y, z = (*grid, 1, 1, 1)[:3]
    return (int(x), int(y), int(z))


def _device_events(prof: Any) -> list[Event]:
    """Every device-side activity, sorted by start: name, start and end (ns), and the stream it
    ran on when this torch says (else None). A job's profile holds thousands of records (the
    CPU side's runtime calls among them): the loop reads each with as few calls as it can."""
    cuda = torch.autograd.DeviceType.CUDA
    out: list[Event] = []
    append = out.append
    has_stream: bool | None = None
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != cuda:
            continue
        dur = e.duration_ns()
        if dur <= 0:
            continue
        if has_stream is None:
            has_stream = callable(getattr(e, "device_resource_id", None))
        start = e.start_ns()
        append(Event(e.name(), start, start + dur, e.device_resource_id() if has_stream else None))
    out.sort(key=_start)
    return out


def _start(e: Event) -> int:
    return e.start


class Event(NamedTuple):
    """One device activity of a profile."""

    name: str
    start: int  # ns
    end: int  # ns
    stream: int | None = None


def _is_delim(name: str) -> bool:
    return FLUSH_NAME in name or MARKER_NAME in name


def _is_harness(name: str) -> bool:
    return _is_delim(name) or REFILL_NAME in name or KEEP_NAME in name


@dataclass
class CallWork:
    """What one solution call launched on the device, cut out of a profile."""

    events: list[Event] = field(default_factory=list)
    #: kernels on another stream than the harness's
    side_stream: int = 0
    #: kernels still running when the harness's next kernel started (or that started after it)
    late: int = 0

    @property
    def span_ms(self) -> float:
        if not self.events:
            return 0.0
        return (max(e.end for e in self.events) - min(e.start for e in self.events)) / 1e6

    @property
    def busy_ms(self) -> float:
        return sum(e.end - e.start for e in self.events) / 1e6


def segment(events: list[Event] | list[tuple[str, int, int]]) -> list[CallWork]:
    """Cut the device activity at fibtui's own kernels: one :class:`CallWork` per solution call.

    A call's work is what ran between its delimiter (the L2 flush or the marker) and the
    harness's next kernel (the next call's refill or delimiter, a keep). Work found after that
    point but before the next delimiter (in the harness's own stretch) ran after the call's end:
    it is counted in the call it followed, and its span extends to it (``late``). Work on another
    stream than the delimiters' is counted the same way and reported (``side_stream``): work a
    call hides on a side stream is measured, never dropped."""
    evs = [e if isinstance(e, Event) else Event(*e) for e in events]
    harness_streams = {e.stream for e in evs if _is_delim(e.name)}
    calls: list[CallWork] = []
    open_call = False  # inside a call's own stretch (after a delimiter, before other harness work)
    next_harness: list[int] = []  # start of the first harness kernel after each delimiter
    for e in evs:
        if _is_harness(e.name):
            if open_call and len(next_harness) < len(calls):
                next_harness.append(e.start)
            if _is_delim(e.name):
                calls.append(CallWork())
                open_call = True
            else:
                open_call = False
            continue
        if not calls:
            continue  # before the first delimiter: not a timed call's (warm-up leftovers)
        work = calls[-1]
        work.events.append(e)
        if not open_call:
            work.late += 1
        if e.stream is not None and harness_streams and e.stream not in harness_streams:
            work.side_stream += 1
    while len(next_harness) < len(calls):
        next_harness.append(1 << 62)
    for work, end in zip(calls, next_harness, strict=True):
        work.late += sum(1 for e in work.events if e.end > end and e.start <= end)
    return calls


@dataclass
class Kept:
    """A sampled timed call's outputs (and the live inputs after it), copied right after it ran,
    for the worker to check against the reference of the set it had."""

    block: int  # the solution's block, 0-based
    call: int  # the call within the block, 0-based
    set_index: int
    outputs: list[Any]
    inputs_after: Any = None


@dataclass
class Block:
    """One block of the schedule: a solution's calls in a row, each on one pool set (a probe
    call first, on a probe set, when ``probe`` is not None)."""

    sid: str
    number: int  # the solution's own block number
    sets: list[int]
    probe: int | None = None
    keep_last: bool = False


def schedule(
    sids: list[str], plan: TimingPlan, pool_sets: int, probe_sets: int, rotate: bool
) -> list[Block]:
    """ABBA blocks; with rotation each call of a block takes the next pool set (block ``b``,
    call ``c``: set ``(b + c) % K``), so consecutive calls never share values and the checked
    last calls of a solution's blocks cover every set; probe sets open the blocks chosen for
    them (the first, and one past the middle)."""
    k = max(1, pool_sets)
    probes = {round(j * plan.blocks / probe_sets): j for j in range(probe_sets)} if rotate else {}
    seen = dict.fromkeys(sids, 0)
    out = []
    for i, sid in enumerate(abba_order(sids, plan.blocks)):
        b = seen[sid]
        seen[sid] += 1
        if rotate:
            sets = [(b + c) % k for c in range(plan.calls_per_block)]
        else:
            sets = [i // len(sids) % k] * plan.calls_per_block
        out.append(Block(sid, b, sets, probes.get(b), keep_last=rotate))
    return out


@dataclass
class Timed:
    """One solution as the timers call it: ``call(args)`` runs it once and returns what it
    returned (None for destination-passing style); ``keep(result)`` copies that call's outputs
    (on the GPU with fibtui's own named kernel, so the copy is no part of the call's time)."""

    call: Callable[[list[Any]], Any]
    keep: Callable[[Any], list[Any]]


class Inputs(Protocol):
    """What the timers need of a rotation (:class:`fibtui.worker.rotation.Rotation`)."""

    def refill(self, k: int) -> None: ...
    def probe(self, j: int) -> None: ...
    def args(self, k: int, probe: bool = False) -> list[Any]: ...
    def live_snapshot(self) -> Any: ...


@dataclass
class PointerSets:
    """Without rotation (``checks = false``): each block's calls take one input set by pointer,
    as fibtui timed before the checks; nothing is refilled, probed or kept."""

    sets: list[list[Any]]

    def refill(self, k: int) -> None:
        return None

    def probe(self, j: int) -> None:
        return None

    def args(self, k: int, probe: bool = False) -> list[Any]:
        return self.sets[k]

    def live_snapshot(self) -> Any:
        return None


def time_cupti(
    calls: dict[str, Timed],
    inputs: Inputs,
    pool_sets: int,
    probe_sets: int,
    plan: TimingPlan,
    device: torch.device,
    clock: Callable[[], envmod.BlockClock | None] | None = None,
    seal: Callable[[], list[str]] | None = None,
    phases: Phases = NOTHING,
) -> dict[str, SolutionTiming]:
    """Time each solution (module docstring). ``seal()``: the harness's own check, run after the
    last solution call and before anything of the profile is read; what it returns (changes to
    the timer or the judge) is raised as :class:`HarnessTampered`. ``phases`` gets the host time
    of the warm-up, of the launches (up to the profile's synchronization) and of reading the
    profile."""
    from torch.profiler import ProfilerActivity, profile

    sync = torch.cuda.synchronize  # taken before any timed call: a call cannot swap it
    now = _CLOCK
    with phases("warmup"):
        flush, marker = _delimiters(device)
        delim = flush if plan.l2_policy == "cold" else marker
        rotate = plan.checks
        sids = list(calls)
        for sid in sids:  # warm-up: compile, autotune, module load; every pool set once
            for i in range(warmup_calls(plan, pool_sets)):
                k = i % max(pool_sets, 1)
                inputs.refill(k)
                calls[sid].call(inputs.args(k))
        sync(device)
    blocks = schedule(sids, plan, pool_sets, probe_sets, rotate)

    def measure(
        todo: list[Block],
    ) -> tuple[
        list[tuple[list[CallWork], CallWork | None]],
        list[envmod.BlockClock | None],
        list[tuple[Block, Kept]],
    ]:
        clocks: list[envmod.BlockClock | None] = []
        kept: list[tuple[Block, Kept]] = []
        t0 = now()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for blk in todo:
                clocks.append(clock() if clock else None)
                fn = calls[blk.sid]
                if blk.probe is not None:
                    inputs.probe(blk.probe)
                    delim()
                    fn.call(inputs.args(blk.probe, probe=True))
                last = len(blk.sets) - 1
                for c, k in enumerate(blk.sets):
                    inputs.refill(k)
                    delim()
                    result = fn.call(inputs.args(k))
                    if blk.keep_last and c == last:
                        kept.append(
                            (blk, Kept(blk.number, c, k, fn.keep(result), inputs.live_snapshot()))
                        )
            tampered = seal() if seal is not None else []
            if tampered:
                raise HarnessTampered(tampered)
            sync(device)
            t1 = now()
            phases.add("launch", (t1 - t0) * 1000.0)
        works = segment(_device_events(prof))
        expected = sum(len(b.sets) + (b.probe is not None) for b in todo)
        if len(works) != expected:
            raise TimingError(
                f"profiler saw {len(works)} delimited calls, expected {expected} (dropped activity records?)"
            )
        per_block: list[tuple[list[CallWork], CallWork | None]] = []
        i = 0
        for blk in todo:
            probe_work = None
            if blk.probe is not None:
                probe_work = works[i]
                i += 1
            per_block.append((works[i : i + len(blk.sets)], probe_work))
            i += len(blk.sets)
        phases.add("read", (now() - t1) * 1000.0)
        return per_block, clocks, kept

    per_block, clocks, kept = measure(blocks)
    redone = 0
    cooled = 0.0
    sagged = envmod.blocks_to_redo(clocks)  # throttled, or clocked below 85% of the median
    if sagged:
        cooled = envmod.cool_down(clock)  # bounded: env.COOL_DOWN_S at most
        again = [blocks[i] for i in sagged]
        p2, c2, _ = measure([Block(b.sid, b.number, b.sets) for b in again])
        for j, i in enumerate(sagged):
            per_block[i] = (p2[j][0], per_block[i][1])
            clocks[i] = c2[j]
        redone = len(sagged)
    with phases("read"):
        return _summaries(sids, blocks, per_block, clocks, kept, redone, cooled)


def _summaries(
    sids: list[str],
    blocks: list[Block],
    per_block: list[tuple[list[CallWork], CallWork | None]],
    clocks: list[envmod.BlockClock | None],
    kept: list[tuple[Block, Kept]],
    redone: int,
    cooled: float = 0.0,
) -> dict[str, SolutionTiming]:
    out: dict[str, SolutionTiming] = {}
    for sid in sids:
        idx = [i for i, b in enumerate(blocks) if b.sid == sid]
        timed = [w for i in idx for w in per_block[i][0]]
        probes = [per_block[i][1] for i in idx if per_block[i][1] is not None]
        with_work = [w for w in timed if w.events]
        medians = [
            statistics.median([w.span_ms for w in per_block[i][0] if w.events] or [0.0])
            for i in idx
        ]
        busy = [
            statistics.median([w.busy_ms for w in per_block[i][0] if w.events] or [0.0])
            for i in idx
        ]
        out[sid] = SolutionTiming(
            latency_ms=statistics.median(medians),
            block_medians_ms=medians,
            busy_ms=statistics.median(busy),
            kernels_per_call=statistics.median(len(w.events) for w in timed) if timed else None,
            kernel_names=sorted({e.name for w in timed for e in w.events}),
            sm_clocks_mhz=[c.sm_mhz for i, c in enumerate(clocks) if i in idx and c and c.sm_mhz],
            redone_blocks=redone,
            block_clocks=[c.to_json() if c else None for i, c in enumerate(clocks) if i in idx],
            cooled_s=cooled,
            probe_ms=[p.span_ms for p in probes if p is not None],
            probe_kernel_names=sorted({e.name for p in probes if p is not None for e in p.events}),
            empty_calls=len(timed) - len(with_work),
            timed_calls=len(timed),
            side_stream_kernels=sum(w.side_stream for w in timed + [p for p in probes if p]),
            late_kernels=sum(w.late for w in timed + [p for p in probes if p]),
            kept=[k for b, k in kept if b.sid == sid],
        )
    return out


class HarnessTampered(Exception):
    """A solution changed what the timer or the judge relies on (the names changed)."""

    def __init__(self, changed: list[str]) -> None:
        super().__init__("; ".join(changed[:6]))
        self.changed = changed


def time_wall(
    calls: dict[str, Timed],
    inputs: Inputs,
    pool_sets: int,
    probe_sets: int,
    plan: TimingPlan,
    seal: Callable[[], list[str]] | None = None,
    phases: Phases = NOTHING,
) -> dict[str, SolutionTiming]:
    """CPU-interpreter timing: wall time per call, blocks interleaved ABBA, with the same
    rotation, probes and kept calls as on the GPU; each call's process CPU time beside it."""
    clock = _CLOCK  # a local: a solution that swaps time.perf_counter cannot reach it
    cpu = _PROCESS_CPU
    sids = list(calls)
    with phases("warmup"):
        for sid in sids:
            for i in range(warmup_calls(plan, pool_sets)):
                k = i % max(pool_sets, 1)
                inputs.refill(k)
                calls[sid].call(inputs.args(k))
    t_launch = clock()
    blocks = schedule(sids, plan, pool_sets, probe_sets, plan.checks)
    per: dict[str, list[float]] = {sid: [] for sid in sids}
    probe_ms: dict[str, list[float]] = {sid: [] for sid in sids}
    probe_cpu: dict[str, list[float]] = {sid: [] for sid in sids}
    block_cpu: dict[str, list[float]] = {sid: [] for sid in sids}
    kept: dict[str, list[Kept]] = {sid: [] for sid in sids}
    for blk in blocks:
        fn = calls[blk.sid]
        if blk.probe is not None:
            inputs.probe(blk.probe)
            args = inputs.args(blk.probe, probe=True)
            c0, t0 = cpu(), clock()
            fn.call(args)
            t1, c1 = clock(), cpu()
            probe_ms[blk.sid].append((t1 - t0) * 1000.0)
            probe_cpu[blk.sid].append((c1 - c0) * 1000.0)
        samples = []
        cpu_samples = []
        last = len(blk.sets) - 1
        for c, k in enumerate(blk.sets):
            inputs.refill(k)
            args = inputs.args(k)
            c0, t0 = cpu(), clock()
            result = fn.call(args)
            t1, c1 = clock(), cpu()
            samples.append((t1 - t0) * 1000.0)
            cpu_samples.append((c1 - c0) * 1000.0)
            if blk.keep_last and c == last:
                kept[blk.sid].append(
                    Kept(blk.number, c, k, fn.keep(result), inputs.live_snapshot())
                )
        per[blk.sid].append(statistics.median(samples))
        block_cpu[blk.sid].append(statistics.median(cpu_samples))
    tampered = seal() if seal is not None else []
    if tampered:
        raise HarnessTampered(tampered)
    phases.add("launch", (clock() - t_launch) * 1000.0)
    return {
        sid: SolutionTiming(
            latency_ms=statistics.median(m),
            block_medians_ms=m,
            probe_ms=probe_ms[sid],
            timed_calls=sum(len(b.sets) for b in blocks if b.sid == sid),
            kept=kept[sid],
            probe_cpu_ms=probe_cpu[sid],
            block_cpu_medians_ms=block_cpu[sid],
        )
        for sid, m in per.items()
    }
