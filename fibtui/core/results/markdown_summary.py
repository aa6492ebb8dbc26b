"""``markdown-summary``: a Markdown summary (``.md``, or text starting with a heading): its
definition and its tables, kept as they are. No per-workload rows."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fields import read_log
from fibtui.core.results.table import RunTable


def sniff(probe: Probe) -> bool:
    return probe.stripped.startswith("#") or probe.path.suffix == ".md"


def _from_markdown(path: Path) -> RunTable:
    text = read_log(path)
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


FORMAT = ResultFormat(
    "markdown-summary", sniff, lambda probe: _from_markdown(probe.path), per_workload=False
)
