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


_ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+(.*)$")
#: The columns after the status of a PASSED row: (name, must be a positive number).
_PASSED_COLUMNS = (
    ("Latency", True),
    ("Ref", True),
    ("Speedup", True),
    ("abs_err", False),
    ("rel_err", False),
)


def _from_retained_log(path: Path) -> RunTable:
    return _LogReader(path).read()


class _LogReader:
    """Reading a ``retained_run.log`` line by line: its facts (definition, solution name, the
    summary it states), the ``=== Run started`` / ``=== Retry started`` sections, and the rows of
    each table under a ``#  UUID ... Status  Latency`` header."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.axes_names: list[str] | None = None
        self.definition: str | None = None
        self.solution: str | None = None
        self.latest: dict[str, ResultRow] = {}  # uuid -> its latest row, in first-seen order
        self.sections = 0
        self.retries = 0
        self.stated: dict[str, Any] = {}
        self.decimals: dict[str, int] = {}
        self.in_retry = False
        self.in_table: dict[str, int] = {}  # uuid -> line, in the table being read
        self.in_runs: dict[
            str, tuple[int, int]
        ] = {}  # uuid -> (run section, line), outside retry sections

    def read(self) -> RunTable:
        for number, line in enumerate(read_log(self.path).splitlines(), start=1):
            self._line(number, line)
        if not self.latest:
            raise InputError(
                self.path, "no result rows found under a '#  UUID ... Status  Latency' header"
            )
        rows = list(self.latest.values())
        for r in rows:
            r.definition = r.definition or self.definition or ""
        table = RunTable(self.definition, "retained-run-log", self.path, rows, stated=self.stated)
        table.meta.update({"sections": self.sections, "retries": self.retries})
        note_stated_differences(table, self.decimals)
        if self.retries:
            table.notes.append(
                f"{self.retries} retry section(s): the later result for a workload wins"
            )
        return table

    def _line(self, number: int, line: str) -> None:
        if line.startswith("=== Run started"):
            self.sections += 1
            self.in_retry = False
        elif line.startswith("=== Retry started"):
            self.retries += 1
            self.in_retry = True
        if self._fact(line):
            return
        h = _LOG_HEADER.match(line)
        if h:
            self.axes_names = h.group("axes").split()
            self.in_table = {}
            return
        if self.axes_names is None or line.startswith(("-", "=")):
            return
        m = _ROW.match(line)
        if m and len(tokens := m.group(3).split()) >= len(self.axes_names) + 1:
            self._row(number, m.group(2), tokens)

    def _fact(self, line: str) -> bool:
        """The definition, the solution's name, a stated latency or the pass count."""
        m = re.match(r"^(?:DEFINITION|Definition):\s*(\S+)", line)
        if m:
            self.definition = m.group(1)
            return True
        m = re.match(r"^\s+Name:\s*(\S+)", line)
        if m and self.solution is None:
            self.solution = m.group(1)
            return True
        m = re.match(r"^\s*(Avg|Median|P95|Min|Max) latency:\s*([-\d.eE+]+)\s*ms", line)
        if m:
            key = f"{m.group(1).lower()}_latency_ms"
            value = token_float(m.group(2))
            if value is not None and math.isfinite(value):
                self.stated[key] = value
                self.decimals[key] = len(m.group(2).partition(".")[2])
            return True
        m = re.match(r"^RESULT:\s*(\d{1,18})/(\d{1,18}) PASSED", line)
        if m:
            self.stated["passed_workloads"], self.stated["total_workloads"] = (
                int(m.group(1)),
                int(m.group(2)),
            )
            return True
        return False

    def _row(self, number: int, uuid: str, tokens: list[str]) -> None:
        assert self.axes_names is not None
        ctx = _Ctx(self.path, number)
        self._refuse_second_run(ctx, uuid, number)
        n = len(self.axes_names)
        status = tokens[n]
        axes = self._axes(ctx, tokens[:n])
        if status not in ALL_STATUSES:
            raise ctx.fail("Status", f"unknown status {status!r}")
        rest = tokens[n + 1 :]
        row = ResultRow(
            definition=self.definition or "",
            solution=self.solution,
            uuid=uuid,
            axes=axes,
            status=status,
            source=f"{self.path}:{number}",
        )
        if status == PASSED:
            vals = [
                log_number(ctx, tok, column, positive)
                for tok, (column, positive) in zip(rest, _PASSED_COLUMNS, strict=False)
            ]
            if len(vals) < 1 or vals[0] is None:
                raise ctx.fail("Latency", "a PASSED row must carry a latency")
            row.latency_ms = vals[0]
            row.reference_latency_ms = vals[1] if len(vals) > 1 else None
            row.speedup = vals[2] if len(vals) > 2 else None
            row.max_abs_error = vals[3] if len(vals) > 3 else None
            row.max_rel_error = vals[4] if len(vals) > 4 else None
        else:
            row.error = " ".join(rest) or None
        self.latest[uuid] = row  # the later result for a workload wins (retry sections come later)

    def _refuse_second_run(self, ctx: _Ctx, uuid: str, number: int) -> None:
        """A table lists a workload once; a log reprints its tables (by latency, then by index) and
        a retry section reruns some: the later result wins. The same workload twice in one table,
        or again in a second '=== Run started' section, is two runs in one file."""
        if uuid in self.in_table:
            raise ctx.fail(
                "UUID",
                f"a second result for workload {uuid} in one table (first on line {self.in_table[uuid]})",
            )
        self.in_table[uuid] = number
        if self.in_retry:
            return
        seen = self.in_runs.get(uuid)
        if seen is not None and seen[0] != self.sections:
            raise ctx.fail(
                "UUID",
                f"a second result for workload {uuid} (first on line {seen[1]}, in another "
                "'=== Run started' section: two runs concatenated?)",
            )
        if seen is None:
            self.in_runs[uuid] = (self.sections, number)

    def _axes(self, ctx: _Ctx, tokens: list[str]) -> dict[str, int]:
        assert self.axes_names is not None
        axes: dict[str, int] = {}
        for name, tok in zip(self.axes_names, tokens, strict=False):
            try:
                axes[name] = int(tok)
            except ValueError:
                raise ctx.fail(name, f"expected an integer axis value, got {tok[:40]!r}") from None
            if not 0 <= axes[name] <= MAX_AXIS:
                raise ctx.fail(
                    name, f"expected an axis value within 0 .. 2**63 - 1, got {tok[:40]}"
                )
        return axes


FORMAT = ResultFormat("retained-run-log", sniff, lambda probe: _from_retained_log(probe.path))
