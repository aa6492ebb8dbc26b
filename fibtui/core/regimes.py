"""Regimes from the real workloads: which axes vary, bands along them, each band's share of
latency, outliers, representative workloads and the (NCU-filled later) shape matrix.

Nothing here knows an axis name: the definition says which axes are variable, the workloads say
which of those actually vary.

Bands
    - no varying axis: one band, ``all``;
    - one varying axis: one band per distinct value when there are at most :data:`MAX_BANDS`
      of them; otherwise power-of-two bins (``[1, 1], [2, 3], [4, 7], ...``, widened by powers of
      two until at most :data:`MAX_BANDS` remain) when the values spread that far, else quantile
      bins of about equal workload counts (a value is never split across bins);
    - several varying axes: coupled regimes. Each axis is binned as above with at most
      :data:`MAX_BINS_COUPLED` bins, and the combinations that actually occur become bands. A tiny
      one (at most :data:`TINY_WORKLOADS` workloads or under :data:`TINY_SHARE` of them, *and*
      under :data:`TINY_LATENCY_SHARE` of the latency when there is latency) is merged into its
      nearest neighbour (bin-index distance, then the heavier one), and merging goes on while
      there are more than :data:`MAX_BANDS` (lightest first). A merged band's ``filter`` is its bounding box; ``members`` lists the
      exact combinations in it.

Latency
    Per workload, the mean of its PASSED latencies (rows may hold repeats). A band's
    ``latency_share`` is the sum of its workloads' latencies over the sum over all workloads with
    a latency (so shares sum to 1). Without results every latency field is null (counts only).

Outliers (about a third of the latency)
    - a workload holding at least :data:`OUTLIER_SHARE` of the total latency (and at least twice
      an even share, 2/n) leaves its band and becomes a band of its own, ``outlier <uuid>``;
    - a band holding at least :data:`OUTLIER_SHARE` and at least twice its share of workloads is
      flagged as an outlier regime (never merged away).

Representatives
    3-4 workloads (2-3 when the definition has more than :data:`MANY_WORKLOADS`), each with its
    reason, picked in this order until the target is reached: the user's pins; outlier
    workloads; the heaviest band (its boundary workload when it holds the smallest or largest,
    else its typical workload: the one closest to the band's median latency); the largest and the
    smallest workload ("size" is the product of the varying axes); then the next heaviest bands.
    Unpinned workloads are never picked automatically (the next one in line takes the role).
    Pins live in the workspace's ``fibtui.toml`` (``[regimes] pinned / unpinned``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from fibtui.core.dataset import Definition, WorkloadSet
from fibtui.core.errors import InputError
from fibtui.core.status import PASSED

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

# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Binning one axis
# --------------------------------------------------------------------------------------------


def axis_bins(
    values: Sequence[int], counts: Sequence[int], max_bins: int
) -> tuple[list[tuple[int, int]], str]:
    """Bins ``[(lo, hi), ...]`` (inclusive, ascending) over sorted distinct ``values`` with their
    workload ``counts``, and the method used: ``values``, ``log2`` (power-of-two bins, widened
    by powers of two as needed) or ``quantile``."""
    values = list(values)
    if len(values) <= max_bins:
        return [(v, v) for v in values], "values"
    if values[0] >= 0:
        step = 1
        while True:
            keys = sorted({-1 if v == 0 else (v.bit_length() - 1) // step for v in values})
            if len(keys) <= max_bins:
                break
            step += 1
        if len(keys) >= 3:
            log_bins = [
                (0, 0) if k < 0 else (1 << (k * step), (1 << ((k + 1) * step)) - 1) for k in keys
            ]
            return log_bins, "log2" if step == 1 else f"log2 (x{1 << step} wide)"
    target = min(max_bins, QUANTILE_BINS)
    total = float(sum(counts))
    bins: list[tuple[int, int]] = []
    lo = values[0]
    acc = 0.0
    edge = 1
    for i, (v, c) in enumerate(zip(values, counts, strict=True)):
        acc += c
        last = i == len(values) - 1
        if last or (acc >= total * edge / target and len(bins) < target - 1):
            bins.append((lo, v))
            while edge < target and acc >= total * edge / target:
                edge += 1
            if not last:
                lo = values[i + 1]
    return bins, "quantile"


def _bin_name(axis: str, lo: int, hi: int) -> str:
    return f"{axis}={lo}" if lo == hi else f"{axis}={lo}..{hi}"


def _bin_filter(lo: int, hi: int) -> FilterValue:
    return lo if lo == hi else [lo, hi]


# --------------------------------------------------------------------------------------------
# Latency per workload
# --------------------------------------------------------------------------------------------


def _rows_frame(rows: Iterable[Any]) -> pl.DataFrame:
    uuids: list[str] = []
    statuses: list[str] = []
    lats: list[float | None] = []
    for r in rows:
        if isinstance(r, dict):
            uuids.append(r["uuid"])
            statuses.append(r["status"])
            lats.append(r.get("latency_ms"))
        else:
            uuids.append(r.uuid)
            statuses.append(r.status)
            lats.append(r.latency_ms)
    return pl.DataFrame(
        {"uuid": uuids, "status": statuses, "latency_ms": lats},
        schema={"uuid": pl.String, "status": pl.String, "latency_ms": pl.Float64},
    )


def per_workload_latency(rows: Iterable[Any]) -> pl.DataFrame:
    """uuid, runs, passed_runs, latency_ms (the mean of PASSED latencies; null when none)."""
    df = _rows_frame(rows)
    ok = pl.col("status") == PASSED
    return df.group_by("uuid", maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("runs"),
        ok.sum().cast(pl.Int64).alias("passed_runs"),
        pl.col("latency_ms")
        .filter(ok & pl.col("latency_ms").is_not_null())
        .mean()
        .alias("latency_ms"),
    )


# --------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------


@dataclass
class _Proto:
    """A band under construction: the exact combinations (bin-index tuples) it holds."""

    keys: list[tuple[int, ...]]
    count: int
    lat_sum: float
    kind: str
    base: tuple[int, ...] = ()  # the combination that names the band (merged ones join it)

    def __post_init__(self) -> None:
        self.base = self.base or self.keys[0]


#: band -> latency share of the analyses this process made of a run's rows, under the keys of
#: the files they came from (see :func:`shares_key`): a gate analyses the newest full run before
#: its jobs (for its representatives) and needs the same shares for its verdict
_SHARES_SEEN: dict[tuple[Any, ...], tuple[dict[str, float] | None, str]] = {}
_SHARES_KEPT = 32


def shares_key(
    definition: Definition, workloads: WorkloadSet, record: Path
) -> tuple[Any, ...] | None:
    """What an analysis's bands and latency shares depend on: the definition, its workloads and
    the run record the rows came from, each file's path and key (None when one is unreadable).
    Pins and the device change representatives and floors, never the bands or their shares."""
    from fibtui.core.cachefile import file_key

    paths = (definition.path, workloads.path, record)
    keys = [file_key(Path(p)) if p is not None else None for p in paths]
    if any(k is None for k in keys):
        return None
    return tuple(str(p) for p in paths) + tuple(tuple(k) for k in keys if k is not None)


def remember_shares(key: tuple[Any, ...] | None, report: RegimeReport, label: str) -> None:
    """Keep ``report``'s latency shares by band (None without latency) under ``key``."""
    if key is None:
        return
    shares = (
        {b.name: b.latency_share for b in report.bands if b.latency_share is not None}
        if report.has_latency
        else None
    )
    _SHARES_SEEN.pop(key, None)
    _SHARES_SEEN[key] = (shares, label)
    while len(_SHARES_SEEN) > _SHARES_KEPT:
        _SHARES_SEEN.pop(next(iter(_SHARES_SEEN)))


