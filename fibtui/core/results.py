"""Result importers: one normalized run table from every result format users have.

Formats (``source_format``):

- ``fib-traces``: flashinfer-bench trace JSONL (several solutions per file).
- ``retained-run``: the hand workflow's ``retained_run.json`` and the fan-out runner's
  ``benchmark_detailed_results.json`` (``results: {def: {uuid: {...}}}`` with ``meta``).
- ``single-container`` / ``single-container-single``: the single-container runner's
  ``benchmark_detailed_results.json`` (``solution: {...}``, ``results``, optional
  ``torch_profile`` / ``ncu_profile``) and its ``_single`` variant without a summary.
- ``retained-run-log``: the console table of ``retained_run.log``; after a retry section the later
  result for a workload wins.
- ``fib-console-log``: flashinfer-bench's own console log (status and speedup, no latency).
- ``hand-summary``: a hand-written ``summary.json`` (keys differ per kernel; nothing required).
- ``direct-timing``: per-size direct timings (``{size: [{metric_ms: value}]}``).
- ``fibtui-run``: fibtui's own run record (``optimize_ops/runs/<run_id>/run.json``), or its run
  journal (``journal.jsonl``), read through :func:`fibtui.core.runs.read_journal` and turned into the
  same record.

Latency statistics count PASSED rows only; pass counts are always reported. Every latency,
reference latency and speedup a file states must be a finite, positive, normal number (NaN,
infinities, ``1e400``, zero, negatives and subnormals are refused with the file, line and field),
and a file that holds two results for one (workload, solution) is refused at the second: nothing
is averaged or dropped silently. A UTF-8 byte-order mark at the start of a file is accepted; a
path that is not a regular file (a FIFO, a socket, a device) is refused before it is read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import numbers
from fibtui.core.dataset import (
    MAX_AXIS,
    _Ctx,
    _kind,
    _shown,
    load_traces,
    positive_number_problem,
    read_json_file,
)
from fibtui.core.errors import InputError
from fibtui.core.fsio import read_input, read_input_text
from fibtui.core.status import ALL_STATUSES, INFRA_STATUSES, PASSED

AxesLookup = Callable[[str, str], dict[str, int] | None]


@dataclass
class ResultRow:
    definition: str
    solution: str | None
    uuid: str
    axes: dict[str, int]
    status: str
    latency_ms: float | None = None
    reference_latency_ms: float | None = None
    speedup: float | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    error: str | None = None
    source: str = ""
    role: str | None = None  # baseline | candidate (fibtui's paired runs)
    repeat: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


# --------------------------------------------------------------------------------------------
# Format detection
# --------------------------------------------------------------------------------------------

_LOG_HEADER = re.compile(r"^\s*#\s+UUID\s+(?P<axes>.*?)\s*Status\s+Latency")
_FIB_CONSOLE = re.compile(r"^Solution '(?P<sol>.+)' for workload (?P<uuid>\S+): (?P<status>[A-Z_]+)(?: with (?P<speedup>[-\w.+]+?)x speedup)?")
_NCU_DETAILS_HEADER = '"ID","Process ID","Process Name"'


_FOLDER = "is a folder; give a result file"


def _is_journal_header(first_line: str) -> bool:
    """fibtui's run journal starts with its header line: ``{"kind": "header", "format": "fibtui-run"...}``."""
    if '"header"' not in first_line or '"fibtui-run"' not in first_line:
        return False
    try:
        obj = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("kind") == "header" and obj.get("format") == "fibtui-run"


