"""Test rows as the typed records the statistics take: a dict with ``timing`` (a run's job, a
journal line) becomes a :class:`~fibtui.core.runs.JobResult`, any other a
:class:`~fibtui.core.results.ResultRow` (a result file's row)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fibtui.core.measurement import Timed
from fibtui.core.results import ResultRow
from fibtui.core.runs import JobResult


def typed_row(obj: Mapping[str, Any] | Timed) -> Timed:
    if not isinstance(obj, Mapping):
        return obj  # typed already
    if "timing" in obj:
        return JobResult.from_json({"solution": "", "role": "", "axes": {}, "repeat": 0, **obj})
    return ResultRow.of(obj)


def typed(rows: Iterable[Mapping[str, Any] | Timed]) -> list[Any]:
    return [typed_row(r) for r in rows]