def shares_seen(key: tuple[Any, ...] | None) -> tuple[dict[str, float] | None, str] | None:
    """(shares or None, the rows' label) of an analysis this process already made, or None."""
    return _SHARES_SEEN.get(key) if key is not None else None


def _edges_at_or_below(bins: list[tuple[int, int]], values: pl.Series) -> pl.Series:
    """For each value, how many of the sorted bins' lower edges are <= it. (Through an
    expression: some polars versions' Series.search_sorted imports numpy for a type check, a
    tenth of a second that nothing else here needs.)"""
    lows = pl.Series([lo for lo, _ in bins], dtype=pl.Int64)
    return pl.select(pl.lit(lows).search_sorted(values.cast(pl.Int64), side="right")).to_series()


def analyze(
    definition: Definition,
    workloads: WorkloadSet,
    rows: Iterable[Any] | None = None,
    pinned: Sequence[str] = (),
    unpinned: Sequence[str] = (),
    device: Any = None,
    latency_source: str | None = None,
) -> RegimeReport:
    """Bands, shares, outliers, representatives and floors of one definition's workloads.

    ``rows``: result rows (``ResultRow`` or dicts with uuid, status, latency_ms), any number per
    workload; rows of other workloads are ignored (and counted in a note). ``device``: a
    :class:`fibtui.core.roofline.Device` for floors in time (bytes are computed regardless).
    """
    from fibtui.core import roofline

    notes: list[str] = []
    declared = list(definition.var_axes)
    clash = [a for a in declared if a in RESERVED_COLUMNS or a.startswith("_fib")]
    if clash:
        raise InputError(
            definition.path,
            f"axis name {clash[0]!r} is reserved by fibtui's regime table "
            f"({', '.join(sorted(RESERVED_COLUMNS))}, _fib*)",
            field=f"axes.{clash[0]}",
        )
    missing = [a for a in declared if a not in workloads.frame.columns]
    if missing:
        raise InputError(
            workloads.path,
            f"workloads lack variable axes {', '.join(missing)}",
            field="workload.axes",
        )
    frame = workloads.frame.select(["uuid", "line", *declared])
    if frame.height == 0:
        raise InputError(workloads.path, "no workloads")
    n = frame.height

    # Which declared-variable axes actually vary.
    uniques = (
        frame.select([pl.col(a).n_unique().alias(a) for a in declared]).row(0, named=True)
        if declared
        else {}
    )
    varying = [a for a in declared if uniques[a] > 1]
    # an axis the definition's constraints fix from other axes (``len_cu_seqlens == num_seqs + 1``)
    # and that every workload obeys is not a dimension of its own: no band is cut along it
    derived = {
        a: expr for a, expr in derived_axes(definition, frame, varying).items() if a in varying
    }
    for a, expr in derived.items():
        varying.remove(a)
        notes.append(
            f"{a} follows from the other axes ({a} == {expr}, a constraint every workload obeys): "
            "not a band axis"
        )
    const_axes = dict(definition.const_axes)
    for a in declared:
        if a not in varying and a not in derived:
            const_axes[a] = int(frame.get_column(a)[0])
            notes.append(f"{a} is a variable axis but every workload has {a}={const_axes[a]}")

    # Latency per workload.
    has_latency = False
    if rows is not None:
        lat = per_workload_latency(rows)
        known = lat.join(frame.select("uuid"), on="uuid", how="semi")
        stray = lat.height - known.height
        if stray:
            notes.append(
                f"{stray} result workload(s) not among this definition's workloads were ignored"
            )
        frame = frame.join(known, on="uuid", how="left").with_columns(
            pl.col("runs").fill_null(0), pl.col("passed_runs").fill_null(0)
        )
        has_latency = known.get_column("latency_ms").drop_nulls().len() > 0
        no_rows = frame.filter(pl.col("runs") == 0).height
        if no_rows:
            notes.append(f"{no_rows} workload(s) have no result rows")
        if not has_latency:
            notes.append("the results carry no PASSED latency for these workloads: counts only")
    else:
        frame = frame.with_columns(
            pl.lit(0, dtype=pl.Int64).alias("runs"),
            pl.lit(0, dtype=pl.Int64).alias("passed_runs"),
            pl.lit(None, dtype=pl.Float64).alias("latency_ms"),
        )
    if not has_latency:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("latency_ms"))
    total_latency = float(frame.get_column("latency_ms").sum()) if has_latency else None
    with_latency = frame.get_column("latency_ms").drop_nulls().len() if has_latency else 0
    if has_latency and with_latency < n:
        notes.append(
            f"latency shares are over the {with_latency} of {n} workloads with a PASSED latency"
        )

    # Floors.
    dev = device
    floors, floor_notes = (
        roofline.floor_frame(definition, workloads, dev) if dev is not None else (None, [])
    )
    notes += floor_notes
    if floors is not None:
        frame = frame.join(floors, on="uuid", how="left")
    else:
        bytes_only = roofline.floor_frame(definition, workloads, _UNIT_DEVICE)[0].select(
            "uuid", "floor_bytes", "floor_flops"
        )
        frame = frame.join(bytes_only, on="uuid", how="left").with_columns(
            pl.lit(None, dtype=pl.Float64).alias("floor_us"),
            pl.lit(None, dtype=pl.String).alias("floor_bound"),
        )
    # speed of light: the share of the latency the floor accounts for (null without both)
    frame = frame.with_columns(
        pl.when((pl.col("latency_ms") > 0) & (pl.col("floor_us") > 0))
        .then(100.0 * pl.col("floor_us") / (pl.col("latency_ms") * 1000.0))
        .otherwise(None)
        .alias("speed_of_light_pct")
    )

    # Workload outliers leave their band.
    outlier_uuids: list[str] = []
    outlier_details: list[dict[str, Any]] = []
    if has_latency and total_latency and with_latency >= 2:
        thr = max(OUTLIER_SHARE, 2.0 / with_latency) * total_latency
        heavy = frame.filter(pl.col("latency_ms") >= thr).sort(
            ["latency_ms", "line"], descending=[True, False]
        )
        for r in heavy.iter_rows(named=True):
            outlier_uuids.append(r["uuid"])
            outlier_details.append(
                {
                    "kind": "workload",
                    "uuid": r["uuid"],
                    "name": f"outlier {r['uuid']}",
                    "latency_share": r["latency_ms"] / total_latency,
                }
            )
    regular = frame.filter(~pl.col("uuid").is_in(outlier_uuids)) if outlier_uuids else frame

    # Bin each varying axis, then group the combinations that occur.
    max_bins = MAX_BANDS if len(varying) <= 1 else MAX_BINS_COUPLED
    bins_of: dict[str, list[tuple[int, int]]] = {}
    binning: dict[str, str] = {}
    keyed = regular
    for a in varying:
        dist = frame.group_by(a).len().sort(a)
        values = dist.get_column(a).to_list()
        counts = dist.get_column("len").to_list()
        bins, method = axis_bins(values, counts, max_bins)
        bins_of[a] = bins
        binning[a] = method
        # bin index = how many bin lower edges are <= the value, minus one (bins are sorted, cover
        # every value, and never overlap)
        index = _edges_at_or_below(bins, keyed.get_column(a))
        keyed = keyed.with_columns((index - 1).cast(pl.Int32).alias(f"_fib_bin:{a}"))
    bin_cols = [f"_fib_bin:{a}" for a in varying]
    if bin_cols:
        combos = (
            keyed.group_by(bin_cols)
            .agg(pl.len().alias("count"), pl.col("latency_ms").sum().alias("lat"))
            .sort(bin_cols)
        )
        protos = [
            _Proto(
                [tuple(int(x) for x in r[:-2])],
                int(r[-2]),
                float(r[-1] or 0.0),
                "combo"
                if len(varying) > 1
                else (
                    "value"
                    if bins_of[varying[0]][r[0]][0] == bins_of[varying[0]][r[0]][1]
                    else "range"
                ),
            )
            for r in combos.iter_rows()
        ]
    else:
        protos = (
            [_Proto([()], keyed.height, float(keyed.get_column("latency_ms").sum() or 0.0), "all")]
            if keyed.height
            else []
        )

    if len(varying) > 1:
        protos = _merge_tiny(protos, n, total_latency if has_latency else None)

    # Name the bands and tag every workload with its band.
    names: list[str] = []
    key_to_band: dict[tuple[int, ...], int] = {}
    bands: list[Band] = []
    for i, p in enumerate(protos):
        member_filters = [
            {a: _bin_filter(*bins_of[a][k[j]]) for j, a in enumerate(varying)} for k in p.keys
        ]
        if not varying:
            name, filt = "all", {}
        else:
            box: dict[str, FilterValue] = {}
            for j, a in enumerate(varying):
                lo = min(bins_of[a][k[j]][0] for k in p.keys)
                hi = max(bins_of[a][k[j]][1] for k in p.keys)
                box[a] = _bin_filter(lo, hi)
            base = p.base
            name = ", ".join(_bin_name(a, *bins_of[a][base[j]]) for j, a in enumerate(varying))
            if len(p.keys) > 1:
                name += f" (+{len(p.keys) - 1} merged)"
            filt = box
        names.append(name)
        for k in p.keys:
            key_to_band[k] = i
        bands.append(
            Band(
                name=name,
                filter=filt,
                workloads=p.count,
                kind="merged" if len(p.keys) > 1 else p.kind,
                members=member_filters if len(p.keys) > 1 else [],
            )
        )
    if bin_cols:
        mapping = pl.DataFrame(
            {
                **{c: [k[j] for k in key_to_band] for j, c in enumerate(bin_cols)},
                "band": [names[i] for i in key_to_band.values()],
            },
            schema={**{c: pl.Int32 for c in bin_cols}, "band": pl.String},
        )
        keyed = keyed.join(mapping, on=bin_cols, how="left").drop(bin_cols)
    else:
        keyed = keyed.with_columns(pl.lit("all").alias("band"))
    outlier_rows = frame.filter(pl.col("uuid").is_in(outlier_uuids))
    for r in outlier_rows.sort("line").iter_rows(named=True):
        bands.append(
            Band(
                name=f"outlier {r['uuid']}",
                filter={a: int(r[a]) for a in varying},
                workloads=1,
                kind="outlier",
                outlier=True,
            )
        )
    if outlier_uuids:
        outlier_rows = outlier_rows.with_columns(("outlier " + pl.col("uuid")).alias("band"))
        table = pl.concat([keyed, outlier_rows.select(keyed.columns)])
    else:
        table = keyed
    table = table.sort("line")

    # Per-band statistics.
    ok = (pl.col("runs") > 0) & (pl.col("passed_runs") == pl.col("runs"))
    stats = table.group_by("band").agg(
        pl.len().alias("workloads"),
        ok.sum().alias("passed"),
        pl.col("latency_ms").count().alias("with_latency"),
        pl.col("latency_ms").sum().alias("total"),
        pl.col("floor_us").mean().alias("floor"),
        pl.col("speed_of_light_pct").mean().alias("sol"),
    )
    by_name = {r["band"]: r for r in stats.iter_rows(named=True)}
    for b in bands:
        s = by_name[b.name]
        b.workloads = int(s["workloads"])
        b.workload_share = b.workloads / n
        b.passed = int(s["passed"]) if rows is not None else None
        b.with_latency = int(s["with_latency"]) if has_latency else 0
        if has_latency:
            b.total_latency_ms = float(s["total"] or 0.0)
            b.mean_latency_ms = b.total_latency_ms / b.with_latency if b.with_latency else None
            b.latency_share = b.total_latency_ms / total_latency if total_latency else 0.0
        b.mean_floor_us = s["floor"]
        b.mean_speed_of_light_pct = s["sol"]
    outliers = list(outlier_uuids)
    if has_latency and len(bands) > 1:
        for b in bands:
            if b.kind != "outlier" and (b.latency_share or 0.0) >= max(
                OUTLIER_SHARE, 2.0 * b.workload_share
            ):
                b.outlier = True
                outliers.append(b.name)
                outlier_details.append(
                    {
                        "kind": "band",
                        "name": b.name,
                        "latency_share": b.latency_share,
                        "workload_share": b.workload_share,
                    }
                )

    dominant = _dominant_axis(table, varying, bins_of, has_latency)
    dev_json = None
    if dev is not None:
        dev_json = dev.to_json()
    report = RegimeReport(
        definition=definition.name,
        op_type=definition.op_type,
        varying_axes=varying,
        const_axes=const_axes,
        derived_axes=derived,
        dominant_axis=dominant,
        binning=binning,
        has_latency=has_latency,
        latency_source=latency_source or ("results" if has_latency else "none: counts only"),
        bands=bands,
        outliers=outliers,
        outlier_details=outlier_details,
        representatives=[],
        shape_matrix=[],
        table=table,
        total_latency_ms=total_latency,
        device=dev_json,
        notes=notes,
        pinned=list(pinned),
        unpinned=list(unpinned),
        target_representatives=(2, 3) if n > MANY_WORKLOADS else (3, 4),
    )
    report.representatives = representatives(report, pinned, unpinned)
    report.shape_matrix = shape_matrix(report)
    return report


