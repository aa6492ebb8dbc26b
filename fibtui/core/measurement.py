"""What one timing of one (workload, solution) measured, in one shape for every result type.

:class:`Measurement` is the base of fibtui's result types: a row of any result file
(:class:`fibtui.core.results.ResultRow`), a job of a run (:class:`fibtui.core.runs.JobResult`), a
line of a traces file (:class:`fibtui.core.dataset.Trace`) and a row of the Runs pane. Its fields
are keyword-only, so each type keeps its own required fields first; the JSON a type writes keeps
its own key order (:func:`ordered_json`), so no file changes shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

#: timing kinds (a latency's ``timing.kind``, a run's ``timing_kind``): fibtui's own GPU timing,
#: the wall time of Triton's CPU interpreter, and the official-equivalent latencies (flashinfer-bench
#: main's method, ``--timing official``; the worker writes them, fibtui.worker.official_timing)
CUPTI = "cupti"
CPU_INTERPRETER = "cpu-interpreter"
OFFICIAL_KIND = "official-equivalent"


@dataclass(kw_only=True)
class Measurement:
    latency_ms: float | None = None
    reference_latency_ms: float | None = None
    speedup: float | None = None  # reference latency / latency
    #: how far the outputs were from the reference's (NaN or infinite for a wrong output)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    #: the first line of what went wrong (a failed build, a crash, a wrong output), or None
    error: str | None = None

    def measured(self) -> dict[str, Any]:
        """The measurement's fields alone, as keywords for another result type."""
        return {name: getattr(self, name) for name in MEASUREMENT_FIELDS}

    def take_measurement(self, other: Measurement) -> None:
        """Copy another result's measurement into this one."""
        for name in MEASUREMENT_FIELDS:
            setattr(self, name, getattr(other, name))


MEASUREMENT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Measurement))


def ordered_json(obj: Any, order: tuple[str, ...]) -> dict[str, Any]:
    """``asdict(obj)`` with its keys in ``order`` (every field, each once): the key order of a
    file written before the measurement fields moved into :class:`Measurement`."""
    out = asdict(obj)
    if sorted(out) != sorted(order):
        raise ValueError(f"{type(obj).__name__}: JSON order {order} does not name its fields")
    return {key: out[key] for key in order}


class Timed(Protocol):
    """One timed job as the statistics (:mod:`fibtui.core.stats`) read it: a row of a result file
    (:class:`fibtui.core.results.ResultRow`) or a job of a run (:class:`fibtui.core.runs.JobResult`),
    typed. A raw dict (a journal line, a worker's result) becomes one of them where it is read."""

    @property
    def uuid(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def solution(self) -> str | None: ...
    @property
    def role(self) -> str | None: ...
    @property
    def repeat(self) -> int | None: ...
    @property
    def axes(self) -> Mapping[str, int]: ...
    @property
    def latency_ms(self) -> float | None: ...
    @property
    def reference_latency_ms(self) -> float | None: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def error(self) -> str | None: ...
    #: how the latency was measured (a run's job: ``timing.kind``, ``timing.environment``...);
    #: empty for a result file's row (its file says how it was timed)
    @property
    def timing(self) -> Mapping[str, Any]: ...
    #: the job's block medians (for the block noise), None when it has none
    @property
    def block_medians_ms(self) -> list[float] | None: ...
