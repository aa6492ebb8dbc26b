"""``retained-run``, ``single-container``, ``single-container-single``: the result JSON of the hand
workflow and of the other runners, ``{"results": {definition: {uuid: {...}}}}``.

- ``retained-run``: the hand workflow's ``retained_run.json`` and the fan-out runner's
  ``benchmark_detailed_results.json`` (``solution`` a name, with ``meta``);
- ``single-container``: the single-container runner's ``benchmark_detailed_results.json``
  (``solution: {...}``, ``results``, ``summary``, optional ``torch_profile`` / ``ncu_profile``);
- ``single-container-single``: its ``_single`` variant, without a summary.

The file's own summary is kept as ``stated`` and compared with ours, never trusted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core.dataset import _Ctx
from fibtui.core.results.base import ResultFormat
from fibtui.core.results.fields import first_of, number_at, positive_at, status_of
from fibtui.core.results.table import ResultRow, RunTable, note_stated_differences
from fibtui.core.status import PASSED


def _row_from_entry(
    ctx: _Ctx, definition: str, uuid: str, entry: Any, solution: str | None, path: Path
) -> ResultRow:
    prefix = f"results.{definition}.{uuid}"
    entry = ctx.obj(entry, prefix)
    status = status_of(ctx, entry, f"{prefix}.status")
    perf = entry.get("performance") if isinstance(entry.get("performance"), dict) else {}
    corr = entry.get("correctness") if isinstance(entry.get("correctness"), dict) else {}
    evaluation = entry.get("evaluation") if isinstance(entry.get("evaluation"), dict) else None
    if evaluation is not None:
        perf = (
            evaluation.get("performance")
            if isinstance(evaluation.get("performance"), dict)
            else perf
        )
        corr = (
            evaluation.get("correctness")
            if isinstance(evaluation.get("correctness"), dict)
            else corr
        )
    latency = first_of(
        positive_at(ctx, entry, ("latency_ms",), prefix + "."),
        positive_at(ctx, perf or {}, ("latency_ms",), prefix + ".performance."),
    )
    reference = first_of(
        positive_at(ctx, entry, ("reference_latency_ms",), prefix + "."),
        positive_at(ctx, perf or {}, ("reference_latency_ms",), prefix + ".performance."),
    )
    speedup = first_of(
        positive_at(ctx, entry, ("speedup_factor", "speedup"), prefix + "."),
        positive_at(ctx, perf or {}, ("speedup_factor",), prefix + ".performance."),
    )
    max_abs = first_of(
        number_at(ctx, entry, ("max_abs_error", "max_absolute_error"), prefix + "."),
        number_at(ctx, corr or {}, ("max_absolute_error",), prefix + ".correctness."),
    )
    max_rel = first_of(
        number_at(ctx, entry, ("max_rel_error", "max_relative_error"), prefix + "."),
        number_at(ctx, corr or {}, ("max_relative_error",), prefix + ".correctness."),
    )
    if status == PASSED and latency is None:
        raise ctx.fail(f"{prefix}.latency_ms", "a PASSED result must carry a latency")
    error = entry.get("error")
    if error is None and status != PASSED and isinstance(entry.get("log"), str):
        lines = entry["log"].strip().splitlines()
        error = lines[-1][:300] if lines else None
    sol = entry.get("solution") if isinstance(entry.get("solution"), str) else solution
    return ResultRow(
        definition=definition,
        solution=sol,
        uuid=uuid,
        axes={},
        status=status,
        latency_ms=latency,
        reference_latency_ms=reference,
        speedup=speedup,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        error=str(error) if error is not None else None,
        source=f"{path}:{prefix}",
    )


def _from_results_json(ctx: _Ctx, path: Path, data: dict[str, Any]) -> RunTable:
    results = ctx.obj(data["results"], "results")
    sol_obj = data.get("solution")
    solution_name: str | None = None
    if isinstance(sol_obj, dict):
        fmt = (
            "single-container"
            if isinstance(data.get("summary"), dict)
            else "single-container-single"
        )
        solution_name = sol_obj.get("name") if isinstance(sol_obj.get("name"), str) else None
    else:
        fmt = "retained-run"
        if isinstance(sol_obj, str):
            solution_name = sol_obj
    rows: list[ResultRow] = []
    for name, per_uuid in results.items():
        per_uuid = ctx.obj(per_uuid, f"results.{name}")
        for uuid, entry in per_uuid.items():
            rows.append(_row_from_entry(ctx, name, uuid, entry, solution_name, path))
    definition = data.get("definition") if isinstance(data.get("definition"), str) else None
    if (
        definition is None
        and isinstance(sol_obj, dict)
        and isinstance(sol_obj.get("definition"), str)
    ):
        definition = sol_obj["definition"]
    if definition is None and len(results) == 1:
        definition = next(iter(results))
    table = RunTable(definition, fmt, path, rows)
    summary = data.get("summary")
    if isinstance(summary, dict):
        stated = summary.get(definition) if definition in summary else summary
        if isinstance(stated, dict):
            table.stated = dict(stated)
    if isinstance(data.get("meta"), dict):
        table.meta.update(data["meta"])
    if isinstance(data.get("generated_at_utc"), str):
        table.meta["generated_at_utc"] = data["generated_at_utc"]
    for key in ("torch_profile", "ncu_profile"):
        if isinstance(data.get(key), dict):
            table.extra[key] = data[key]
    note_stated_differences(table)
    return table


FORMAT = ResultFormat(
    "retained-run",
    lambda probe: isinstance(probe.data, dict) and "results" in probe.data,
    lambda probe: _from_results_json(_Ctx(probe.path), probe.path, probe.data),
    tables=("retained-run", "single-container", "single-container-single"),
)
