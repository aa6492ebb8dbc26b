"""The interval for log G: z (A/A-calibrated), bootstrap over workloads, or Student's t."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from fibtui.core import numbers
from fibtui.core.stats.constants import (
    BOOTSTRAP_MIN_WORKLOADS,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    T_MIN_WORKLOADS,
)
from fibtui.core.stats.distributions import _NORMAL, t_quantile
from fibtui.core.stats.floor import _pct
from fibtui.core.stats.noise import PairNoise
from fibtui.core.stats.pairs import WorkloadPair


def exp_or_inf(x: float) -> float:
    """``math.exp``, but infinity past the float range: an interval whose critical value is huge
    (Student's t with one degree of freedom at an early look of an adaptive run) has an end no
    ratio can reach, which is what infinity says."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def finite_or_none(x: float | None) -> float | None:
    """``x`` when it is a finite number, else None (JSON has no infinity)."""
    return x if x is not None and math.isfinite(x) else None


@dataclass
class Interval:
    log_low: float
    log_high: float
    method: str
    df: float | None = None

    @property
    def low(self) -> float:
        return exp_or_inf(self.log_low)

    @property
    def high(self) -> float:
        return exp_or_inf(self.log_high)


def _weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


def _t_interval(d: Sequence[float], w: Sequence[float], confidence: float) -> Interval:
    n = len(d)
    mean = _weighted_mean(d, w)
    total = sum(w)
    var = (
        sum(wi * wi * (di - mean) ** 2 for di, wi in zip(d, w, strict=True))
        / (total * total)
        * n
        / (n - 1)
    )
    se = math.sqrt(var)
    q = t_quantile(0.5 + confidence / 2.0, float(n - 1))
    return Interval(
        mean - q * se, mean + q * se, f"t across {n} workloads, {n - 1} df", float(n - 1)
    )


def _bootstrap(
    d: Sequence[float], w: Sequence[float], confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the (weighted) mean over workloads resampled with replacement
    (from :data:`BOOTSTRAP_COLUMNAR_WORKLOADS` workloads on, drawn by polars, column-wise)."""
    n = len(d)
    if n >= BOOTSTRAP_COLUMNAR_WORKLOADS:
        return _bootstrap_columnar(d, w, confidence, resamples, seed)
    rng = random.Random(seed)
    means: list[float] = []
    if len(set(w)) == 1:
        draws = rng.choices(d, k=n * resamples)
        means = [sum(draws[b * n : (b + 1) * n]) / n for b in range(resamples)]
    else:
        idx = rng.choices(range(n), k=n * resamples)
        wd = [wi * di for wi, di in zip(w, d, strict=True)]
        for b in range(resamples):
            chunk = idx[b * n : (b + 1) * n]
            tw = sum(map(w.__getitem__, chunk))
            means.append(sum(map(wd.__getitem__, chunk)) / tw if tw > 0 else 0.0)
    alpha = 1.0 - confidence
    lo = numbers.percentile(means, alpha / 2.0)
    hi = numbers.percentile(means, 1.0 - alpha / 2.0)
    assert lo is not None and hi is not None
    return lo, hi


#: from this many workloads on the bootstrap draws its resamples with polars (100,000 workloads
#: x 2,000 resamples are 200 million draws: minutes in Python, seconds column-wise)
BOOTSTRAP_COLUMNAR_WORKLOADS = 5000
#: the most draws one bootstrap makes (workloads x resamples); past it, fewer resamples (never
#: fewer than BOOTSTRAP_MIN_RESAMPLES). With that many workloads the percentile interval of the
#: mean is the t-interval's, which it is widened to anyway.
BOOTSTRAP_MAX_DRAWS = 20_000_000
BOOTSTRAP_MIN_RESAMPLES = 200


def bootstrap_resamples(n: int, resamples: int) -> int:
    """How many resamples a bootstrap over ``n`` workloads draws (the method line says it)."""
    if n * resamples <= BOOTSTRAP_MAX_DRAWS:
        return resamples
    return max(min(resamples, BOOTSTRAP_MIN_RESAMPLES), BOOTSTRAP_MAX_DRAWS // n)


def _bootstrap_columnar(
    d: Sequence[float], w: Sequence[float], confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """:func:`_bootstrap` for many workloads: the same percentile interval of the weighted mean,
    its resamples drawn by polars (seeded, so the interval is the same on every run), a few at a
    time so memory stays bounded."""
    import polars as pl

    n = len(d)
    frame = pl.DataFrame(
        {"wd": [wi * di for wi, di in zip(w, d, strict=True)], "w": list(w)},
        schema={"wd": pl.Float64, "w": pl.Float64},
    )
    per_chunk = max(1, 2_000_000 // n)
    means: list[float] = []
    done = 0
    while done < resamples:
        k = min(per_chunk, resamples - done)
        drawn = frame.sample(n=n * k, with_replacement=True, seed=seed + done).with_columns(
            (pl.int_range(pl.len()) // n).alias("b")
        )
        sums = drawn.group_by("b").agg(pl.col("wd").sum(), pl.col("w").sum()).sort("b")
        for wd_sum, w_sum in zip(sums["wd"].to_list(), sums["w"].to_list(), strict=True):
            means.append(wd_sum / w_sum if w_sum > 0 else 0.0)
        done += k
    alpha = 1.0 - confidence
    lo = numbers.percentile(means, alpha / 2.0)
    hi = numbers.percentile(means, 1.0 - alpha / 2.0)
    assert lo is not None and hi is not None
    return lo, hi


def _z_interval(
    pairs: Sequence[WorkloadPair], sigma: float, confidence: float, source: str
) -> Interval:
    total = sum(p.weight for p in pairs)
    mean = sum(p.weight * p.log_ratio for p in pairs) / total
    se = math.sqrt(sum(p.weight**2 * sigma**2 / max(p.pairs, 1) for p in pairs)) / total
    q = _NORMAL.inv_cdf(0.5 + confidence / 2.0)
    return Interval(mean - q * se, mean + q * se, f"z, A/A-calibrated noise {source}", None)


def interval_for(
    pairs: Sequence[WorkloadPair],
    confidence: float,
    aa_noise: PairNoise | None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    scope: str = "full",
) -> Interval | None:
    """The interval for log G (see the module docstring for which one)."""
    pairs = [p for p in pairs if p.weight > 0]
    n = len(pairs)
    if n == 0:
        return None
    z = (
        _z_interval(pairs, aa_noise.sigma, confidence, _pct(aa_noise.sigma))
        if aa_noise is not None
        else None
    )
    if z is not None and (scope == "full" or n < T_MIN_WORKLOADS):
        return z
    if n < T_MIN_WORKLOADS:
        return None
    d = [p.log_ratio for p in pairs]
    w = [p.weight for p in pairs]
    across = _t_interval(d, w, confidence)
    if n >= BOOTSTRAP_MIN_WORKLOADS:
        resamples = bootstrap_resamples(n, resamples)
        lo, hi = _bootstrap(d, w, confidence, resamples, seed)
        across = Interval(
            min(lo, across.log_low),
            max(hi, across.log_high),
            f"bootstrap over {n} workloads, {resamples} resamples, seed {seed}, widened to the t-interval",
            across.df,
        )
    if z is not None:
        return Interval(
            min(z.log_low, across.log_low),
            max(z.log_high, across.log_high),
            f"the wider of ({across.method}) and ({z.method})",
            across.df,
        )
    return across
