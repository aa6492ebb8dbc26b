"""``fib-console-log``: flashinfer-bench's own console log (``Solution 'S' for workload U: STATUS
with Nx speedup``): statuses and speedups, no latency (read the traces JSONL for latencies)."""

from __future__ import annotations

import re
from pathlib import Path

from fibtui.core.dataset import _Ctx
from fibtui.core.errors import InputError
from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fields import log_number, read_log
from fibtui.core.results.table import ResultRow, RunTable
from fibtui.core.status import ALL_STATUSES

_FIB_CONSOLE = re.compile(
    r"^Solution '(?P<sol>.+)' for workload (?P<uuid>\S+): (?P<status>[A-Z_]+)(?: with (?P<speedup>[-\w.+]+?)x speedup)?"
)


def sniff(probe: Probe) -> bool:
    return any(_FIB_CONSOLE.match(line) for line in probe.lines)


def _from_fib_console(path: Path) -> RunTable:
    """flashinfer-bench's console log. It prints one line per (solution, workload) of a definition:
    a second one is two runs concatenated, refused at the second."""
    rows: dict[tuple[str, str, str], ResultRow] = {}
    first_line: dict[tuple[str, str, str], int] = {}
    definition = None
    for number, line in enumerate(read_log(path).splitlines(), start=1):
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
            speedup = log_number(ctx, m.group("speedup"), "speedup", True)
            if speedup is None:
                raise ctx.fail("speedup", f"expected a number, got {m.group('speedup')[:40]!r}")
        key = (definition or "", m.group("sol"), m.group("uuid"))
        if key in first_line:
            raise ctx.fail(
                "uuid",
                f"a second result for workload {m.group('uuid')} and solution {m.group('sol')!r} "
                f"(first on line {first_line[key]}; two runs concatenated?)",
            )
        first_line[key] = number
        rows[key] = ResultRow(
            definition=definition or "",
            solution=m.group("sol"),
            uuid=m.group("uuid"),
            axes={},
            status=status,
            speedup=speedup,
            source=f"{path}:{number}",
        )
    table = RunTable(definition, "fib-console-log", path, list(rows.values()))
    table.notes.append(
        "flashinfer-bench console log: statuses and speedups only (no latency); read the traces JSONL for latencies"
    )
    return table


FORMAT = ResultFormat(
    "fib-console-log", sniff, lambda probe: _from_fib_console(probe.path), per_workload=False
)