def detect_format(path: Path) -> str:
    """Guess the source format from the file's content (never from the name alone)."""
    head = read_input(path, folder_message=_FOLDER, limit=1 << 20)  # a FIFO or a device is refused here
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(path, "file is empty")
    if path.suffix == ".ncu-rep" or stripped.startswith(_NCU_DETAILS_HEADER):
        return "ncu"
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        first_line = stripped.split("\n", 1)[0].strip()
        if first_line.startswith("{") and first_line.endswith("}") and '"workload"' in first_line:
            return "fib-traces"
        if first_line.startswith("{") and first_line.endswith("}") and _is_journal_header(first_line):
            return "fibtui-journal"
        return "json"
    lines = text.splitlines()
    if path.suffix != ".md" and any(_LOG_HEADER.match(line) for line in lines):
        return "retained-run-log"  # a log whose table header is its first line is not Markdown
    if stripped.startswith("#") or path.suffix == ".md":
        return "markdown-summary"
    for line in lines:
        if _FIB_CONSOLE.match(line):
            return "fib-console-log"
    if path.suffix == ".log":
        raise InputError(path, "no result table found (expected a retained_run.log table or flashinfer-bench console lines)")
    raise InputError(path, "unrecognized result format (expected traces JSONL, a result JSON, a retained_run.log or a summary)")


def load_results(path: str | Path, axes_lookup: AxesLookup | None = None) -> RunTable:
    """Read any supported result file into one normalized :class:`RunTable`."""
    path = Path(path)
    kind = detect_format(path)
    if kind == "ncu":
        raise InputError(path, "this is an Nsight Compute report; read it with: fibtui ncu import FILE")
    if kind == "fib-traces":
        table = _from_traces(path)
    elif kind == "fibtui-journal":
        table = _from_journal(path)
    elif kind == "retained-run-log":
        table = _from_retained_log(path)
    elif kind == "fib-console-log":
        table = _from_fib_console(path)
    elif kind == "markdown-summary":
        table = _from_markdown(path)
    else:
        table = _from_json(path, read_json_file(path, unique_keys=True))
    if axes_lookup is not None:
        for r in table.rows:
            if not r.axes:
                found = axes_lookup(r.definition, r.uuid)
                if found:
                    r.axes = dict(found)
    return table


# --------------------------------------------------------------------------------------------
# flashinfer-bench traces
# --------------------------------------------------------------------------------------------


def _from_traces(path: Path) -> RunTable:
    traces = load_traces(path)
    rows = []
    for t in traces:
        if t.status is None:
            continue  # a workload-only line, no evaluation
        rows.append(ResultRow(
            definition=t.definition,
            solution=t.solution,
            uuid=t.workload.uuid,
            axes=dict(t.workload.axes),
            status=t.status,
            latency_ms=t.latency_ms,
            reference_latency_ms=t.reference_latency_ms,
            speedup=t.speedup,
            max_abs_error=t.max_abs_error,
            max_rel_error=t.max_rel_error,
            error=(t.log.strip().splitlines()[-1][:300] if t.status != PASSED and t.log.strip() else None),
            source=f"{path}:{t.line}",
        ))
    definitions = sorted({t.definition for t in traces})
    table = RunTable(definitions[0] if len(definitions) == 1 else None, "fib-traces", path, rows)
    env = {(t.hardware, tuple(sorted(t.libs.items()))) for t in traces if t.hardware}
    if env:
        hw, libs = sorted(env, key=str)[0]
        table.meta["environment"] = {"hardware": hw, "libs": dict(libs)}
    if len(definitions) > 1:
        table.notes.append(f"file holds {len(definitions)} definitions: {', '.join(definitions)}")
    return table


# --------------------------------------------------------------------------------------------
# JSON result files of the hand workflow
# --------------------------------------------------------------------------------------------


def _status(ctx: _Ctx, entry: dict[str, Any], field_name: str) -> str:
    status = entry.get("status")
    if not isinstance(status, str) or not status:
        raise ctx.fail(field_name, "required field is missing" if status is None else f"expected a string, got {_kind(status)}")
    if status not in ALL_STATUSES:
        raise ctx.fail(field_name, f"unknown status {status!r}")
    return status


def _num(ctx: _Ctx, entry: dict[str, Any], keys: tuple[str, ...], prefix: str) -> float | None:
    for key in keys:
        if key in entry and entry[key] is not None:
            return ctx.number(entry, key, prefix)
    return None


