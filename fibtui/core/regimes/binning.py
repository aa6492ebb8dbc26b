"""Binning one axis: distinct values, power-of-two bins, else quantile bins."""

from __future__ import annotations

from collections.abc import Sequence

from fibtui.core.regimes.model import QUANTILE_BINS, FilterValue


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
