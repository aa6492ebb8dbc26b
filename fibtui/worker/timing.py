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
from typing import Any

import torch

from fibtui.worker import env as envmod

FLUSH_NAME = "_fibtui_l2_flush"
MARKER_NAME = "_fibtui_marker"


class TimingError(Exception):
    """The measurement itself failed (not the kernel): an infrastructure failure."""


@dataclass
class TimingPlan:
    calls_per_block: int = 20
    blocks: int = 6  # per solution
    warmup_calls: int = 3
    l2_policy: str = "cold"  # cold | warm


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

    def to_json(self, kind: str, plan: TimingPlan) -> dict[str, Any]:
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
        }


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


def _delimiters(device: torch.device):
    """(flush(), marker()) launching our own named Triton kernels on ``device``."""
    key = str(device)
    if key in _delims:
        return _delims[key]
    import triton
    import triton.language as tl

    @triton.jit
    def _fibtui_l2_flush(ptr, sink, n, BLOCK: tl.constexpr):
        # Read (not write) twice the L2: the cache ends up full of clean lines, so the next call
        # pays cold misses but never the write-back of a dirty flush buffer. The store below is
        # never taken (the buffer holds zeros) but keeps the loads alive.
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(tl.load(ptr + offs, mask=offs < n, other=0), axis=0)
        tl.store(sink + pid, total, mask=total == 123456789)

    @triton.jit
    def _fibtui_marker(ptr):
        tl.store(ptr, 1)

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
    flush = _direct(flush_kernel, grid, (buf, sink, n, block), stream) or (
        lambda: _fibtui_l2_flush[grid](buf, sink, n, BLOCK=block)
    )
    marker = _direct(marker_kernel, (1,), (flag,), stream) or (lambda: _fibtui_marker[(1,)](flag))
    torch.cuda.synchronize(device)
    _delims[key] = (flush, marker)
    return _delims[key]


def _direct(compiled: Any, grid: tuple[int, ...], args: tuple[Any, ...], stream: int):
    """A launcher of an already compiled Triton kernel that skips the JIT's binding, or None when
    this Triton has no such launcher or it fails (then the JIT launches it, as before).
    ``FIBTUI_DIRECT_DELIMITERS=0`` always uses the JIT."""
    import os

    if os.environ.get("FIBTUI_DIRECT_DELIMITERS", "1") == "0":
        return None
    try:
        runner = compiled[grid]
        runner(*args, stream=stream)  # one launch now: a launcher that does not work is not used
    except Exception:  # noqa: BLE001 - another Triton: the JIT path stays
        return None
    return lambda: runner(*args, stream=stream)


def _device_events(prof) -> list[tuple[str, int, int]]:
    """(name, start_ns, end_ns) of every device-side activity, sorted by start."""
    out = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name()
        start = e.start_ns()
        dur = e.duration_ns()
        if dur <= 0:
            continue
        out.append((name, start, start + dur))
    out.sort(key=lambda t: t[1])
    return out


def _is_delim(name: str) -> bool:
    return FLUSH_NAME in name or MARKER_NAME in name


def segment(events: list[tuple[str, int, int]]) -> list[list[tuple[str, int, int]]]:
    """Cut the device activity at our delimiter kernels: one segment per solution call."""
    segments: list[list[tuple[str, int, int]]] = []
    current: list[tuple[str, int, int]] | None = None
    for ev in events:
        if _is_delim(ev[0]):
            current = []
            segments.append(current)
        elif current is not None:
            current.append(ev)
    return segments


