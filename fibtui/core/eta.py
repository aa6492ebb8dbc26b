"""How long the jobs left of a run will take, from the jobs that finished.

Jobs of one sweep differ in size (a batch-128 workload does far more than a batch-1 one), so an
ETA paced on the average job jumps whenever the sweep moves from small workloads to large ones.
This one weighs each job by a cost fitted on the finished jobs of this session::

    cost(job) = a + b * size(job)      (least squares on the jobs' own wall times, a, b >= 0)

where ``size`` is the product of the workload's axis values (elements of the largest tensors, up
to a constant, for the usual definitions). The fitted costs turn into time with the session's own
pace, which absorbs parallel workers and pairs::

    ETA = elapsed since the first result x cost(jobs left) / cost(jobs finished after the first)

With one distinct size (or no wall times) every job costs the same and this is the plain
average-paced ETA. The first result only starts the clock (worker start-up and first compiles
come before it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def workload_size(axes: Mapping[str, object]) -> float:
    """The product of a workload's positive integer axis values (1 when it has none)."""
    size = 1.0
    for v in axes.values():
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            size *= v
    return size


def fit_cost(samples: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of cost = a + b * size, least squares over (size, wall seconds), both kept >= 0;
    (mean, 0) when the sizes do not vary or the fit would need a negative term."""
    pts = [(s, w) for s, w in samples if math.isfinite(s) and math.isfinite(w) and w >= 0]
    if not pts:
        return 1.0, 0.0
    n = len(pts)
    mean_s = sum(s for s, _ in pts) / n
    mean_w = sum(w for _, w in pts) / n
    var = sum((s - mean_s) ** 2 for s, _ in pts)
    if var <= 0 or mean_w <= 0:
        return max(mean_w, 1e-9), 0.0
    b = sum((s - mean_s) * (w - mean_w) for s, w in pts) / var
    a = mean_w - b * mean_s
    if b <= 0:
        return mean_w, 0.0
    if a < 0:  # through the origin instead
        return 0.0, sum(s * w for s, w in pts) / sum(s * s for s, _ in pts)
    return a, b


class EtaModel:
    """The jobs of one session: add each finished job, ask for the seconds left."""

    def __init__(self) -> None:
        self._samples: list[tuple[float, float]] = []  # (size, wall s) of jobs with a wall time
        self._paced: list[float] = []  # sizes of the jobs finished after the first result

    def add(self, size: float, wall_s: float | None, first: bool) -> None:
        if isinstance(wall_s, (int, float)) and math.isfinite(wall_s) and wall_s >= 0:
            self._samples.append((size, float(wall_s)))
        if not first:
            self._paced.append(size)

    def seconds_left(self, left: Iterable[float], elapsed_s: float) -> float | None:
        """Seconds for the jobs of sizes ``left``; None before any job finished after the first."""
        left = list(left)
        if not left:
            return 0.0
        if not self._paced:
            return None
        a, b = fit_cost(self._samples)
        done = sum(a + b * s for s in self._paced)
        if done <= 0:
            return None
        return elapsed_s * sum(a + b * s for s in left) / done
