"""``fibtui-run``: fibtui's own run record (``optimize_ops/runs/<run_id>/run.json``). Every job is
checked as fibtui writes it (a latency that is not a finite, positive, normal number, a PASSED job
without one, a job listed twice are refused), so a record edited by hand never becomes a statistic.
The run journal (:mod:`fibtui.core.results.fibtui_journal`) is read into the same record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core.dataset import MAX_AXIS, _Ctx, _kind, _shown, read_json_file
from fibtui.core.errors import InputError
from fibtui.core.results.base import ResultFormat
from fibtui.core.results.fields import status_of
from fibtui.core.results.table import ResultRow, RunTable
from fibtui.core.status import PASSED

RECORD_FORMAT = "fibtui-run"

_RECORD_TEXT_FIELDS = ("run_id", "backend", "timing_kind", "started", "finished", "l2_policy")


def _from_fibtui_run(path: Path, data: dict[str, Any]) -> RunTable:
    ctx = _Ctx(path)
    definition = data.get("definition")
    if definition is not None and not isinstance(definition, str):
        raise ctx.fail("definition", f"expected a string, got {_kind(definition)}")
    for field in _RECORD_TEXT_FIELDS:
        if data.get(field) is not None and not isinstance(data[field], str):
            raise ctx.fail(field, f"expected a string, got {_kind(data[field])}")
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
        status = status_of(ctx, job, f"{where}.status")
        uuid = job.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            raise ctx.fail(
                f"{where}.uuid",
                "required field is missing"
                if uuid is None
                else f"expected a non-empty string, got {_kind(uuid) if uuid != '' else 'an empty string'}",
            )
        axes = ctx.obj(job.get("axes") or {}, f"{where}.axes")
        for name, value in axes.items():
            if isinstance(value, bool) or not isinstance(value, int):
                raise ctx.fail(f"{where}.axes.{name}", f"expected an integer, got {_kind(value)}")
            if not 0 <= value <= MAX_AXIS:
                raise ctx.fail(
                    f"{where}.axes.{name}",
                    f"expected an axis value within 0 .. 2**63 - 1, got {_shown(value)}",
                )
        for field in ("solution", "role", "error"):
            if job.get(field) is not None and not isinstance(job[field], str):
                raise ctx.fail(f"{where}.{field}", f"expected a string, got {_kind(job[field])}")
        repeat = job.get("repeat")
        if repeat is not None and (isinstance(repeat, bool) or not isinstance(repeat, int)):
            raise ctx.fail(f"{where}.repeat", f"expected an integer, got {_kind(repeat)}")
        key = (uuid, job.get("solution"), job.get("role"), repeat)
        if key in seen:
            raise ctx.fail(
                f"{where}.uuid",
                f"a second result for workload {uuid}, solution {job.get('solution')!r}, "
                f"role {job.get('role')!r}, repeat {repeat} (first at jobs[{seen[key]}])",
            )
        seen[key] = i
        latency = ctx.positive(job, "latency_ms", where + ".")
        if status == PASSED and latency is None:
            raise ctx.fail(f"{where}.latency_ms", "a PASSED result must carry a latency")
        rows.append(
            ResultRow(
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
                block_medians_ms=_blocks(job.get("timing")),
            )
        )
    table = RunTable(definition, "fibtui-run", path, rows)
    for field in (*_RECORD_TEXT_FIELDS, "environment"):
        if field in data:
            table.meta[field] = data[field]
    return table


def _blocks(timing: Any) -> list[float] | None:
    """A job's block medians when they are a list of finite positive numbers (else None: they only
    feed a noise estimate, and a record without them is still a record)."""
    import math

    blocks = timing.get("block_medians_ms") if isinstance(timing, dict) else None
    if not isinstance(blocks, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
        for x in blocks
    ):
        return None
    return [float(x) for x in blocks]


def read_run_record(path: str | Path, record: dict[str, Any]) -> RunTable:
    """The table of a run record already in memory (one built from a journal, say); ``path`` is
    where it is said to come from."""
    return _from_fibtui_run(Path(path), record)


def check_run_record(path: str | Path, record: dict[str, Any]) -> None:
    """Refuse a run record (``run.json``) that fibtui could not have written: a job whose latency is
    not a finite, positive, normal number, a PASSED job without one, a job listed twice... One
    InputError naming the file and the field, as ``fibtui results show`` gives."""
    _from_fibtui_run(Path(path), record)


def load_run_record(path: str | Path) -> RunTable:
    """A ``run.json`` file as a table; anything but a fibtui run record is refused."""
    path = Path(path)
    data = read_json_file(path, unique_keys=True)
    if not sniff_record(data):
        raise InputError(path, "not a fibtui run record")
    return _from_fibtui_run(path, data)


def sniff_record(data: Any) -> bool:
    return isinstance(data, dict) and data.get("format") == RECORD_FORMAT


FORMAT = ResultFormat(
    RECORD_FORMAT,
    lambda probe: sniff_record(probe.data),
    lambda probe: _from_fibtui_run(probe.path, probe.data),
)