def time_cupti(
    calls: dict[str, Callable[[int], None]],
    n_sets: int,
    plan: TimingPlan,
    device: torch.device,
    clock: Callable[[], envmod.BlockClock | None] | None = None,
) -> dict[str, SolutionTiming]:
    """Time each solution. ``calls[sid](set_index)`` launches one call on input set ``set_index``."""
    from torch.profiler import ProfilerActivity, profile

    flush, marker = _delimiters(device)
    delim = flush if plan.l2_policy == "cold" else marker
    sids = list(calls)
    for sid in sids:  # warm-up: compile, autotune, module load
        for i in range(plan.warmup_calls):
            calls[sid](i % n_sets)
    torch.cuda.synchronize(device)
    order = abba_order(sids, plan.blocks)

    def measure(blocks: list[tuple[str, int]]):
        clocks: list[envmod.BlockClock | None] = []
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for sid, set_index in blocks:
                clocks.append(clock() if clock else None)
                fn = calls[sid]
                for _ in range(plan.calls_per_block):
                    delim()
                    fn(set_index)
            torch.cuda.synchronize(device)
        segs = segment(_device_events(prof))
        expected = len(blocks) * plan.calls_per_block
        if len(segs) != expected:
            raise TimingError(
                f"profiler saw {len(segs)} delimited calls, expected {expected} (dropped activity records?)"
            )
        spans: list[list[float]] = []
        busy: list[list[float]] = []
        counts: list[float] = []
        names: list[set[str]] = []
        for b in range(len(blocks)):
            block_segs = segs[b * plan.calls_per_block : (b + 1) * plan.calls_per_block]
            if any(not seg for seg in block_segs):
                raise TimingError(
                    f"a call of {blocks[b][0]!r} launched no device work (nothing to time)"
                )
            spans.append([(max(e[2] for e in seg) - seg[0][1]) / 1e6 for seg in block_segs])
            busy.append([sum(e[2] - e[1] for e in seg) / 1e6 for seg in block_segs])
            counts.append(statistics.median(len(seg) for seg in block_segs))
            names.append({e[0] for seg in block_segs for e in seg})
        return spans, busy, counts, names, clocks

    blocks = [(sid, i // len(sids) % max(n_sets, 1)) for i, sid in enumerate(order)]
    spans, busy, counts, names, clocks = measure(blocks)
    redone = 0
    cooled = 0.0
    sagged = envmod.blocks_to_redo(clocks)  # throttled, or clocked below 85% of the median
    if sagged:
        cooled = envmod.cool_down(clock)  # bounded: COOL_DOWN_S at most
        again = [blocks[i] for i in sagged]
        s2, b2, n2, _, c2 = measure(again)
        for j, i in enumerate(sagged):
            spans[i], busy[i], counts[i], clocks[i] = s2[j], b2[j], n2[j], c2[j]
        redone = len(sagged)
    out: dict[str, SolutionTiming] = {}
    for sid in sids:
        idx = [i for i, (s, _) in enumerate(blocks) if s == sid]
        medians = [statistics.median(spans[i]) for i in idx]
        busy_all = [statistics.median(busy[i]) for i in idx]
        kernels = {k for i in idx for k in names[i]}
        per_call = statistics.median(counts[i] for i in idx)
        out[sid] = SolutionTiming(
            latency_ms=statistics.median(medians),
            block_medians_ms=medians,
            busy_ms=statistics.median(busy_all),
            kernels_per_call=per_call,
            kernel_names=sorted(kernels),
            sm_clocks_mhz=[c.sm_mhz for i, c in enumerate(clocks) if i in idx and c and c.sm_mhz],
            redone_blocks=redone,
            block_clocks=[c.to_json() if c else None for i, c in enumerate(clocks) if i in idx],
            cooled_s=cooled,
        )
    return out


def time_wall(
    calls: dict[str, Callable[[int], None]], n_sets: int, plan: TimingPlan
) -> dict[str, SolutionTiming]:
    """CPU-interpreter timing: wall time per call, blocks interleaved ABBA."""
    sids = list(calls)
    for sid in sids:
        for i in range(plan.warmup_calls):
            calls[sid](i % n_sets)
    order = abba_order(sids, plan.blocks)
    per: dict[str, list[float]] = {sid: [] for sid in sids}
    for i, sid in enumerate(order):
        set_index = i // len(sids) % max(n_sets, 1)
        samples = []
        for _ in range(plan.calls_per_block):
            t0 = time.perf_counter()
            calls[sid](set_index)
            samples.append((time.perf_counter() - t0) * 1000.0)
        per[sid].append(statistics.median(samples))
    return {
        sid: SolutionTiming(latency_ms=statistics.median(m), block_medians_ms=m)
        for sid, m in per.items()
    }
