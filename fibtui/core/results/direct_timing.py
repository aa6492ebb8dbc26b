"""``direct-timing``: per-size direct timings, ``{size: [{metric_ms: value}, ...]}``: the mean,
min and max of each metric per size. No per-workload rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fibtui.core import numbers
from fibtui.core.dataset import _Ctx, _shown, positive_number_problem
from fibtui.core.results.base import ResultFormat
from fibtui.core.results.table import RunTable


def sniff(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and bool(data)
        and all(isinstance(v, list) for v in data.values())
        and all(isinstance(x, dict) for v in data.values() for x in v)
    )


def _timing_value(ctx: _Ctx, name: str, value: int | float, where: str) -> float:
    """A direct timing's value: finite; a time (``*_ms``, ``*_us``, ``*_s``) also positive."""
    if name.endswith(("_ms", "_us", "_s")):
        problem = positive_number_problem(value, name)
        if problem is not None:
            raise ctx.fail(where, problem)
    try:
        f = float(value)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise ctx.fail(where, f"{name} must be a finite number, got {_shown(value)}")
    return f


def _from_direct_timing(path: Path, data: dict[str, Any]) -> RunTable:
    ctx = _Ctx(path)
    sizes = []
    for key, samples in data.items():
        metrics: dict[str, list[float]] = {}
        for i, sample in enumerate(samples):
            for name, value in sample.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics.setdefault(name, []).append(
                        _timing_value(ctx, name, value, f"{key}[{i}].{name}")
                    )
        sizes.append(
            {
                "key": key,
                "samples": len(samples),
                **{f"{m}": numbers.mean(v) for m, v in metrics.items()},
                **{f"{m}_min": min(v) for m, v in metrics.items()},
                **{f"{m}_max": max(v) for m, v in metrics.items()},
            }
        )
    table = RunTable(None, "direct-timing", path)
    table.extra["sizes"] = sizes
    table.notes.append(
        "direct timings per size: means over the samples of each metric (no per-workload rows)"
    )
    return table


FORMAT = ResultFormat(
    "direct-timing",
    lambda probe: sniff(probe.data),
    lambda probe: _from_direct_timing(probe.path, probe.data),
    per_workload=False,
)
