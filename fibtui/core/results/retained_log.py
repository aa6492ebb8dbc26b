"""``retained-run-log``: the console table of ``retained_run.log`` (a ``#  UUID <axes> Status
Latency ...`` header, one row per workload). A log reprints its tables and a retry section reruns
some workloads: the later result for a workload wins; the same workload twice in one table, or in
two ``=== Run started`` sections, is two runs in one file and refused."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from fibtui.core.dataset import MAX_AXIS, _Ctx
from fibtui.core.errors import InputError
from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fields import log_number, read_log, token_float
from fibtui.core.results.table import ResultRow, RunTable, note_stated_differences
from fibtui.core.status import ALL_STATUSES, PASSED

_LOG_HEADER = re.compile(r"^\s*#\s+UUID\s+(?P<axes>.*?)\s*Status\s+Latency")


def sniff(probe: Probe) -> bool:
    """A table header on any line; a log whose table header is its first line is not Markdown."""
    return probe.path.suffix != ".md" and any(_LOG_HEADER.match(line) for line in probe.lines)


def _from_retained_log(path: Path) -> RunTable:
    lines = read_log(path).splitlines()
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
            value = token_float(m.group(2))
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
            vals = [log_number(ctx, tok, column, positive) for tok, (column, positive) in zip(rest, columns, strict=False)]
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
    note_stated_differences(table, decimals)
    if retries:
        table.notes.append(f"{retries} retry section(s): the later result for a workload wins")
    return table


FORMAT = ResultFormat("retained-run-log", sniff, lambda probe: _from_retained_log(probe.path))