def _pos(ctx: _Ctx, entry: dict[str, Any], keys: tuple[str, ...], prefix: str) -> float | None:
    """A latency or speedup under one of ``keys``: a finite, positive, normal number, or absent."""
    for key in keys:
        if key in entry and entry[key] is not None:
            return ctx.positive(entry, key, prefix)
    return None


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _row_from_entry(ctx: _Ctx, definition: str, uuid: str, entry: Any, solution: str | None, path: Path) -> ResultRow:
    prefix = f"results.{definition}.{uuid}"
    entry = ctx.obj(entry, prefix)
    status = _status(ctx, entry, f"{prefix}.status")
    perf = entry.get("performance") if isinstance(entry.get("performance"), dict) else {}
    corr = entry.get("correctness") if isinstance(entry.get("correctness"), dict) else {}
    evaluation = entry.get("evaluation") if isinstance(entry.get("evaluation"), dict) else None
    if evaluation is not None:
        perf = evaluation.get("performance") if isinstance(evaluation.get("performance"), dict) else perf
        corr = evaluation.get("correctness") if isinstance(evaluation.get("correctness"), dict) else corr
    latency = _first(_pos(ctx, entry, ("latency_ms",), prefix + "."), _pos(ctx, perf or {}, ("latency_ms",), prefix + ".performance."))
    reference = _first(_pos(ctx, entry, ("reference_latency_ms",), prefix + "."), _pos(ctx, perf or {}, ("reference_latency_ms",), prefix + ".performance."))
    speedup = _first(_pos(ctx, entry, ("speedup_factor", "speedup"), prefix + "."), _pos(ctx, perf or {}, ("speedup_factor",), prefix + ".performance."))
    max_abs = _first(_num(ctx, entry, ("max_abs_error", "max_absolute_error"), prefix + "."), _num(ctx, corr or {}, ("max_absolute_error",), prefix + ".correctness."))
    max_rel = _first(_num(ctx, entry, ("max_rel_error", "max_relative_error"), prefix + "."), _num(ctx, corr or {}, ("max_relative_error",), prefix + ".correctness."))
    if status == PASSED and latency is None:
        raise ctx.fail(f"{prefix}.latency_ms", "a PASSED result must carry a latency")
    error = entry.get("error")
    if error is None and status != PASSED and isinstance(entry.get("log"), str):
        lines = entry["log"].strip().splitlines()
        error = lines[-1][:300] if lines else None
    sol = entry.get("solution") if isinstance(entry.get("solution"), str) else solution
    return ResultRow(
        definition=definition, solution=sol, uuid=uuid, axes={}, status=status,
        latency_ms=latency, reference_latency_ms=reference, speedup=speedup,
        max_abs_error=max_abs, max_rel_error=max_rel,
        error=str(error) if error is not None else None, source=f"{path}:{prefix}",
    )


def _from_json(path: Path, data: Any) -> RunTable:
    ctx = _Ctx(path)
    if isinstance(data, dict) and data.get("format") == "fibtui-run":
        return _from_fibtui_run(path, data)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {_kind(data)}")
    if "results" in data:
        return _from_results_json(ctx, path, data)
    if isinstance(data.get("runs"), list) or "candidate" in data or "mean_across_repeats" in data:
        return _from_hand_summary(path, data)
    if data and all(isinstance(v, list) for v in data.values()) and all(
        isinstance(x, dict) for v in data.values() for x in v
    ):
        return _from_direct_timing(path, data)
    raise InputError(path, "unrecognized JSON result layout (no 'results', 'runs' or per-size timings)")


def _from_results_json(ctx: _Ctx, path: Path, data: dict[str, Any]) -> RunTable:
    results = ctx.obj(data["results"], "results")
    sol_obj = data.get("solution")
    solution_name: str | None = None
    if isinstance(sol_obj, dict):
        fmt = "single-container" if isinstance(data.get("summary"), dict) else "single-container-single"
        solution_name = sol_obj.get("name") if isinstance(sol_obj.get("name"), str) else None
    else:
        fmt = "retained-run"
        if isinstance(sol_obj, str):
            solution_name = sol_obj
    rows: list[ResultRow] = []
    for definition, per_uuid in results.items():
        per_uuid = ctx.obj(per_uuid, f"results.{definition}")
        for uuid, entry in per_uuid.items():
            rows.append(_row_from_entry(ctx, definition, uuid, entry, solution_name, path))
    definition = data.get("definition") if isinstance(data.get("definition"), str) else None
    if definition is None and isinstance(sol_obj, dict) and isinstance(sol_obj.get("definition"), str):
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
    _note_stated_differences(table)
    return table


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