class _UnitDevice:
    """Stands in for a device when only bytes are wanted."""

    bandwidth_tbs = 1.0

    def rate_tflops(self, _narrowest: str | None) -> float:
        return 1.0


_UNIT_DEVICE: Any = _UnitDevice()


def _merge_tiny(protos: list[_Proto], n: int, total_latency: float | None) -> list[_Proto]:
    """Merge tiny coupled regimes into their nearest neighbour; cap the count at MAX_BANDS."""

    def weight(p: _Proto) -> float:
        w = p.count / n
        if total_latency:
            w = max(w, p.lat_sum / total_latency)
        return w

    def tiny(p: _Proto) -> bool:
        few = p.count <= TINY_WORKLOADS or p.count / n < TINY_SHARE
        light = not total_latency or p.lat_sum / total_latency < TINY_LATENCY_SHARE
        return few and light

    def protected(p: _Proto) -> bool:
        if not total_latency:
            return False
        return p.lat_sum / total_latency >= max(OUTLIER_SHARE, 2.0 * p.count / n)

    def distance(a: _Proto, b: _Proto) -> int:
        return min(
            sum(abs(x - y) for x, y in zip(ka, kb, strict=True)) for ka in a.keys for kb in b.keys
        )

    protos = list(protos)
    while len(protos) > 1:
        movable = [p for p in protos if not protected(p)]
        # A tiny regime joins its nearest regime that is not tiny; when every regime is tiny
        # (a workload per combination), only the cap on the count merges.
        small = [p for p in movable if tiny(p)] if any(not tiny(p) for p in protos) else []
        if small:
            victim = min(small, key=lambda p: (weight(p), p.base))
            targets = [p for p in protos if p is not victim and not tiny(p)]
        elif len(protos) > MAX_BANDS and movable:
            victim = min(movable, key=lambda p: (weight(p), p.base))
            targets = [p for p in protos if p is not victim]
        else:
            break
        unprotected = [p for p in targets if not protected(p)]
        targets = unprotected or targets
        target = min(
            targets, key=lambda p: (distance(victim, p), -weight(p), -p.lat_sum, -p.count, p.base)
        )
        target.keys = sorted(target.keys + victim.keys)
        target.count += victim.count
        target.lat_sum += victim.lat_sum
        protos = [p for p in protos if p is not victim]
    return sorted(protos, key=lambda p: p.base)


