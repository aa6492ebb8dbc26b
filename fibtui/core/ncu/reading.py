"""Reading a report file in any of its forms (:func:`load_report`): an exported page (details CSV,
raw CSV, details text), the hand workflow's result JSON whose ``ncu_profile.rows[].output`` holds
such a page (each row names ``workload_uuid`` and ``axes``: one band per row), or a binary
``.ncu-rep``, whose pages an exporter injected by the caller produces (fibtui runs ncu for it in
:func:`fibtui.runners.ncu.load_report`; nothing here runs a program)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fibtui.core.errors import InputError
from fibtui.core.fsio import check_input_file, read_input
from fibtui.core.ncu.csv_pages import csv_header, find_csv_header, parse_details_csv, parse_raw_csv
from fibtui.core.ncu.records import NcuReport
from fibtui.core.ncu.text_page import parse_details_text

#: Exports one page of a binary report: ``(report, page, as_csv) -> the page's text``
#: (``ncu --import REPORT [--csv] --page PAGE``).
PageExporter = Callable[[Path, str, bool], str]


def parse_hand_json(data: Any, path: str | Path | None = None) -> NcuReport:
    """The hand workflow's result JSON: ``ncu_profile.rows[]`` with ``workload_uuid``, ``axes`` and
    ``output`` (the details text page, or a details/raw CSV export)."""
    where = None if path is None else str(path)
    if not isinstance(data, dict):
        raise InputError(where, "expected a JSON object with an 'ncu_profile' table")
    prof = data.get("ncu_profile")
    if not isinstance(prof, dict):
        raise InputError(where, "no 'ncu_profile' object in this JSON", field="ncu_profile")
    rows = prof.get("rows")
    if not isinstance(rows, list):
        raise InputError(where, "expected a list", field="ncu_profile.rows")
    report = NcuReport(where, "hand-json")
    for i, row in enumerate(rows):
        fname = f"ncu_profile.rows[{i}]"
        if not isinstance(row, dict):
            raise InputError(where, "expected an object", field=fname)
        uuid = row.get("workload_uuid")
        if uuid is not None and not isinstance(uuid, str):
            raise InputError(where, "expected a string", field=f"{fname}.workload_uuid")
        axes = row.get("axes")
        if axes is not None and not isinstance(axes, dict):
            raise InputError(where, "expected an object", field=f"{fname}.axes")
        output = row.get("output")
        if not isinstance(output, str) or not output.strip():
            reason = row.get("error") or row.get("status") or "no output"
            report.notes.append(
                f"row {i} ({uuid or 'no workload'}): no NCU output ({str(reason)[:200]})"
            )
            continue
        try:
            sub = parse_page(output, where)
        except InputError as exc:
            raise InputError(where, exc.message, field=f"{fname}.output") from None
        for launch in sub.launches:
            launch.workload = uuid
            launch.axes = dict(axes or {})
            report.launches.append(launch)
        report.notes.extend(f"row {i}: {n}" for n in sub.notes)
    if not report.launches:
        raise InputError(where, "no row of ncu_profile holds a kernel", field="ncu_profile.rows")
    return report


def parse_page(text: str, where: str | None) -> NcuReport:
    lines = text.splitlines(keepends=True)
    start = find_csv_header(lines)
    if start is not None:
        header, _ = csv_header(where, lines, start)
        if "Metric Name" in header and "Metric Value" in header:
            return parse_details_csv(text, where)
        if "Kernel Name" in header:
            return parse_raw_csv(text, where)
        raise InputError(
            where,
            "a CSV header without 'Kernel Name': not an Nsight Compute export",
            line=start + 1,
        )
    return parse_details_text(text, where)


def parse_report_text(text: str, path: str | Path | None = None) -> NcuReport:
    """Any supported text: a hand-workflow JSON, a details or raw CSV, or a details text page."""
    where = None if path is None else str(path)
    head = text.lstrip("\ufeff").lstrip()
    if head.startswith("{") or (head.startswith("[") and not re.match(r"\[\d+\]\s", head)):
        try:
            data = json.loads(text.lstrip("\ufeff"))
        except json.JSONDecodeError as exc:
            raise InputError(where, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
        except RecursionError:
            raise InputError(where, "not valid JSON: nested too deeply") from None
        except ValueError:  # json refuses integers of more than 4300 digits
            raise InputError(where, "not valid JSON: a number with more than 4300 digits") from None
        return parse_hand_json(data, where)
    return parse_page(text, where)


def merge_raw(details: NcuReport, raw: NcuReport) -> NcuReport:
    """Add the raw page's metrics to the details launches (matched by ID, else by order), so a
    field the details page lacks (spilling instructions, say) comes from the raw page."""
    by_id = {r.id: r for r in raw.launches if r.id is not None}
    for i, launch in enumerate(details.launches):
        other = by_id.get(launch.id) if launch.id is not None else None
        if other is None and launch.id is None and i < len(raw.launches):
            other = raw.launches[i]
        if other is not None and other.kernel == launch.kernel:
            launch.metrics.extend(other.metrics)
    return details


def load_exported(details_csv: str | Path, raw_csv: str | Path | None = None) -> NcuReport:
    """The pages :func:`fibtui.runners.ncu.profile` exports: the details CSV, plus the raw CSV's
    metrics where the details page lacks them."""
    details = load_report(details_csv)
    if raw_csv is not None and Path(raw_csv).is_file():
        details = merge_raw(details, load_report(raw_csv))
    return details


_FOLDER = "is a folder; give an NCU export file"


def load_report(path: str | Path, *, export: PageExporter | None = None) -> NcuReport:
    """Read any supported NCU file (see the module docstring). A binary ``.ncu-rep`` is read from
    the details and raw pages ``export`` gives (:func:`fibtui.runners.ncu.load_report` passes one
    that runs ncu); without one it is refused with the verb that reads it."""
    p = Path(path)
    if p.suffix == ".ncu-rep":
        check_input_file(p, _FOLDER)  # a FIFO or a device is refused before ncu reads it
        if export is None:
            raise InputError(
                p,
                "a binary Nsight Compute report is read through ncu; read it with: fibtui ncu import FILE",
            )
        details = parse_details_csv(export(p, "details", True), p)
        raw = parse_raw_csv(export(p, "raw", True), p)
        report = merge_raw(details, raw)
        report.source_format = "ncu-rep"
        return report
    data = read_input(
        p, folder_message=_FOLDER
    )  # never blocks: a FIFO, socket or device is refused
    if not data.strip():
        raise InputError(p, "file is empty")
    if b"\x00" in data[:4096]:
        raise InputError(p, "binary file; a binary Nsight Compute report must end in .ncu-rep")
    return parse_report_text(data.decode("utf-8", errors="replace"), p)
