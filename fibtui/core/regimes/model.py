"""What a regime analysis says: its limits, bands, representatives, the shape matrix and the
:class:`RegimeReport`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

MAX_BANDS = 12
MAX_BINS_COUPLED = 6
QUANTILE_BINS = 8
TINY_WORKLOADS = 2
TINY_SHARE = 0.02
TINY_LATENCY_SHARE = 0.05
OUTLIER_SHARE = 0.30
SPEED_OF_LIGHT_CONVENTION = "100 * floor / latency: 100 = at the floor, 25 = 4x the floor"
MANY_WORKLOADS = 40
#: Columns of the per-workload table besides the axes (an axis may not take these names).
RESERVED_COLUMNS = frozenset(
    {
        "uuid",
        "line",
        "band",
        "runs",
        "passed_runs",
        "latency_ms",
        "floor_bytes",
        "floor_flops",
        "floor_us",
        "floor_bound",
        "speed_of_light_pct",
    }
)


FilterValue = int | list[int]


@dataclass
class Band:
    name: str
    filter: dict[str, FilterValue]  # axis -> value, or [lo, hi] inclusive
    workloads: int
    kind: str = "value"  # value | range | combo | merged | outlier | all
    members: list[dict[str, FilterValue]] = field(default_factory=list)
    passed: int | None = None  # workloads whose every run PASSED (None without results)
    with_latency: int = 0
    total_latency_ms: float | None = None
    mean_latency_ms: float | None = None
    latency_share: float | None = None
    workload_share: float = 0.0
    mean_floor_us: float | None = None
    #: mean over the band's workloads of 100 * floor / latency (100 = at the floor)
    mean_speed_of_light_pct: float | None = None
    outlier: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Representative:
    uuid: str
    band: str
    reason: str
    axes: dict[str, int] = field(default_factory=dict)
    pinned: bool = False
    latency_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ShapeMatrixRow:
    """band -> workload -> dominant kernel -> bottleneck -> limiter (kernel columns from NCU)."""

    band: str
    uuid: str | None
    dominant_kernel: str | None = None
    bottleneck: str | None = None
    limiter: str | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RegimeReport:
    definition: str
    op_type: str
    varying_axes: list[str]
    const_axes: dict[str, int]
    #: varying axes the constraints fix from others: axis -> expression (not band axes)
    derived_axes: dict[str, str]
    dominant_axis: str | None
    binning: dict[str, str]
    has_latency: bool
    latency_source: str
    bands: list[Band]
    outliers: list[str]
    outlier_details: list[dict[str, Any]]
    representatives: list[Representative]
    shape_matrix: list[ShapeMatrixRow]
    #: One row per workload: uuid, line, <varying axes>, band, runs, passed_runs, latency_ms,
    #: floor_bytes, floor_flops, floor_us, floor_bound, speed_of_light_pct (100 * floor / latency).
    table: pl.DataFrame
    total_latency_ms: float | None = None
    device: dict[str, Any] | None = None
    pinned: list[str] = field(default_factory=list)
    unpinned: list[str] = field(default_factory=list)
    target_representatives: tuple[int, int] = (3, 4)
    notes: list[str] = field(default_factory=list)

    @property
    def workload_count(self) -> int:
        return self.table.height

    def band(self, name: str) -> Band:
        for b in self.bands:
            if b.name == name:
                return b
        raise KeyError(name)

    def workloads_json(self) -> list[dict[str, Any]]:
        axes = self.varying_axes
        out = []
        for r in self.table.iter_rows(named=True):
            out.append(
                {
                    "uuid": r["uuid"],
                    "axes": {a: r[a] for a in axes},
                    "band": r["band"],
                    "runs": r["runs"],
                    "passed": None if r["runs"] == 0 else r["passed_runs"] == r["runs"],
                    "latency_ms": r["latency_ms"],
                    "floor_bytes": r["floor_bytes"],
                    "floor_flops": r["floor_flops"],
                    "floor_us": r["floor_us"],
                    "floor_bound": r["floor_bound"],
                    "speed_of_light_pct": r["speed_of_light_pct"],
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "op_type": self.op_type,
            "workload_count": self.workload_count,
            "mode": "latency" if self.has_latency else "counts-only",
            "latency_source": self.latency_source,
            "total_latency_ms": self.total_latency_ms,
            "varying_axes": list(self.varying_axes),
            "derived_axes": dict(self.derived_axes),
            "const_axes": dict(self.const_axes),
            "dominant_axis": self.dominant_axis,
            "binning": dict(self.binning),
            "device": self.device,
            "speed_of_light_convention": SPEED_OF_LIGHT_CONVENTION,
            "bands": [b.to_json() for b in self.bands],
            "outliers": list(self.outliers),
            "outlier_details": list(self.outlier_details),
            "representatives": [r.to_json() for r in self.representatives],
            "target_representatives": list(self.target_representatives),
            "pinned": list(self.pinned),
            "unpinned": list(self.unpinned),
            "shape_matrix": [r.to_json() for r in self.shape_matrix],
            "workloads": self.workloads_json(),
            "notes": list(self.notes),
        }