def _note_stated_differences(table: RunTable, decimals: dict[str, int] | None = None) -> None:
    """Say when the file's own summary disagrees with ours (e.g. another p95 definition).

    ``decimals``: how many decimals the file printed per key; ours is rounded alike first, so a
    rounded console figure is not reported as a disagreement."""
    decimals = decimals or {}
    ours = summarize(table.rows)
    pairs = [("avg_latency_ms", "mean_latency_ms"), ("p95_latency_ms", "p95_latency_ms"),
             ("median_latency_ms", "median_latency_ms")]
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
                + (" — fibtui's p95 is linear interpolation between closest ranks" if "p95" in stated_key else "")
            )
    for key in ("total_workloads", "passed_workloads"):
        s = table.stated.get(key)
        o = ours["total"] if key == "total_workloads" else ours["passed"]
        if isinstance(s, int) and not isinstance(s, bool) and s != o and s.bit_length() <= 64:
            table.notes.append(f"file states {key} = {s}; the file's rows give {o}")


_RECORD_TEXT_FIELDS = ("run_id", "backend", "timing_kind", "started", "finished", "l2_policy")


def _from_fibtui_run(path: Path, data: dict[str, Any]) -> RunTable:
    ctx = _Ctx(path)
    definition = data.get("definition")
    if definition is not None and not isinstance(definition, str):
        raise ctx.fail("definition", f"expected a string, got {_kind(definition)}")
    for key in _RECORD_TEXT_FIELDS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ctx.fail(key, f"expected a string, got {_kind(data[key])}")
    if data.get("environment") is not None and not isinstance(data["environment"], dict):
        raise ctx.fail("environment", f"expected an object, got {_kind(data['environment'])}")
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise ctx.fail("jobs", "expected a list")
    rows = []
    seen: dict[tuple[str, str | None, str | None, int | None], int] = {}
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]"
        job = ctx.obj(job, where)
        status = _status(ctx, job, f"{where}.status")
        uuid = job.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise ctx.fail(f"{where}.uuid", "required field is missing" if uuid is None else
                           f"expected a non-empty string, got {_kind(uuid) if uuid != '' else 'an empty string'}")
        axes = ctx.obj(job.get("axes") or {}, f"{where}.axes")
        for name, value in axes.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ctx.fail(f"{where}.axes.{name}", f"expected an integer, got {_kind(value)}")
            if not 0 <= value <= MAX_AXIS:
                raise ctx.fail(f"{where}.axes.{name}", f"expected an axis value within 0 .. 2**63 - 1, got {_shown(value)}")
        for key in ("solution", "role", "error"):
            if job.get(key) is not None and not isinstance(job[key], str):
                raise ctx.fail(f"{where}.{key}", f"expected a string, got {_kind(job[key])}")
        repeat = job.get("repeat")
        if repeat is not None and (isinstance(repeat, bool) or not isinstance(repeat, int)):
            raise ctx.fail(f"{where}.repeat", f"expected an integer, got {_kind(repeat)}")
        key = (uuid, job.get("solution"), job.get("role"), repeat)
        if key in seen:
            raise ctx.fail(f"{where}.uuid", f"a second result for workload {uuid}, solution {job.get('solution')!r}, "
                                            f"role {job.get('role')!r}, repeat {repeat} (first at jobs[{seen[key]}])")
        seen[key] = i
        latency = ctx.positive(job, "latency_ms", where + ".")
        if status == PASSED and latency is None:
            raise ctx.fail(f"{where}.latency_ms", "a PASSED result must carry a latency")
        rows.append(ResultRow(
            definition=definition or "",
            solution=job.get("solution"),
            uuid=uuid,
            axes=dict(axes),
            status=status,
            latency_ms=latency,
            reference_latency_ms=ctx.positive(job, "reference_latency_ms", where + "."),
            speedup=ctx.positive(job, "speedup", where + "."),
            max_abs_error=ctx.number(job, "max_abs_error", where + "."),
            max_rel_error=ctx.number(job, "max_rel_error", where + "."),
            error=job.get("error"),
            source=f"{path}:{where}",
            role=job.get("role"),
            repeat=repeat,
        ))
    table = RunTable(definition, "fibtui-run", path, rows)
    for key in (*_RECORD_TEXT_FIELDS, "environment"):
        if key in data:
            table.meta[key] = data[key]
    return table


