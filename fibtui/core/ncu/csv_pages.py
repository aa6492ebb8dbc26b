"""The two CSV pages of ``ncu --import X --csv``: the details page (``--page details``: one row
per metric or rule of each launch) and the raw page (``--page raw``: one row per launch, one column
per metric, a second header row holding the units). ncu's own ``==PROF==`` lines are skipped."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from fibtui.core.errors import InputError
from fibtui.core.ncu.records import Launch, Metric, NcuReport, Rule
from fibtui.core.ncu.units import (
    cell_int,
    dims,
    normalize,
    normalize_unit,
    normalize_with,
    parse_number,
)


def _csv_records(lines: list[str], start: int) -> Iterator[tuple[int, list[str]]]:
    """CSV records from ``lines[start:]`` with the 1-based number of each record's last line;
    ncu's own ``==PROF==`` / ``==WARNING==`` lines are skipped."""
    pos = [start]

    def feed() -> Iterator[str]:
        while pos[0] < len(lines):
            line = lines[pos[0]]
            pos[0] += 1
            if line.startswith("=="):
                continue
            yield line

    reader = csv.reader(feed())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(None, f"not valid CSV: {exc}", line=pos[0]) from None
        yield pos[0], row


def find_csv_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines[:200]):
        s = line.lstrip("\ufeff").lstrip()
        if s.startswith('"ID"') or s.startswith("ID,"):
            return i
    return None


def csv_header(
    path: str | None, lines: list[str], start: int
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    records = _csv_records(lines, start)
    try:
        _, header = next(records)
    except StopIteration:
        raise InputError(path, "no CSV header") from None
    except InputError as exc:
        raise InputError(path, exc.message, line=exc.line) from None
    return [h.lstrip("\ufeff").strip() for h in header], records


def _with_path(
    path: str | None, records: Iterator[tuple[int, list[str]]]
) -> Iterator[tuple[int, list[str]]]:
    try:
        yield from records
    except InputError as exc:
        if exc.path is None:
            raise InputError(path, exc.message, line=exc.line, field=exc.field) from None
        raise


def _check_width(path: str | None, line: int, row: list[str], header: list[str]) -> None:
    if len(row) > len(header) and any(c.strip() for c in row[len(header) :]):
        raise InputError(
            path, f"row has {len(row)} fields, the header has {len(header)}", line=line
        )


def parse_details_csv(text: str, path: str | Path | None = None) -> NcuReport:
    """The details page as CSV: one row per metric (or per rule) of each launch."""
    where = None if path is None else str(path)
    lines = text.splitlines(keepends=True)
    start = find_csv_header(lines)
    if start is None:
        raise InputError(
            where, 'no CSV header starting with "ID" (is this an Nsight Compute CSV export?)'
        )
    header, records = csv_header(where, lines, start)
    col = {name: i for i, name in enumerate(header)}
    for required in ("Kernel Name", "Metric Name", "Metric Value"):
        if required not in col:
            raise InputError(
                where,
                f"no {required!r} column: not a details page CSV",
                line=start + 1,
                field=required,
            )
    value_col = col["Metric Value"]
    report = NcuReport(where, "details-csv")
    by_key: dict[str, Launch] = {}
    for line, row in _with_path(where, records):
        if not any(c.strip() for c in row) or [c.strip() for c in row] == header:
            continue
        _check_width(where, line, row, header)
        if len(row) <= value_col:
            raise InputError(
                where,
                f"row ends after {len(row)} fields, before the 'Metric Value' column "
                f"(the header has {len(header)})",
                line=line,
                field="Metric Value",
            )

        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        kernel = get("Kernel Name")
        if not kernel:
            raise InputError(where, "empty kernel name", line=line, field="Kernel Name")
        key = (
            get("ID")
            or f"{kernel}|{get('Grid Size')}|{get('Block Size')}|{get('Context')}|{get('Stream')}"
        )
        launch = by_key.get(key)
        if launch is None:
            launch = Launch(
                kernel=kernel,
                id=cell_int(get("ID")),
                grid=dims(get("Grid Size")),
                block=dims(get("Block Size")),
                context=cell_int(get("Context")),
                stream=cell_int(get("Stream")),
                device=cell_int(get("Device")),
                cc=get("CC") or None,
                process_id=cell_int(get("Process ID")),
                process_name=get("Process Name") or None,
            )
            by_key[key] = launch
            report.launches.append(launch)
        section = get("Section Name")
        name = get("Metric Name")
        if name:
            raw_value, raw_unit = get("Metric Value"), get("Metric Unit")
            value, unit = normalize(raw_value, raw_unit)
            launch.metrics.append(Metric(section, name, value, unit, raw_value, raw_unit))
        rule_name, rule_text = get("Rule Name"), get("Rule Description")
        if rule_name or rule_text:
            speedup = parse_number(get("Estimated Speedup"))
            launch.rules.append(
                Rule(
                    section,
                    rule_name,
                    get("Rule Type") or "INF",
                    rule_text,
                    get("Estimated Speedup Type") or None,
                    speedup,
                )
            )
    if not report.launches:
        raise InputError(where, "the details CSV holds no kernel rows")
    return report


_IDENTITY_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)


def parse_raw_csv(text: str, path: str | Path | None = None) -> NcuReport:
    """The raw page as CSV: one row per launch, one column per metric, units in a second header row."""
    where = None if path is None else str(path)
    lines = text.splitlines(keepends=True)
    start = find_csv_header(lines)
    if start is None:
        raise InputError(
            where, 'no CSV header starting with "ID" (is this an Nsight Compute CSV export?)'
        )
    header, records = csv_header(where, lines, start)
    col = {name: i for i, name in enumerate(header)}
    if "Kernel Name" not in col:
        raise InputError(
            where,
            "no 'Kernel Name' column: not a raw page CSV",
            line=start + 1,
            field="Kernel Name",
        )
    units: list[str] = [""] * len(header)
    report = NcuReport(where, "raw-csv")
    first = True
    metric_cols = [i for i, name in enumerate(header) if name and name not in _IDENTITY_COLUMNS]
    unit_info = [normalize_unit(u) for u in units]
    for line, row in _with_path(where, records):
        if not any(c.strip() for c in row) or [c.strip() for c in row] == header:
            continue
        _check_width(where, line, row, header)

        def get(name: str, row: list[str] = row) -> str:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else ""

        if first:
            first = False
            if not get("Kernel Name") and cell_int(get("ID")) is None:
                units = [c.strip() for c in row] + [""] * max(0, len(header) - len(row))
                unit_info = [normalize_unit(u) for u in units]
                continue
        kernel = get("Kernel Name")
        if not kernel:
            raise InputError(where, "empty kernel name", line=line, field="Kernel Name")
        launch = Launch(
            kernel=kernel,
            id=cell_int(get("ID")),
            grid=dims(get("Grid Size")),
            block=dims(get("Block Size")),
            context=cell_int(get("Context")),
            stream=cell_int(get("Stream")),
            device=cell_int(get("Device")),
            cc=get("CC") or None,
            process_id=cell_int(get("Process ID")),
            process_name=get("Process Name") or None,
        )
        for i in metric_cols:
            raw_value = row[i].strip() if i < len(row) else ""
            value, unit = normalize_with(raw_value, units[i], *unit_info[i])
            launch.metrics.append(Metric("raw", header[i], value, unit, raw_value, units[i]))
        report.launches.append(launch)
    if not report.launches:
        raise InputError(where, "the raw CSV holds no launch rows")
    return report
