"""Where a job's host time goes: named phases timed with the host clock, summed per job.

The worker times each job's phases (making inputs, the reference, the correctness calls and their
judging, the timing's set-up, warm-up, launches, reading the profile, the gate's checks...) and
the record keeps them as ``timing.job_phases_ms`` (docs/formats.md), so the cost of the harness
itself is measured on every run, not guessed. Host time only: GPU work that the host does not wait
for is in no phase; the phase that synchronizes pays for it (``launch`` ends with the profile's
synchronization). Standard library only (the worker's rule).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: the phases in the order a job passes through them (``other``: the job's wall time left over)
ORDER = (
    "make",
    "reference",
    "check",
    "judge",
    "setup",
    "warmup",
    "launch",
    "read",
    "checks",
    "official",
    "finish",
)


class Phases:
    """Milliseconds per phase name; ``with phases("make"): ...`` adds the block's host time."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = self._clock()
        try:
            yield
        finally:
            self.add(name, (self._clock() - t0) * 1000.0)

    def add(self, name: str, ms: float) -> None:
        self.ms[name] = self.ms.get(name, 0.0) + ms

    def to_json(self, wall_s: float | None = None) -> dict[str, float]:
        """The phases in :data:`ORDER` (unknown names after), rounded to microseconds, and
        ``other``: what of ``wall_s`` no phase holds."""
        names = [n for n in ORDER if n in self.ms] + sorted(set(self.ms) - set(ORDER))
        out = {n: round(self.ms[n], 3) for n in names}
        if wall_s is not None:
            out["other"] = round(max(0.0, wall_s * 1000.0 - sum(self.ms.values())), 3)
        return out


#: a Phases that keeps nothing (timers called without a job's phases)
class _Nothing(Phases):
    def add(self, name: str, ms: float) -> None:
        return None


NOTHING = _Nothing()
