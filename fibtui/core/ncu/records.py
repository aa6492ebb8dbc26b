"""What a report is read into: :class:`NcuReport` of :class:`Launch` records, each with its
:class:`Metric` and :class:`Rule` lines; and the compact fields (:data:`FIELDS`: where each is
found, by its details/text display name, then its raw metric name) that :func:`launch_fields`
takes from a launch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Metric:
    section: str
    name: str
    value: float | str | None
    unit: str  # canonical (see normalize)
    raw_value: str = ""
    raw_unit: str = ""


@dataclass
class Rule:
    section: str
    name: str
    type: str  # OPT | INF | WRN | ERR
    text: str
    speedup_type: str | None = None  # local | global
    speedup_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "name": self.name,
            "type": self.type,
            "text": self.text,
            "speedup_type": self.speedup_type,
            "speedup_pct": self.speedup_pct,
        }


@dataclass
class Launch:
    """One profiled kernel launch and every metric and rule that came with it."""

    kernel: str
    id: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    context: int | None = None
    stream: int | None = None
    device: int | None = None
    cc: str | None = None
    process_id: int | None = None
    process_name: str | None = None
    workload: str | None = None
    axes: dict[str, Any] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    def find(self, name: str, unit: str | None = None) -> Metric | None:
        """The first metric called ``name`` (case-insensitive) with a number in ``unit``
        (a canonical unit, or its prefix such as ``byte`` for ``byte/block``)."""
        for m in self._index().get(name.lower(), ()):
            if not isinstance(m.value, float):
                continue
            if unit is None or m.unit == unit or m.unit.startswith(unit + "/"):
                return m
        return None

    def _index(self) -> dict[str, list[Metric]]:
        cached = self.__dict__.get("_by_name")
        if cached is None or cached[0] != len(self.metrics):
            index: dict[str, list[Metric]] = {}
            for m in self.metrics:
                index.setdefault(m.name.lower(), []).append(m)
            cached = (len(self.metrics), index)
            self.__dict__["_by_name"] = cached
        return cached[1]


@dataclass
class NcuReport:
    path: str | None
    source_format: str  # details-csv | raw-csv | details-text | hand-json | ncu-rep
    launches: list[Launch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# The compact fields: where each is found (details/text display names, then raw metric names)


@dataclass(frozen=True)
class FieldSpec:
    names: tuple[str, ...]  # details / text page display names
    raw: tuple[str, ...]  # raw page metric names
    unit: str | None  # required canonical unit (prefix match for byte/...), None: any number


FIELDS: dict[str, FieldSpec] = {
    "duration_us": FieldSpec(
        ("Duration",), ("gpu__time_duration.sum", "gpu__time_duration.avg"), "us"
    ),
    "compute_throughput_pct": FieldSpec(
        ("Compute (SM) Throughput", "Compute (SM) [%]", "SM [%]"),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
        "%",
    ),
    "memory_throughput_pct": FieldSpec(
        ("Memory Throughput", "Memory [%]"),
        ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
        "%",
    ),
    "dram_throughput_pct": FieldSpec(
        ("DRAM Throughput",),
        (
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
        ),
        "%",
    ),
    "l2_hit_rate_pct": FieldSpec(("L2 Hit Rate",), ("lts__t_sector_hit_rate.pct",), "%"),
    "registers_per_thread": FieldSpec(
        ("Registers Per Thread",), ("launch__registers_per_thread",), None
    ),
    "dynamic_shared_memory_bytes": FieldSpec(
        ("Dynamic Shared Memory Per Block",), ("launch__shared_mem_per_block_dynamic",), "byte"
    ),
    "static_shared_memory_bytes": FieldSpec(
        ("Static Shared Memory Per Block",), ("launch__shared_mem_per_block_static",), "byte"
    ),
    "theoretical_occupancy_pct": FieldSpec(
        ("Theoretical Occupancy",), ("sm__maximum_warps_per_active_cycle_pct",), "%"
    ),
    "achieved_occupancy_pct": FieldSpec(
        ("Achieved Occupancy",), ("sm__warps_active.avg.pct_of_peak_sustained_active",), "%"
    ),
    "waves_per_sm": FieldSpec(("Waves Per SM",), ("launch__waves_per_multiprocessor",), None),
    "grid_blocks": FieldSpec(("Grid Size",), ("launch__grid_size",), None),
    "block_threads": FieldSpec(("Block Size",), ("launch__block_size",), None),
    "block_limit_registers": FieldSpec(
        ("Block Limit Registers",), ("launch__occupancy_limit_registers",), None
    ),
    "block_limit_shared_memory": FieldSpec(
        ("Block Limit Shared Mem", "Block Limit Shared Memory"),
        ("launch__occupancy_limit_shared_mem",),
        None,
    ),
    "block_limit_warps": FieldSpec(
        ("Block Limit Warps",), ("launch__occupancy_limit_warps",), None
    ),
    "block_limit_blocks": FieldSpec(("Block Limit SM",), ("launch__occupancy_limit_blocks",), None),
    "block_limit_barriers": FieldSpec(
        ("Block Limit Barriers",), ("launch__occupancy_limit_barriers",), None
    ),
    "l2_persisting_size_bytes": FieldSpec(
        ("L2 Persisting Size",), ("launch__persisting_l2_cache_size",), "byte"
    ),
    "local_spilling_requests": FieldSpec(
        ("Local Memory Spilling Requests",), ("derived__local_spilling_requests",), None
    ),
    "local_spilling_overhead_pct": FieldSpec(
        ("Local Memory Spilling Request Overhead",), ("derived__local_spilling_requests_pct",), "%"
    ),
    "register_spilling_instructions": FieldSpec(
        (), ("sass__inst_executed_register_spilling",), None
    ),
    "sm_count": FieldSpec(("# SMs",), ("launch__sm_count",), None),
    "sm_frequency_ghz": FieldSpec(
        ("SM Frequency",), ("gpc__cycles_elapsed.avg.per_second",), "GHz"
    ),
}

# The limiter names, in the order used to break a tie.
LIMITS: dict[str, str] = {
    "registers": "block_limit_registers",
    "shared_memory": "block_limit_shared_memory",
    "warps": "block_limit_warps",
    "blocks": "block_limit_blocks",
    "barriers": "block_limit_barriers",
}


def launch_fields(launch: Launch) -> dict[str, float | None]:
    """The compact fields of one launch (None where the report does not have them)."""
    out: dict[str, float | None] = {}
    for key, spec in FIELDS.items():
        value: float | None = None
        for name in (*spec.names, *spec.raw):
            m = launch.find(name, spec.unit)
            if m is not None:
                value = m.value  # type: ignore[assignment]
                break
        out[key] = value
    if out["grid_blocks"] is None and launch.grid:
        out["grid_blocks"] = float(launch.grid[0] * launch.grid[1] * launch.grid[2])
    if out["block_threads"] is None and launch.block:
        out["block_threads"] = float(launch.block[0] * launch.block[1] * launch.block[2])
    return out
