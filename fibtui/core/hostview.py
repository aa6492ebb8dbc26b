"""The host view of a solution: what one call does on the host and on the device, from a
torch-profiler trace the worker recorded (``python -m fibtui.worker host``).

Per call: the host wall time, the device kernels (how many, their names), the device busy time,
the span from the first kernel's start to the last one's end, and the gaps between consecutive
kernels. A multi-kernel call whose gaps are a large share of its span is launch-bound (the host
cannot feed the GPU fast enough), which no single-kernel profile shows: fusion, CUDA graphs or
programmatic dependent launch help there, a faster kernel does not.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from fibtui.core.ncu import HostGaps

LAUNCH_BOUND_GAP_SHARE = 0.5  # the same threshold fibtui.core.ncu uses for launch-bound


@dataclass
class KernelLine:
    name: str
    per_call: float
    mean_us: float
    total_us: float


@dataclass
class HostView:
    uuid: str
    axes: dict[str, Any]
    calls: int
    host_us: float | None  # median host wall time per call (launch + sync)
    busy_us: float | None  # median device busy time per call
    span_us: float | None  # median first-kernel-start to last-kernel-end per call
    gap_us: float | None  # median sum of gaps between consecutive kernels per call
    kernels_per_call: float
    kernels: list[KernelLine] = field(default_factory=list)
    top_cpu_ops: list[tuple[str, float]] = field(default_factory=list)
    verdict: str = ""

    def host_gaps(self) -> HostGaps | None:
        if self.busy_us is None or self.gap_us is None:
            return None
        return HostGaps(
            gap_us=self.gap_us,
            busy_us=self.busy_us,
            launches=round(self.kernels_per_call),
            source="host view",
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        gaps = self.host_gaps()
        out["gap_share"] = gaps.gap_share if gaps else None
        return out


CALL_RANGE = "fibtui::call"
#: the profiler's own bookkeeping, not the solution's work
PROFILER_NOISE = ("Activity Buffer Request", "cudaDeviceSynchronize", "cudaStreamSynchronize")


def summarize_workload(w: dict[str, Any]) -> HostView:
    calls = w.get("calls") or []
    # the call range shows on the GPU timeline too (a user annotation): it is not a kernel
    kernels = sorted(
        (k for k in w.get("kernels") or [] if k["name"] != CALL_RANGE), key=lambda k: k["start_ns"]
    )
    per_call: list[list[dict[str, Any]]] = []
    for c in calls:
        lo, hi = c["start_ns"], c["start_ns"] + c["dur_ns"]
        per_call.append(
            [k for k in kernels if lo <= k["start_ns"] <= hi]
        )  # the call range ends after a synchronize
    busy, span, gaps, counts = [], [], [], []
    for ks in per_call:
        counts.append(len(ks))
        if not ks:
            continue
        busy.append(sum(k["dur_ns"] for k in ks) / 1e3)
        span.append((max(k["start_ns"] + k["dur_ns"] for k in ks) - ks[0]["start_ns"]) / 1e3)
        gaps.append(
            sum(
                max(0, b["start_ns"] - (a["start_ns"] + a["dur_ns"]))
                for a, b in zip(ks, ks[1:], strict=False)
            )
            / 1e3
        )
    by_name: dict[str, list[float]] = {}
    for ks in per_call:
        for k in ks:
            by_name.setdefault(k["name"], []).append(k["dur_ns"] / 1e3)
    n = max(len(calls), 1)
    lines = sorted(
        (
            KernelLine(name, len(v) / n, statistics.mean(v), sum(v) / n)
            for name, v in by_name.items()
        ),
        key=lambda k: -k.total_us,
    )
    cpu: dict[str, float] = {}
    for op in w.get("cpu_ops") or []:
        if op["name"].startswith(PROFILER_NOISE):
            continue
        cpu[op["name"]] = cpu.get(op["name"], 0.0) + op["dur_ns"] / 1e3 / n
    view = HostView(
        uuid=str(w.get("uuid")),
        axes=dict(w.get("axes") or {}),
        calls=len(calls),
        host_us=statistics.median(w["host_wall_us"]) if w.get("host_wall_us") else None,
        busy_us=statistics.median(busy) if busy else None,
        span_us=statistics.median(span) if span else None,
        gap_us=statistics.median(gaps) if gaps else None,
        kernels_per_call=statistics.mean(counts) if counts else 0.0,
        kernels=lines,
        top_cpu_ops=sorted(cpu.items(), key=lambda kv: -kv[1])[:8],
    )
    view.verdict = verdict(view)
    return view


def verdict(v: HostView) -> str:
    if not v.kernels:
        return "no device kernels recorded (a CPU run: the host time is all there is)"
    gaps = v.host_gaps()
    share = gaps.gap_share if gaps else None
    if share is not None and v.kernels_per_call > 1 and share >= LAUNCH_BOUND_GAP_SHARE:
        return (
            f"launch-bound: {v.kernels_per_call:.0f} kernels per call, gaps {v.gap_us:.2f} us are {share:.0%} of the "
            f"{v.span_us:.2f} us span: fuse kernels, or overlap launches (CUDA graphs, programmatic dependent launch)"
        )
    if v.kernels_per_call <= 1:
        return f"one kernel per call ({v.busy_us:.2f} us on the device): the kernel itself is the time; profile it with ncu"
    return (
        f"{v.kernels_per_call:.0f} kernels per call, gaps {share:.0%} of the span: the kernels dominate; "
        "profile the slowest with ncu"
    )


def summarize(payload: dict[str, Any]) -> list[HostView]:
    return [summarize_workload(w) for w in payload.get("workloads") or []]
