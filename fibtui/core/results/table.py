"""The normalized run table every result format is read into: :class:`ResultRow` per (workload,
solution), :class:`RunTable` per file, :func:`summarize` (counts over every row, latency statistics
over PASSED rows only) and :func:`table_to_json` (what ``fibtui results show --json`` prints)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fibtui.core import numbers
from fibtui.core.measurement import MEASUREMENT_FIELDS, Measurement, ordered_json
from fibtui.core.status import INFRA_STATUSES, PASSED

AxesLookup = Callable[[str, str], dict[str, int] | None]


@dataclass
class ResultRow(Measurement):
    definition: str
    solution: str | None
    uuid: str
    axes: dict[str, int]
    status: str
    source: str = ""
    role: str | None = None  # baseline | candidate (fibtui's paired runs)
    repeat: int | None = None
    #: fibtui runs: the job's block medians (timing.block_medians_ms), for the block noise estimate
    block_medians_ms: list[float] | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def timing(self) -> Mapping[str, Any]:
        """How the latency was measured, per row: a result file's row says nothing of it (the
        file's ``meta`` does); a run's job (:class:`fibtui.core.runs.JobResult`) does."""
        return _NO_TIMING

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ResultRow:
        """A row from a plain mapping of its fields (``definition``, ``solution``, ``role`` and
        ``repeat`` may be absent): the edge where a dict becomes the typed record."""
        known = {name: obj[name] for name in cls.__dataclass_fields__ if name in obj}
        known.setdefault("definition", "")
        known.setdefault("solution", None)
        known["axes"] = dict(known.get("axes") or {})
        return cls(**known)

    def to_json(self) -> dict[str, Any]:
        return ordered_json(self, ROW_JSON_ORDER)


_NO_TIMING: Mapping[str, Any] = MappingProxyType({})

#: the keys of ``fibtui results show --json``'s rows, in their order
ROW_JSON_ORDER = (
    *("definition", "solution", "uuid", "axes", "status"),
    *MEASUREMENT_FIELDS,
    *("source", "role", "repeat", "block_medians_ms"),
)


@dataclass
class RunTable:
    definition: str | None
    source_format: str
    path: Path
    rows: list[ResultRow] = field(default_factory=list)
    #: What the file itself states (its own summary numbers), shown beside ours, never trusted.
    stated: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Non-row content (hand summaries' runs, direct timings' sizes...).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def solutions(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.rows:
            seen.setdefault(r.solution or "", None)
        return [s for s in seen]

    def for_solution(self, name: str | None) -> list[ResultRow]:
        if name is None:
            return list(self.rows)
        return [r for r in self.rows if r.solution == name]


def summarize(rows: list[ResultRow]) -> dict[str, Any]:
    """Counts over every row; latency statistics over PASSED rows only."""
    passed = [r for r in rows if r.passed]
    lat = [r.latency_ms for r in passed if r.latency_ms is not None]
    ref = [r.reference_latency_ms for r in passed if r.reference_latency_ms is not None]
    spd = [r.speedup for r in passed if r.speedup is not None]
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[r.status] = by_status.get(r.status, 0) + 1
    infra = sum(n for s, n in by_status.items() if s in INFRA_STATUSES)
    return {
        "total": len(rows),
        "passed": len(passed),
        "failed": len(rows) - len(passed),
        "infra_failed": infra,
        "by_status": by_status,
        "complete": bool(rows) and len(passed) == len(rows),
        "with_latency": len(lat),
        "mean_latency_ms": numbers.mean(lat),
        "median_latency_ms": numbers.median(lat),
        "p95_latency_ms": numbers.p95(lat),
        "min_latency_ms": min(lat) if lat else None,
        "max_latency_ms": max(lat) if lat else None,
        "mean_reference_latency_ms": numbers.mean(ref),
        "mean_speedup": numbers.mean(spd),
    }


def _finite(value: Any) -> float | None:
    """A number a file states about itself, as a float; None when it is not a finite number (a
    summary's NaN or 400-digit figure is left aside, never compared)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def note_stated_differences(table: RunTable, decimals: dict[str, int] | None = None) -> None:
    """Say when the file's own summary disagrees with ours (e.g. another p95 definition).

    ``decimals``: how many decimals the file printed per key; ours is rounded alike first, so a
    rounded console figure is not reported as a disagreement."""
    decimals = decimals or {}
    ours = summarize(table.rows)
    pairs = [
        ("avg_latency_ms", "mean_latency_ms"),
        ("p95_latency_ms", "p95_latency_ms"),
        ("median_latency_ms", "median_latency_ms"),
    ]
    for stated_key, our_key in pairs:
        s = _finite(table.stated.get(stated_key))
        o = ours.get(our_key)
        if s is not None and o is not None and stated_key in decimals:
            o_cmp = round(o, min(decimals[stated_key], 300))
        else:
            o_cmp = o
        if s is not None and o is not None and abs(s - o_cmp) > 1e-9 * max(1e-6, abs(o)):
            rel = (s - o) / o if o else 0.0
            table.notes.append(
                f"file states {stated_key} = {s:.6g} ms; fibtui computes {o:.6g} ms ({rel:+.2%})"
                + (
                    " — fibtui's p95 is linear interpolation between closest ranks"
                    if "p95" in stated_key
                    else ""
                )
            )
    for key in ("total_workloads", "passed_workloads"):
        s = table.stated.get(key)
        o = ours["total"] if key == "total_workloads" else ours["passed"]
        if isinstance(s, int) and not isinstance(s, bool) and s != o and s.bit_length() <= 64:
            table.notes.append(f"file states {key} = {s}; the file's rows give {o}")


def table_to_json(table: RunTable, solution: str | None = None) -> dict[str, Any]:
    rows = table.for_solution(solution)
    out: dict[str, Any] = {
        "definition": table.definition,
        "source_format": table.source_format,
        "path": str(table.path),
        "solution": solution,
        "solutions": table.solutions if table.rows else [],
        "rows": [
            {
                k: v
                for k, v in r.to_json().items()
                if k
                in (
                    "uuid",
                    "solution",
                    "status",
                    "latency_ms",
                    "reference_latency_ms",
                    "speedup",
                    "axes",
                    "max_abs_error",
                    "max_rel_error",
                    "error",
                    "definition",
                    "role",
                    "repeat",
                )
            }
            for r in rows
        ],
        "summary": summarize(rows),
        "p95_definition": "linear interpolation between closest ranks",
        "stated_summary": table.stated,
        "meta": table.meta,
        "notes": table.notes,
    }
    if len(table.solutions) > 1 and solution is None:
        out["per_solution"] = {s: summarize(table.for_solution(s)) for s in table.solutions}
    for key in ("runs", "sizes", "tables"):
        if key in table.extra:
            out[key] = table.extra[key]
    return out
