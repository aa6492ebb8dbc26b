"""``hand-summary``: a hand-written ``summary.json`` (keys differ per kernel; nothing required):
its runs, a few names, and its ``mean_across_repeats`` as the stated summary. No per-workload rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core.results.base import ResultFormat
from fibtui.core.results.table import RunTable


def sniff(data: Any) -> bool:
    return isinstance(data, dict) and (
        isinstance(data.get("runs"), list) or "candidate" in data or "mean_across_repeats" in data
    )


def _from_hand_summary(path: Path, data: dict[str, Any]) -> RunTable:
    table = RunTable(
        data.get("definition") if isinstance(data.get("definition"), str) else None,
        "hand-summary",
        path,
    )
    runs = []
    for run in data.get("runs", []) if isinstance(data.get("runs"), list) else []:
        if isinstance(run, dict):
            runs.append(
                {
                    k: v
                    for k, v in run.items()
                    if isinstance(v, (str, int, float, bool)) or v is None
                }
            )
    table.extra["runs"] = runs
    for key in (
        "candidate",
        "solution_name",
        "entry_point",
        "current_tag",
        "previous_submission",
        "reporting_basis",
    ):
        if isinstance(data.get(key), str):
            table.meta[key] = data[key]
    if isinstance(data.get("mean_across_repeats"), dict):
        table.stated = dict(data["mean_across_repeats"])
    return table


FORMAT = ResultFormat(
    "hand-summary",
    lambda probe: sniff(probe.data),
    lambda probe: _from_hand_summary(probe.path, probe.data),
    per_workload=False,
)
