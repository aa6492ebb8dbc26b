"""How long the jobs left of a run will take, from the jobs that finished.

Jobs of one sweep differ in size (a batch-128 workload does far more than a batch-1 one), so an
ETA paced on the average job jumps whenever the sweep moves from small workloads to large ones.
This one weighs each job by a cost fitted on the finished jobs of this session::

    cost(job) = a + b * x(job)      (least squares on the jobs' own wall times, a, b >= 0)

where ``x`` is one of: nothing (every job costs the same), one axis of the workload, or the
product of all its axes; the one that predicts the finished jobs best (leave-one-out error)
is used, so GDN prefill's cost follows ``total_seq_len`` and not ``num_seqs``. The fitted costs
turn into time with the session's own pace, which absorbs parallel workers and pairs::

    ETA = elapsed since the first result x cost(jobs left) / cost(jobs finished after the first)

With one distinct size (or no wall times) every job costs the same and this is the plain
average-paced ETA. The first result only starts the clock (worker start-up and first compiles
come before it).

Before there are three samples to choose from, or when the samples' sizes do not vary (the two
jobs of a pair measure one workload), the cost follows the ``prior``: on the CPU interpreter
(``prior="size"``) a job's time grows with the elements it touches, so the cost is taken as
proportional to the workload's size (the product of its axes): after a batch-1 pair, a batch-64
job is priced 64 times one of them, not the same. Without a prior (GPU timings, where a job's
time is mostly fixed per-job work), every job costs the same until the samples say otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping


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


def _loo_error(pts: list[tuple[float, float]]) -> float:
    """Leave-one-out squared relative error of the cost line over (x, wall) points."""
    err = 0.0
    for i, (x, w) in enumerate(pts):
        a, b = fit_cost(pts[:i] + pts[i + 1 :])
        err += ((a + b * x - w) / max(w, 1e-9)) ** 2
    return err


def _measures(axes: Mapping[str, object]) -> dict[str, float]:
    """The candidate x of a job: each positive integer axis, and their product."""
    out = {
        name: float(v)
        for name, v in axes.items()
        if isinstance(v, int) and not isinstance(v, bool) and v > 0
    }
    out["*"] = workload_size(axes)
    return out


class EtaModel:
    """The jobs of one session: add each finished job, ask for the seconds left."""

    #: the leave-one-out choice is made over at most this many recent samples (it is quadratic)
    WINDOW = 64
    #: past this many samples the choice is made again only every ``RECHOOSE_EVERY`` new ones: it
    #: runs on the runner's path between two jobs, where 5 ms a job was a tenth of a paired job
    #: on the H200 (optimize_ops/benchmarks/h200_20261202c_profile/)
    SETTLED = 16
    RECHOOSE_EVERY = 8

    def __init__(self, prior: str | None = None) -> None:
        """``prior``: ``"size"`` (cost proportional to the workload's size until the samples can
        fit it: the CPU interpreter) or None (every job the same until then)."""
        if prior not in (None, "size"):
            raise ValueError(f"unknown ETA prior {prior!r}")
        self.prior = prior
        self._samples: list[tuple[dict[str, float], float]] = []  # (measures, wall s)
        self._paced: list[dict[str, float]] = []  # measures of the jobs finished after the first
        self._chosen: tuple[int, str | None] | None = None  # (samples when chosen, the choice)

    def add(self, axes: Mapping[str, object], wall_s: float | None, first: bool) -> None:
        m = _measures(axes)
        if isinstance(wall_s, (int, float)) and math.isfinite(wall_s) and wall_s >= 0:
            self._samples.append((m, float(wall_s)))
        if not first:
            self._paced.append(m)

    def measure(self) -> str | None:
        """The x that predicts the finished jobs best (None: every job costs the same)."""
        recent = self._samples[-self.WINDOW :]
        if len(recent) < 3 or len({m["*"] for m, _ in recent}) < 2:
            return "*" if self.prior == "size" else None
        best, best_err = None, _loo_error([(0.0, w) for _, w in recent])
        common = set.intersection(*(set(m) for m, _ in recent))
        for name in sorted(common - {"*"}) + ["*"]:  # an axis before the product it equals
            err = _loo_error([(m[name], w) for m, w in recent])
            if err < best_err * 0.999:
                best, best_err = name, err
        return best

    def _choice(self) -> str | None:
        """``measure()``, made again while the samples are few and then every few samples."""
        n = len(self._samples)
        if self._chosen is not None:
            at, name = self._chosen
            if n == at or (n > self.SETTLED and n - at < self.RECHOOSE_EVERY):
                return name
        name = self.measure()
        self._chosen = (n, name)
        return name

    def seconds_left(self, left: Iterable[Mapping[str, object]], elapsed_s: float) -> float | None:
        """Seconds for the jobs of axes ``left``; None before any job finished after the first."""
        todo = [_measures(axes) for axes in left]
        if not todo:
            return 0.0
        if not self._paced:
            return None
        name = self._choice()

        def x(m: dict[str, float]) -> float:
            return 0.0 if name is None else m.get(name, 0.0)

        a, b = self._cost(name, x)
        done = sum(a + b * x(m) for m in self._paced)
        if done <= 0:
            return None
        return elapsed_s * sum(a + b * x(m) for m in todo) / done

    def _cost(
        self, name: str | None, x: Callable[[dict[str, float]], float]
    ) -> tuple[float, float]:
        """(a, b) of cost = a + b * x: fitted on the samples; under the size prior, proportional
        to x when the samples cannot give a slope (one size, a single sample, none)."""
        if name is None:
            return 1.0, 0.0
        pts = [(x(m), w) for m, w in self._samples]
        if self.prior == "size" and len({p for p, _ in pts}) < 2:
            return 0.0, 1.0
        a, b = fit_cost(pts)
        if self.prior == "size" and b <= 0 and name == "*" and len(pts) < 3:
            return 0.0, 1.0
        return a, b