def check_run_record(path: str | Path, record: dict[str, Any]) -> None:
    """Refuse a run record (``run.json``) that fibtui could not have written: a job whose latency is
    not a finite, positive, normal number, a PASSED job without one, a job listed twice... One
    InputError naming the file and the field, as ``fibtui results show`` gives."""
    _from_fibtui_run(Path(path), record)


def _from_journal(path: Path) -> RunTable:
    """fibtui's own run journal, read as the run does (a torn or corrupt line is skipped and
    reported) and turned into the run record it would write."""
    from fibtui.core.runs import build_record, read_journal

    contents = read_journal(path)
    record = build_record(path.parent, contents)
    table = _from_fibtui_run(path, record)
    table.meta["read_from"] = "journal"
    table.meta["state"] = record.get("state")
    if contents.corrupt_lines:
        table.notes.append(f"journal lines left out as corrupt or torn: {', '.join(map(str, contents.corrupt_lines))}")
    if contents.duplicate_lines:
        table.notes.append(f"journal lines left out as repeats of a finished job: {', '.join(map(str, contents.duplicate_lines))}")
    summary = record.get("summary") or {}
    if summary.get("done", 0) < summary.get("total", 0):
        table.notes.append(f"run {record.get('state')}: {summary.get('done')} of {summary.get('total')} jobs finished")
    return table


def _from_hand_summary(path: Path, data: dict[str, Any]) -> RunTable:
    table = RunTable(data.get("definition") if isinstance(data.get("definition"), str) else None, "hand-summary", path)
    runs = []
    for run in data.get("runs", []) if isinstance(data.get("runs"), list) else []:
        if isinstance(run, dict):
            runs.append({k: v for k, v in run.items() if isinstance(v, (str, int, float, bool)) or v is None})
    table.extra["runs"] = runs
    for key in ("candidate", "solution_name", "entry_point", "current_tag", "previous_submission", "reporting_basis"):
        if isinstance(data.get(key), str):
            table.meta[key] = data[key]
    if isinstance(data.get("mean_across_repeats"), dict):
        table.stated = dict(data["mean_across_repeats"])
    return table


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
                    metrics.setdefault(name, []).append(_timing_value(ctx, name, value, f"{key}[{i}].{name}"))
        sizes.append({"key": key, "samples": len(samples), **{f"{m}": numbers.mean(v) for m, v in metrics.items()},
                      **{f"{m}_min": min(v) for m, v in metrics.items()}, **{f"{m}_max": max(v) for m, v in metrics.items()}})
    table = RunTable(None, "direct-timing", path)
    table.extra["sizes"] = sizes
    table.notes.append("direct timings per size: means over the samples of each metric (no per-workload rows)")
    return table


# --------------------------------------------------------------------------------------------
# Console logs
# --------------------------------------------------------------------------------------------


def _float(token: str) -> float | None:
    token = token.strip().rstrip("x")
    try:
        return float(token)
    except ValueError:
        return None


def _read_log(path: Path) -> str:
    """A console log or summary as text (bytes that are not UTF-8 shown as U+FFFD; a leading
    byte-order mark dropped; a FIFO or device refused before reading)."""
    return read_input_text(path, folder_message=_FOLDER, errors="replace")


def _log_number(ctx: _Ctx, token: str, column: str, positive: bool) -> float | None:
    """One number of a console table row: None for a placeholder (``-``, ``n/a``); a latency or
    speedup must be a finite positive number, an error column a finite or non-finite number."""
    value = _float(token)
    if value is None:
        return None
    if positive:
        problem = positive_number_problem(value, column)
        if problem is not None:
            raise ctx.fail(column, problem)
    return value


