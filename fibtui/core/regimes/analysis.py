"""The analysis: bands from the varying axes, tiny bands merged, outliers, shares of latency."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from fibtui.core.dataset import Definition, WorkloadSet
from fibtui.core.errors import InputError
from fibtui.core.measurement import Timed
from fibtui.core.regimes.binning import _bin_filter, _bin_name, axis_bins
from fibtui.core.regimes.derived import derived_axes
from fibtui.core.regimes.latency import per_workload_latency
from fibtui.core.regimes.model import (
    MANY_WORKLOADS,
    MAX_BANDS,
    MAX_BINS_COUPLED,
    OUTLIER_SHARE,
    RESERVED_COLUMNS,
    TINY_LATENCY_SHARE,
    TINY_SHARE,
    TINY_WORKLOADS,
    Band,
    FilterValue,
    RegimeReport,
)
from fibtui.core.regimes.representatives import representatives, shape_matrix


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
    rows: Iterable[Timed] | None = None,
    pinned: Sequence[str] = (),
    unpinned: Sequence[str] = (),
    device: Any = None,
    latency_source: str | None = None,
) -> RegimeReport:
    """Bands, shares, outliers, representatives and floors of one definition's workloads.

    ``rows``: typed result rows (:class:`fibtui.core.measurement.Timed`), any number per
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