def _dominant_axis(
    table: pl.DataFrame,
    varying: list[str],
    bins_of: dict[str, list[tuple[int, int]]],
    has_latency: bool,
) -> str | None:
    """The varying axis that explains most of the latency's spread (the between-bin share of its
    variance, over each axis's own bins); without latency, the axis with the most bins. Ties go
    to definition order."""
    if not varying:
        return None
    if len(varying) == 1:
        return varying[0]
    if has_latency:
        data = table.filter(pl.col("latency_ms").is_not_null())
        if data.height > 1:
            mean = data.get_column("latency_ms").mean()
            total_ss = float(data.select(((pl.col("latency_ms") - mean) ** 2).sum()).item())
            if total_ss > 0:
                best, best_score = varying[0], -1.0
                for a in varying:
                    index = _edges_at_or_below(bins_of[a], data.get_column(a))
                    g = (
                        data.with_columns(pl.Series("_fib_bin", index))
                        .group_by("_fib_bin")
                        .agg(pl.len().alias("_fib_n"), pl.col("latency_ms").mean().alias("_fib_m"))
                    )
                    score = (
                        float(
                            g.select(
                                (pl.col("_fib_n") * (pl.col("_fib_m") - mean) ** 2).sum()
                            ).item()
                        )
                        / total_ss
                    )
                    if score > best_score + 1e-12:
                        best, best_score = a, score
                return best
    return max(varying, key=lambda a: (len(bins_of[a]), -varying.index(a)))