def _from_retained_log(path: Path) -> RunTable:
    lines = _read_log(path).splitlines()
    axes_names: list[str] | None = None
    definition: str | None = None
    solution: str | None = None
    latest: dict[str, ResultRow] = {}
    order: list[str] = []
    sections = 0
    retries = 0
    stated: dict[str, Any] = {}
    decimals: dict[str, int] = {}
    row_re = re.compile(r"^\s*(\d+)\s+(\S+)\s+(.*)$")
    in_retry = False
    in_table: dict[str, int] = {}  # uuid -> line, in the table being read
    in_runs: dict[str, tuple[int, int]] = {}  # uuid -> (run section, line), outside retry sections
    for number, line in enumerate(lines, start=1):
        if line.startswith("=== Run started"):
            sections += 1
            in_retry = False
        elif line.startswith("=== Retry started"):
            retries += 1
            in_retry = True
        m = re.match(r"^(?:DEFINITION|Definition):\s*(\S+)", line)
        if m:
            definition = m.group(1)
            continue
        m = re.match(r"^\s+Name:\s*(\S+)", line)
        if m and solution is None:
            solution = m.group(1)
            continue
        m = re.match(r"^\s*(Avg|Median|P95|Min|Max) latency:\s*([-\d.eE+]+)\s*ms", line)
        if m:
            key = f"{m.group(1).lower()}_latency_ms"
            value = _float(m.group(2))
            if value is not None and math.isfinite(value):
                stated[key] = value
                decimals[key] = len(m.group(2).partition(".")[2])
            continue
        m = re.match(r"^RESULT:\s*(\d{1,18})/(\d{1,18}) PASSED", line)
        if m:
            stated["passed_workloads"], stated["total_workloads"] = int(m.group(1)), int(m.group(2))
            continue
        h = _LOG_HEADER.match(line)
        if h:
            axes_names = h.group("axes").split()
            in_table = {}
            continue
        if axes_names is None or line.startswith(("-", "=")):
            continue
        m = row_re.match(line)
        if not m:
            continue
        tokens = m.group(3).split()
        n = len(axes_names)
        if len(tokens) < n + 1:
            continue
        uuid = m.group(2)
        ctx = _Ctx(path, number)
        # A table lists a workload once; a log reprints its tables (by latency, then by index) and a
        # retry section reruns some: the later result wins. The same workload twice in one table, or
        # again in a second '=== Run started' section, is two runs in one file.
        if uuid in in_table:
            raise ctx.fail("UUID", f"a second result for workload {uuid} in one table (first on line {in_table[uuid]})")
        in_table[uuid] = number
        if not in_retry:
            seen = in_runs.get(uuid)
            if seen is not None and seen[0] != sections:
                raise ctx.fail("UUID", f"a second result for workload {uuid} (first on line {seen[1]}, in another "
                                       "'=== Run started' section: two runs concatenated?)")
            if seen is None:
                in_runs[uuid] = (sections, number)
        axes: dict[str, int] = {}
        for name, tok in zip(axes_names, tokens[:n], strict=False):
            try:
                axes[name] = int(tok)
            except ValueError:
                raise ctx.fail(name, f"expected an integer axis value, got {tok[:40]!r}") from None
            if not 0 <= axes[name] <= MAX_AXIS:
                raise ctx.fail(name, f"expected an axis value within 0 .. 2**63 - 1, got {tok[:40]}")
        status = tokens[n]
        if status not in ALL_STATUSES:
            raise ctx.fail("Status", f"unknown status {status!r}")
        rest = tokens[n + 1:]
        row = ResultRow(definition=definition or "", solution=solution, uuid=uuid, axes=axes, status=status,
                        source=f"{path}:{number}")
        if status == PASSED:
            columns = (("Latency", True), ("Ref", True), ("Speedup", True), ("abs_err", False), ("rel_err", False))
            vals = [_log_number(ctx, tok, column, positive) for tok, (column, positive) in zip(rest, columns, strict=False)]
            if len(vals) < 1 or vals[0] is None:
                raise ctx.fail("Latency", "a PASSED row must carry a latency")
            row.latency_ms = vals[0]
            row.reference_latency_ms = vals[1] if len(vals) > 1 else None
            row.speedup = vals[2] if len(vals) > 2 else None
            row.max_abs_error = vals[3] if len(vals) > 3 else None
            row.max_rel_error = vals[4] if len(vals) > 4 else None
        else:
            row.error = " ".join(rest) or None
        if uuid not in latest:
            order.append(uuid)
        latest[uuid] = row  # the later result for a workload wins (retry sections come later)
    if not latest:
        raise InputError(path, "no result rows found under a '#  UUID ... Status  Latency' header")
    rows = [latest[u] for u in order]
    for r in rows:
        r.definition = r.definition or definition or ""
    table = RunTable(definition, "retained-run-log", path, rows, stated=stated)
    table.meta.update({"sections": sections, "retries": retries})
    _note_stated_differences(table, decimals)
    if retries:
        table.notes.append(f"{retries} retry section(s): the later result for a workload wins")
    return table


