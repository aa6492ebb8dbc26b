"""Classification of one kernel from its compact fields (:func:`classify`): the bottleneck, the
occupancy limiter and the findings, each with the numbers it was decided from and the tactic
families to try (docs/diagnosis.md).

Thresholds, documented here and used nowhere else:

=============================  =======  =====================================================
threshold                      value    meaning
=============================  =======  =====================================================
BUSY_PCT                       60 %     a unit at or above 60 % of its peak (Speed Of Light)
                                        is busy. Memory-bound: max(memory, DRAM) throughput
                                        >= 60 % and >= compute throughput; compute-bound:
                                        compute >= 60 % and above memory; both under 60 %:
                                        latency-bound. This is the line Nsight Compute's own
                                        SOL rule draws ("below 60 % of peak typically indicates
                                        latency issues"), so 49 % memory throughput is not
                                        memory-bound: half the bandwidth sits idle while warps
                                        wait.
LAUNCH_GAP_SHARE               0.5      launch-bound only with a host measurement
                                        (:class:`HostGaps`): idle time between launches is at
                                        least half of the call's span (gaps + kernel time).
                                        The device class is still reported
                                        (``device_bottleneck``).
GRID_TOO_SMALL_WAVES           1.0      waves per SM under 1: "grid too small" (idle SMs).
TAIL_FILL                      0.5      1 <= waves < TAIL_MAX_WAVES (4) and the last, partial
                                        wave is under half full: tail effect.
IMBALANCE_RATIO                0.8      achieved occupancy under 80 % of theoretical:
                                        scheduling / load imbalance.
FULL_OCCUPANCY_PCT             99.5 %   theoretical occupancy under this: occupancy is
                                        limited, by the smallest block limit (the limiter:
                                        registers, shared_memory, warps, blocks, or barriers).
L2_HIT_LOW_PCT                 60 %     memory-bound with an L2 hit rate under this: suggest L2
                                        persistence for read-mostly data.
CROSS_BLOCK_L2_HIT_PCT         80 %     memory-bound, L2 hit rate at least this and DRAM
                                        throughput well under memory throughput (by
                                        CROSS_BLOCK_DRAM_GAP_PCT, 15 points): blocks re-read
                                        shared data through L2; suggest clusters + distributed
                                        shared memory.
spilling                       > 0      any local-memory spilling request or register-spilling
                                        instruction.
=============================  =======  =====================================================

Every finding carries the numbers it was decided from and the tactic families to try (the
diagnosis table of docs/diagnosis.md, "Tactic families"); a tactic is only listed together with the
measured limiter it would relieve (``relieves``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fibtui.core.ncu.records import LIMITS

BUSY_PCT = 60.0
LAUNCH_GAP_SHARE = 0.5
GRID_TOO_SMALL_WAVES = 1.0
TAIL_FILL = 0.5
TAIL_MAX_WAVES = 4.0
IMBALANCE_RATIO = 0.8
FULL_OCCUPANCY_PCT = 99.5
L2_HIT_LOW_PCT = 60.0
CROSS_BLOCK_L2_HIT_PCT = 80.0
CROSS_BLOCK_DRAM_GAP_PCT = 15.0

# Tactic families per diagnosis (docs/diagnosis.md, "Tactic families").
TACTICS: dict[str, tuple[str, ...]] = {
    "memory": (
        "wide (16-byte) coalesced loads and stores",
        "fuse neighbouring steps so intermediates never round-trip through global memory",
        "cache-policy hints (evict-first for streamed data, keep reused data)",
        "register budgeting so more loads stay in flight",
    ),
    "l2_persistence": (
        "L2 persistence / access-policy window for read-mostly metadata (check that the persisting size changed)",
    ),
    "cross_block": (
        "thread-block clusters + distributed shared memory for data several blocks re-read (compare cluster sizes)",
    ),
    "compute": (
        "tensor-core instructions (wgmma on Hopper, tcgen05 on Blackwell)",
        "warp specialization (producer / consumer warps)",
        "epilogue fusion",
        "more pipeline stages",
    ),
    "latency": (
        "more independent work in flight per warp (unroll, issue several loads before their first use)",
        "higher occupancy (fewer registers, smaller tiles)",
        "fewer barriers and shorter dependency chains",
        "deeper multi-stage pipelines with async copies (TMA completing on mbarriers)",
    ),
    "launch": (
        "fuse the kernels of one call",
        "overlap launches (programmatic dependent launch)",
        "CUDA graphs for the whole call",
    ),
    "registers": (
        "register budgeting (__launch_bounds__ / maxrregcount; num_warps in Triton)",
        "smaller tiles per thread",
        "split the kernel",
        "on Blackwell, accumulators in tensor memory",
    ),
    "shared_memory": (
        "smaller shared-memory tiles or fewer pipeline stages",
        "opt in to the larger dynamic shared-memory carveout",
        "reuse shared buffers across stages",
    ),
    "warps": ("smaller blocks (fewer warps per block) so more blocks fit per SM",),
    "blocks": ("more work per block (larger tiles): the per-SM block count is the cap",),
    "barriers": ("fewer named barriers per block",),
    "grid": (
        "split the work finer (row / head / sequence tiling, split-K)",
        "persistent kernel with a tile scheduler",
        "on Blackwell, Cluster Launch Control work stealing",
    ),
    "tail": (
        "persistent kernel / work stealing so the last wave is not half empty",
        "tile-shape tuning so the block count fills whole waves",
    ),
    "imbalance": (
        "persistent kernel with dynamic tile scheduling (work stealing)",
        "even out the work per block (bin or sort uneven rows / experts; grouped GEMM for MoE)",
    ),
    "spilling": (
        "cut live registers (smaller tiles, fewer unrolled accumulators)",
        "raise the register budget where occupancy allows (launch bounds, fewer warps)",
        "avoid dynamically indexed local arrays",
    ),
}


@dataclass
class HostGaps:
    """A host-side measurement of one call (e.g. from a torch-profiler trace): idle time between
    kernel launches and the device time of the kernels themselves."""

    gap_us: float
    busy_us: float
    launches: int | None = None
    source: str = ""

    @property
    def gap_share(self) -> float | None:
        span = self.gap_us + self.busy_us
        return self.gap_us / span if span > 0 else None


@dataclass
class Finding:
    kind: str  # memory-bound | compute-bound | latency-bound | launch-bound | occupancy-limited |
    #            grid-too-small | tail-effect | scheduling-imbalance | local-memory-spilling
    summary: str
    evidence: dict[str, Any]
    tactics: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "evidence": self.evidence,
            "tactics": self.tactics,
        }


@dataclass
class Classification:
    bottleneck: str | None  # memory | compute | latency | launch | None (no throughput numbers)
    device_bottleneck: str | None  # the class from the device metrics alone
    limiter: str | None  # registers | shared_memory | warps | blocks | barriers | None
    grid_too_small: bool
    findings: list[Finding] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def tactics(self) -> list[dict[str, str]]:
        """Every tactic with the finding (and its numbers) it would relieve."""
        out: list[dict[str, str]] = []
        seen: set[str] = set()
        for f in self.findings:
            for t in f.tactics:
                if t not in seen:
                    seen.add(t)
                    out.append({"tactic": t, "relieves": f"{f.kind}: {f.summary}"})
        return out


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "?"
    text = f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:.3g}"
    return f"{text}{unit}"


#: A kernel's compact fields, read as finite numbers: ``num(key)`` is None when unknown.
Numbers = Callable[[str], float | None]


def _numbers(metrics: Mapping[str, Any]) -> Numbers:
    def num(key: str) -> float | None:
        v = metrics.get(key)
        return (
            float(v)
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            else None
        )

    return num


def classify(metrics: Mapping[str, Any], host: HostGaps | None = None) -> Classification:
    """Classify one kernel from its compact fields (the keys of :data:`FIELDS`; missing keys are
    unknown). See the thresholds table in the module docstring. Findings come in this order: the
    launch-bound finding (with a host measurement), the device bottleneck, the occupancy limiter,
    grid too small or tail effect, scheduling imbalance, spilling."""
    num = _numbers(metrics)
    compute, memory, dram = (
        num("compute_throughput_pct"),
        num("memory_throughput_pct"),
        num("dram_throughput_pct"),
    )
    evidence: dict[str, Any] = {
        "compute_throughput_pct": compute,
        "memory_throughput_pct": memory,
        "dram_throughput_pct": dram,
        "busy_threshold_pct": BUSY_PCT,
    }
    device, device_finding = _device_bottleneck(compute, memory, dram, num("l2_hit_rate_pct"))
    findings = [device_finding] if device_finding is not None else []
    bottleneck = device
    if host is not None:
        launch = _launch_bound(host, evidence)
        if launch is not None:
            bottleneck = "launch"
            findings.insert(0, launch)
    limiter, occupancy = _occupancy_limiter(num, evidence)
    waves = num("waves_per_sm")
    grid_too_small = waves is not None and waves < GRID_TOO_SMALL_WAVES
    found = [
        occupancy,
        _grid_fill(num, waves, grid_too_small, evidence),
        _imbalance(num, evidence),
        _spilling(num),
    ]
    findings += [f for f in found if f is not None]
    return Classification(bottleneck, device, limiter, grid_too_small, findings, evidence)


def _device_bottleneck(
    compute: float | None, memory: float | None, dram: float | None, l2_hit: float | None
) -> tuple[str | None, Finding | None]:
    """The device class from Speed Of Light: memory-bound, compute-bound or latency-bound (None
    without any throughput number), with its finding."""
    mem_level = max((v for v in (memory, dram) if v is not None), default=None)
    if compute is None and mem_level is None:
        return None, None
    c, mm = compute or 0.0, mem_level or 0.0
    sol: dict[str, Any] = {
        "compute_throughput_pct": compute,
        "memory_throughput_pct": memory,
        "dram_throughput_pct": dram,
        "busy_threshold_pct": BUSY_PCT,
    }
    if mm >= BUSY_PCT and mm >= c:
        tactics = list(TACTICS["memory"])
        if l2_hit is not None and l2_hit < L2_HIT_LOW_PCT:
            tactics += TACTICS["l2_persistence"]
            sol["l2_hit_rate_pct"] = l2_hit
        if (
            l2_hit is not None
            and l2_hit >= CROSS_BLOCK_L2_HIT_PCT
            and memory is not None
            and dram is not None
            and memory - dram >= CROSS_BLOCK_DRAM_GAP_PCT
        ):
            tactics += TACTICS["cross_block"]
            sol["l2_hit_rate_pct"] = l2_hit
        return "memory", Finding(
            "memory-bound",
            f"memory throughput {_fmt(mm, '%')} >= {_fmt(BUSY_PCT, '%')} of peak "
            f"and above compute ({_fmt(compute, '%')})",
            sol,
            tactics,
        )
    if c >= BUSY_PCT:
        return "compute", Finding(
            "compute-bound",
            f"compute (SM) throughput {_fmt(c, '%')} >= {_fmt(BUSY_PCT, '%')} "
            f"of peak and above memory ({_fmt(mem_level, '%')})",
            sol,
            list(TACTICS["compute"]),
        )
    return "latency", Finding(
        "latency-bound",
        f"compute {_fmt(compute, '%')} and memory {_fmt(mem_level, '%')} "
        f"throughput both under {_fmt(BUSY_PCT, '%')} of peak: units idle while warps wait",
        sol,
        list(TACTICS["latency"]),
    )


def _launch_bound(host: HostGaps, evidence: dict[str, Any]) -> Finding | None:
    """Launch-bound, only from a host measurement: the gaps between launches are at least
    LAUNCH_GAP_SHARE of the call. The host numbers go into ``evidence`` either way."""
    share = host.gap_share
    evidence.update(
        {
            "host_gap_us": host.gap_us,
            "host_busy_us": host.busy_us,
            "host_gap_share": share,
            "launch_gap_share_threshold": LAUNCH_GAP_SHARE,
        }
    )
    if share is None or share < LAUNCH_GAP_SHARE:
        return None
    ev = {
        "host_gap_us": host.gap_us,
        "host_busy_us": host.busy_us,
        "host_gap_share": round(share, 4),
        "launches": host.launches,
        "threshold": LAUNCH_GAP_SHARE,
    }
    return Finding(
        "launch-bound",
        f"host gaps {_fmt(host.gap_us, ' us')} are {_fmt(share * 100, '%')} "
        f"of the call (kernels busy {_fmt(host.busy_us, ' us')})",
        ev,
        list(TACTICS["launch"]),
    )


def _occupancy_limiter(num: Numbers, evidence: dict[str, Any]) -> tuple[str | None, Finding | None]:
    """The occupancy limiter (the smallest block limit; ties in :data:`LIMITS` order), and the
    occupancy-limited finding when theoretical occupancy is under FULL_OCCUPANCY_PCT."""
    known = {name: v for name, key in LIMITS.items() if (v := num(key)) is not None}
    if not known:
        return None, None
    smallest = min(known.values())
    tied = [k for k, v in known.items() if v == smallest]
    limiter = tied[0]
    theo = num("theoretical_occupancy_pct")
    ev: dict[str, Any] = {f"block_limit_{k}": v for k, v in known.items()}
    ev.update(
        {"theoretical_occupancy_pct": theo, "registers_per_thread": num("registers_per_thread")}
    )
    evidence.update({"limiter": limiter, "block_limits": dict(known)})
    if theo is None or theo >= FULL_OCCUPANCY_PCT:
        return limiter, None
    tie = f" (tied with {', '.join(tied[1:])})" if len(tied) > 1 else ""
    tactics = [t for k in tied for t in TACTICS[k]]
    return limiter, Finding(
        "occupancy-limited",
        f"theoretical occupancy {_fmt(theo, '%')}, limited by {limiter}{tie}: "
        f"{_fmt(smallest)} blocks/SM",
        ev,
        tactics,
    )


def _grid_fill(
    num: Numbers, waves: float | None, grid_too_small: bool, evidence: dict[str, Any]
) -> Finding | None:
    """Grid too small (under one wave per SM), or a tail effect (a few waves, the last one under
    TAIL_FILL full)."""
    if waves is None:
        return None
    evidence["waves_per_sm"] = waves
    if grid_too_small:
        ev = {
            "waves_per_sm": waves,
            "grid_blocks": num("grid_blocks"),
            "sm_count": num("sm_count"),
            "threshold": GRID_TOO_SMALL_WAVES,
        }
        return Finding(
            "grid-too-small",
            f"{_fmt(waves)} waves per SM: part of the GPU idles for the whole kernel",
            ev,
            list(TACTICS["grid"]),
        )
    if waves >= TAIL_MAX_WAVES:
        return None
    fill = waves - math.floor(waves)
    if not 0 < fill < TAIL_FILL:
        return None
    ev = {"waves_per_sm": waves, "last_wave_fill": round(fill, 4), "threshold": TAIL_FILL}
    return Finding(
        "tail-effect",
        f"{_fmt(waves)} waves per SM: the last wave is {_fmt(fill * 100, '%')} full",
        ev,
        list(TACTICS["tail"]),
    )


def _imbalance(num: Numbers, evidence: dict[str, Any]) -> Finding | None:
    """Achieved occupancy far under theoretical (under IMBALANCE_RATIO of it)."""
    theo, achieved = num("theoretical_occupancy_pct"), num("achieved_occupancy_pct")
    if theo is None or achieved is None or theo <= 0:
        return None
    ratio = achieved / theo
    evidence.update({"theoretical_occupancy_pct": theo, "achieved_occupancy_pct": achieved})
    if ratio >= IMBALANCE_RATIO:
        return None
    ev = {
        "theoretical_occupancy_pct": theo,
        "achieved_occupancy_pct": achieved,
        "achieved_over_theoretical": round(ratio, 4),
        "threshold": IMBALANCE_RATIO,
    }
    return Finding(
        "scheduling-imbalance",
        f"achieved occupancy {_fmt(achieved, '%')} is "
        f"{_fmt(ratio * 100, '%')} of theoretical {_fmt(theo, '%')}: warps finish unevenly "
        "or blocks start late",
        ev,
        list(TACTICS["imbalance"]),
    )


def _spilling(num: Numbers) -> Finding | None:
    """Any local-memory spilling request or register-spilling instruction."""
    spill_req, spill_pct = num("local_spilling_requests"), num("local_spilling_overhead_pct")
    spill_inst = num("register_spilling_instructions")
    if not any(v is not None and v > 0 for v in (spill_req, spill_pct, spill_inst)):
        return None
    ev = {
        "local_spilling_requests": spill_req,
        "local_spilling_overhead_pct": spill_pct,
        "register_spilling_instructions": spill_inst,
        "registers_per_thread": num("registers_per_thread"),
    }
    return Finding(
        "local-memory-spilling",
        f"registers spill to local memory ({_fmt(spill_req)} requests, "
        f"{_fmt(spill_pct, '%')} overhead)",
        ev,
        list(TACTICS["spilling"]),
    )