# --------------------------------------------------------------------------------------------
# Representatives
# --------------------------------------------------------------------------------------------


def _ordinal(i: int) -> str:
    return {1: "2nd", 2: "3rd"}.get(i, f"{i + 1}th")


def smallest_per_band(report: RegimeReport) -> list[str]:
    """The smallest workload (product of the varying axes, then file order) of each band, in band
    order: a correctness gate that reaches every regime in the least time (the CPU interpreter's
    quick gate; its wall times say nothing about GPU speed anyway)."""
    table = report.table
    if table.height == 0:
        return []
    size = pl.lit(1.0)
    for a in report.varying_axes:
        size = size * pl.col(a).cast(pl.Float64)
    t = (
        table.with_columns(size.alias("_fib_size"))
        .select("uuid", "line", "band", "_fib_size")
        .sort(["_fib_size", "line"])
    )
    first: dict[str, str] = {}
    for r in t.iter_rows(named=True):
        first.setdefault(r["band"], r["uuid"])
    order = [b.name for b in report.bands]
    return [first[name] for name in order if name in first] + [
        u for name, u in first.items() if name not in order
    ]


def representatives(
    report: RegimeReport, pinned: Sequence[str] = (), unpinned: Sequence[str] = ()
) -> list[Representative]:
    """Pick the representative workloads of a report (see the module docstring for the order)."""
    table = report.table
    axes = report.varying_axes
    lo_target, hi_target = report.target_representatives
    target = min(hi_target, table.height)
    unpinned_set = set(unpinned) - set(pinned)
    size = pl.lit(1.0)
    for a in axes:
        size = size * pl.col(a).cast(pl.Float64)
    t = table.select("uuid", "line", "band", "latency_ms", *axes).with_columns(
        size.alias("_fib_size")
    )
    allowed = t.filter(~pl.col("uuid").is_in(list(unpinned_set))) if unpinned_set else t
    info = {r["uuid"]: r for r in t.iter_rows(named=True)} if t.height <= 5000 else None

    def row(uuid: str) -> dict[str, Any]:
        if info is not None:
            return info[uuid]
        return t.filter(pl.col("uuid") == uuid).row(0, named=True)

    picked: dict[str, Representative] = {}
    band_taken: set[str] = set()

    def add(uuid: str, reason: str, pin: bool = False) -> None:
        if uuid in picked:
            picked[uuid].reason += f"; {reason}"
            return
        r = row(uuid)
        picked[uuid] = Representative(
            uuid, r["band"], reason, {a: int(r[a]) for a in axes}, pin, r["latency_ms"]
        )
        band_taken.add(r["band"])

    for uuid in pinned:
        if uuid in picked:
            continue
        if (info is not None and uuid in info) or (
            info is None and t.filter(pl.col("uuid") == uuid).height
        ):
            add(uuid, "pinned by the user", pin=True)
        elif f"pinned workload {uuid} is not among this definition's workloads" not in report.notes:
            report.notes.append(f"pinned workload {uuid} is not among this definition's workloads")

    def full() -> bool:
        return len(picked) >= target

    def extreme(frame: pl.DataFrame, largest: bool) -> str | None:
        if frame.height == 0:
            return None
        ordered = frame.sort(["_fib_size", "line"], descending=[largest, False])
        return ordered.get_column("uuid")[0]

    def typical(band: str) -> str | None:
        sub = allowed.filter(pl.col("band") == band)
        if sub.height == 0:
            return None
        if report.has_latency and sub.get_column("latency_ms").drop_nulls().len():
            sub = sub.filter(pl.col("latency_ms").is_not_null())
            med = sub.get_column("latency_ms").median()
            return (
                sub.with_columns((pl.col("latency_ms") - med).abs().alias("_fib_d"))
                .sort(["_fib_d", "line"])
                .get_column("uuid")[0]
            )
        ordered = sub.sort(["_fib_size", "line"])
        return ordered.get_column("uuid")[ordered.height // 2]

    def describe(uuid: str) -> str:
        r = row(uuid)
        return ", ".join(f"{a}={int(r[a])}" for a in axes) or "the only shape"

    largest = extreme(allowed, True)
    smallest = extreme(allowed, False)

    # Outlier workloads first.
    for d in report.outlier_details:
        if full():
            break
        if d["kind"] == "workload" and d["uuid"] not in unpinned_set:
            add(d["uuid"], f"outlier: holds {d['latency_share']:.0%} of total latency")

    def band_weight(b: Band) -> tuple[float, int]:
        return ((b.latency_share or 0.0) if report.has_latency else b.workload_share, b.workloads)

    ranked = sorted(
        [b for b in report.bands if b.kind != "outlier"],
        key=lambda b: (-band_weight(b)[0], -band_weight(b)[1]),
    )

    def band_reason(b: Band, rank: int) -> str:
        what = "heaviest band" if rank == 0 else f"{_ordinal(rank)} heaviest band"
        if report.has_latency:
            return f"{what} {b.name} ({(b.latency_share or 0.0):.0%} of latency)"
        what = "largest band" if rank == 0 else "band"
        return f"{what} {b.name} ({b.workloads} of {table.height} workloads; counts only)"

    def pick_band(b: Band, rank: int) -> None:
        if b.name in band_taken:
            return
        for boundary, label in ((largest, "largest"), (smallest, "smallest")):
            if boundary is not None and row(boundary)["band"] == b.name:
                add(boundary, f"{label} workload ({describe(boundary)}); {band_reason(b, rank)}")
                return
        uuid = typical(b.name)
        if uuid is not None:
            add(
                uuid,
                band_reason(b, rank) + (" - its typical workload" if report.has_latency else ""),
            )

    if ranked and not full():
        pick_band(ranked[0], 0)
    for boundary, label in ((largest, "largest"), (smallest, "smallest")):
        if not full() and boundary is not None and boundary not in picked:
            add(boundary, f"{label} workload ({describe(boundary)})")
    # The next heaviest bands; among equally heavy ones (counts only, mostly), the one farthest
    # from the bands already represented, so the picks spread over the shapes.
    position = {b.name: i for i, b in enumerate(report.bands)}
    rank_of = {b.name: i for i, b in enumerate(ranked)}
    left = [b for b in ranked[1:] if b.name not in band_taken]
    while left and not full():
        taken = [position[name] for name in band_taken if name in position]

        def spread(b: Band, taken: list[int] = taken) -> int:
            return min((abs(position[b.name] - i) for i in taken), default=0)

        b = min(
            left,
            key=lambda b: (
                -round(band_weight(b)[0], 9),
                -band_weight(b)[1],
                -spread(b),
                position[b.name],
            ),
        )
        left.remove(b)
        pick_band(b, rank_of[b.name])
    # Fewer bands than the minimum: another shape of the heaviest bands, while one is left.
    shape_cols = [pl.col(a) for a in axes]
    while len(picked) < min(lo_target, target) and axes:
        seen = {tuple(r.axes[a] for a in axes) for r in picked.values()}
        added = False
        for rank, b in enumerate(ranked):
            sub = allowed.filter((pl.col("band") == b.name) & ~pl.col("uuid").is_in(list(picked)))
            if sub.height:
                shapes = (
                    sub.select(pl.concat_list(shape_cols).alias("_fib_shape"))
                    .get_column("_fib_shape")
                    .to_list()
                )
                sub = sub.filter(pl.Series([tuple(x) not in seen for x in shapes]))
            if sub.height == 0:
                continue
            ordered = sub.sort(["_fib_size", "line"])
            uuid = ordered.get_column("uuid")[ordered.height // 2]
            add(uuid, f"another shape ({describe(uuid)}) of {band_reason(b, rank)}")
            added = True
            break
        if not added:
            break
    return list(picked.values())


def shape_matrix(report: RegimeReport) -> list[ShapeMatrixRow]:
    """One row per band: its representative (else its first workload); kernel columns empty."""
    rep_of: dict[str, str] = {}
    for r in report.representatives:
        rep_of.setdefault(r.band, r.uuid)
    first = report.table.group_by("band", maintain_order=True).agg(pl.col("uuid").first())
    first_of = dict(first.iter_rows())
    return [ShapeMatrixRow(b.name, rep_of.get(b.name, first_of.get(b.name))) for b in report.bands]


def attach_kernel_evidence(
    matrix: list[ShapeMatrixRow],
    band: str,
    *,
    dominant_kernel: str | None,
    bottleneck: str | None,
    limiter: str | None,
    uuid: str | None = None,
    source: str | None = None,
) -> ShapeMatrixRow:
    """Fill one band's kernel columns from NCU evidence (the row is updated in place)."""
    for row in matrix:
        if row.band == band:
            row.dominant_kernel = dominant_kernel
            row.bottleneck = bottleneck
            row.limiter = limiter
            if uuid is not None:
                row.uuid = uuid
            row.source = source
            return row
    raise InputError(
        source,
        f"no band named {band!r} in the shape matrix ({', '.join(r.band for r in matrix)})",
        field="band",
    )


# --------------------------------------------------------------------------------------------
# Pins (the workspace's fibtui.toml, [regimes] pinned / unpinned)
# --------------------------------------------------------------------------------------------


def _uuid_list(root: str | Path, key: str) -> list[str]:
    from fibtui.core.settings import get_setting, settings_path

    value = get_setting(root, f"regimes.{key}", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(
            settings_path(root),
            "expected a list of workload uuids (strings)",
            field=f"regimes.{key}",
        )
    return list(dict.fromkeys(value))


def load_pins(root: str | Path) -> tuple[list[str], list[str]]:
    """(pinned, unpinned) from the workspace's fibtui.toml."""
    return _uuid_list(root, "pinned"), _uuid_list(root, "unpinned")


def _check_uuid(uuid: str) -> str:
    if not isinstance(uuid, str) or not uuid.strip() or any(c.isspace() for c in uuid.strip()):
        raise InputError(None, f"not a workload uuid: {uuid!r}", field="--pin/--unpin")
    return uuid.strip()


def pin(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Pin a workload as a representative (and forget an earlier unpin of it)."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    if uuid not in pinned:
        pinned.append(uuid)
    unpinned = [u for u in unpinned if u != uuid]
    set_setting(root, "regimes.pinned", pinned)
    set_setting(root, "regimes.unpinned", unpinned)
    return pinned, unpinned


def unpin(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Unpin a workload: drop its pin, and keep automatic picks from choosing it."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    pinned = [u for u in pinned if u != uuid]
    if uuid not in unpinned:
        unpinned.append(uuid)
    set_setting(root, "regimes.pinned", pinned)
    set_setting(root, "regimes.unpinned", unpinned)
    return pinned, unpinned


def automatic(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Give a workload back to the automatic choice: neither pinned nor kept out."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    set_setting(root, "regimes.pinned", [u for u in pinned if u != uuid])
    set_setting(root, "regimes.unpinned", [u for u in unpinned if u != uuid])
    return load_pins(root)


_EQUALITY = re.compile(r"^\s*([A-Za-z_]\w*)\s*==\s*(.+?)\s*$")


def _axis_expression(node: ast.AST, axes: set[str]) -> bool:
    """Integer arithmetic over axis names only (no calls, indexing or attributes)."""
    if isinstance(node, ast.Expression):
        return _axis_expression(node.body, axes)
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
    ):
        return _axis_expression(node.left, axes) and _axis_expression(node.right, axes)
    if isinstance(node, ast.Name):
        return node.id in axes
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )


def _evaluate(node: ast.AST, values: dict[str, int]) -> int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Name):
        return int(values[node.id])
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left, values), _evaluate(node.right, values)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    return left // right if right else 0


def derived_axes(definition: Definition, frame: pl.DataFrame, varying: list[str]) -> dict[str, str]:
    """Varying axes that an equality constraint of the definition (``axis == expression over other
    axes``) fixes, checked against every workload: axis -> expression. Only integer arithmetic over
    axis names counts; a constraint reading a tensor (``cu_seqlens[-1].item()``) does not."""
    out: dict[str, str] = {}
    consts = definition.const_axes
    known = set(consts) | set(varying)
    for text in definition.constraints:
        m = _EQUALITY.match(text)
        if not m or m.group(1) not in varying:
            continue
        axis, expr = m.group(1), m.group(2)
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError:
            continue
        if not _axis_expression(tree, known - {axis}):
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if not names & (set(varying) - {axis}):
            continue  # fixed by consts alone: it would not vary
        cols = [c for c in sorted(names | {axis}) if c in frame.columns]
        holds = all(
            _evaluate(tree, {**consts, **row}) == row[axis]
            for row in frame.select(cols).iter_rows(named=True)
        )
        if holds:
            out[axis] = expr
    return out