def _from_fib_console(path: Path) -> RunTable:
    """flashinfer-bench's console log. It prints one line per (solution, workload) of a definition:
    a second one is two runs concatenated, refused at the second."""
    rows: dict[tuple[str, str, str], ResultRow] = {}
    first_line: dict[tuple[str, str, str], int] = {}
    definition = None
    for number, line in enumerate(_read_log(path).splitlines(), start=1):
        m = re.match(r"^Processing definition: (\S+)", line)
        if m:
            definition = m.group(1)
        m = _FIB_CONSOLE.match(line)
        if not m:
            continue
        status = m.group("status")
        if status not in ALL_STATUSES:
            raise InputError(path, f"unknown status {status!r}", line=number, field="status")
        ctx = _Ctx(path, number)
        speedup = None
        if m.group("speedup"):
            speedup = _log_number(ctx, m.group("speedup"), "speedup", True)
            if speedup is None:
                raise ctx.fail("speedup", f"expected a number, got {m.group('speedup')[:40]!r}")
        key = (definition or "", m.group("sol"), m.group("uuid"))
        if key in first_line:
            raise ctx.fail("uuid", f"a second result for workload {m.group('uuid')} and solution {m.group('sol')!r} "
                                   f"(first on line {first_line[key]}; two runs concatenated?)")
        first_line[key] = number
        rows[key] = ResultRow(
            definition=definition or "", solution=m.group("sol"), uuid=m.group("uuid"), axes={},
            status=status, speedup=speedup, source=f"{path}:{number}",
        )
    table = RunTable(definition, "fib-console-log", path, list(rows.values()))
    table.notes.append("flashinfer-bench console log: statuses and speedups only (no latency); read the traces JSONL for latencies")
    return table


# --------------------------------------------------------------------------------------------
# Markdown summaries
# --------------------------------------------------------------------------------------------


def _from_markdown(path: Path) -> RunTable:
    text = _read_log(path)
    table = RunTable(None, "markdown-summary", path)
    m = re.search(r"Definition:\s*`?([\w.-]+)`?", text)
    if m:
        table.definition = m.group(1)
    tables: list[dict[str, Any]] = []
    current: list[list[str]] = []
    for line in text.splitlines() + [""]:
        if line.strip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
                continue
            current.append(cells)
        elif current:
            tables.append({"header": current[0], "rows": current[1:]})
            current = []
    table.extra["tables"] = tables
    table.extra["markdown"] = text
    return table


def table_to_json(table: RunTable, solution: str | None = None) -> dict[str, Any]:
    rows = table.for_solution(solution)
    out: dict[str, Any] = {
        "definition": table.definition,
        "source_format": table.source_format,
        "path": str(table.path),
        "solution": solution,
        "solutions": table.solutions if table.rows else [],
        "rows": [
            {k: v for k, v in r.to_json().items() if k in (
                "uuid", "solution", "status", "latency_ms", "reference_latency_ms", "speedup",
                "axes", "max_abs_error", "max_rel_error", "error", "definition", "role", "repeat")}
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
