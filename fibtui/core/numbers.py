"""The one definition of each summary number, used everywhere in fibtui.

p95 (and every percentile) is **linear interpolation between closest ranks**: sort the n values,
take the rank r = p * (n - 1) (0-based) and interpolate between the values at floor(r) and
ceil(r). It is numpy's default ("linear") and a spreadsheet's PERCENTILE.INC. The hand
workflow's scripts computed p95 three different ways; fibtui shows its own and, when a file states
one, the file's own value beside it, labelled as such.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Iterable[float], p: float) -> float | None:
    """Linear interpolation between closest ranks; ``p`` in [0, 1]. None for no values."""
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        return None
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"percentile p must be within [0, 1], got {p}")
    rank = p * (len(data) - 1)
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return data[lo]
    return data[lo] + (data[hi] - data[lo]) * (rank - lo)


def p95(values: Iterable[float]) -> float | None:
    return percentile(values, 0.95)


def median(values: Iterable[float]) -> float | None:
    return percentile(values, 0.5)


def mean(values: Iterable[float]) -> float | None:
    data = [v for v in values if v is not None and not math.isnan(v)]
    return sum(data) / len(data) if data else None


def geomean(values: Sequence[float]) -> float | None:
    data = [v for v in values if v is not None and v > 0]
    if not data:
        return None
    return math.exp(sum(math.log(v) for v in data) / len(data))


def stdev(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1); None below two values."""
    data = [v for v in values if v is not None and not math.isnan(v)]
    if len(data) < 2:
        return None
    m = sum(data) / len(data)
    return math.sqrt(sum((v - m) ** 2 for v in data) / (len(data) - 1))


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``count(1, "run")`` is "1 run", ``count(3, "run")`` "3 runs", ``count(2, "summary", "summaries")``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
