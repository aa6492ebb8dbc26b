"""Latency per workload: the mean of its PASSED latencies."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from fibtui.core.measurement import Timed
from fibtui.core.status import PASSED


def _rows_frame(rows: Iterable[Timed]) -> pl.DataFrame:
    uuids: list[str] = []
    statuses: list[str] = []
    lats: list[float | None] = []
    for r in rows:
        uuids.append(r.uuid)
        statuses.append(r.status)
        lats.append(r.latency_ms)
    return pl.DataFrame(
        {"uuid": uuids, "status": statuses, "latency_ms": lats},
        schema={"uuid": pl.String, "status": pl.String, "latency_ms": pl.Float64},
    )


def per_workload_latency(rows: Iterable[Timed]) -> pl.DataFrame:
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
