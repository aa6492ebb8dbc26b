"""Representative workloads of the bands, and the shape matrix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from fibtui.core.errors import InputError
from fibtui.core.regimes.model import Band, RegimeReport, Representative, ShapeMatrixRow


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
