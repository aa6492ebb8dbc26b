"""``fibtui-journal``: fibtui's run journal (``journal.jsonl``), read as the run reads it (a torn
or corrupt line is skipped and reported) and turned into the run record it would write
(:mod:`fibtui.core.results.fibtui_run`); its tables are ``fibtui-run`` tables."""

from __future__ import annotations

import json
from pathlib import Path

from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fibtui_run import RECORD_FORMAT, read_run_record
from fibtui.core.results.table import RunTable


def _is_journal_header(first_line: str) -> bool:
    """fibtui's run journal starts with its header line: ``{"kind": "header", "format": "fibtui-run"...}``."""
    if '"header"' not in first_line or '"fibtui-run"' not in first_line:
        return False
    try:
        obj = json.loads(first_line)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(obj, dict) and obj.get("kind") == "header" and obj.get("format") == "fibtui-run"
    )


def sniff(probe: Probe) -> bool:
    first = probe.first_line
    return (
        probe.stripped.startswith("{")
        and first.startswith("{")
        and first.endswith("}")
        and _is_journal_header(first)
    )


def _from_journal(path: Path) -> RunTable:
    """fibtui's own run journal, read as the run does (a torn or corrupt line is skipped and
    reported) and turned into the run record it would write."""
    from fibtui.core.runs import build_record, read_journal

    contents = read_journal(path)
    record = build_record(path.parent, contents)
    table = read_run_record(path, record.to_json())
    table.meta["read_from"] = "journal"
    table.meta["state"] = record.state
    if contents.corrupt_lines:
        table.notes.append(
            f"journal lines left out as corrupt or torn: {', '.join(map(str, contents.corrupt_lines))}"
        )
    if contents.duplicate_lines:
        table.notes.append(
            f"journal lines left out as repeats of a finished job: {', '.join(map(str, contents.duplicate_lines))}"
        )
    summary = record.summary
    if summary.done < summary.total:
        table.notes.append(f"run {record.state}: {summary.done} of {summary.total} jobs finished")
    return table


FORMAT = ResultFormat(
    "fibtui-journal", sniff, lambda probe: _from_journal(probe.path), tables=(RECORD_FORMAT,)
)
