"""``fib-traces``: flashinfer-bench trace JSONL, one trace a line (several solutions per file).
Read with :func:`fibtui.core.dataset.read_traces` (the newest evaluation of each solution on each
workload: flashinfer-bench appends every run to one file); a workload-only line (no evaluation) is
no row."""

from __future__ import annotations

from pathlib import Path

from fibtui.core.dataset import read_traces
from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.table import ResultRow, RunTable


def sniff(probe: Probe) -> bool:
    """The first line is one whole JSON object that names a workload."""
    first = probe.first_line
    return (
        probe.stripped.startswith("{")
        and first.startswith("{")
        and first.endswith("}")
        and '"workload"' in first
    )


def _from_traces(path: Path) -> RunTable:
    traces, notes = read_traces(path)
    definitions = sorted({t.definition for t in traces})
    env = {(t.hardware, tuple(sorted(t.libs.items()))) for t in traces if t.hardware}
    rows = []
    # each trace is let go once its row is made: a large file is never held twice in memory
    traces.reverse()
    while traces:
        t = traces.pop()
        if t.status is None:
            continue  # a workload-only line, no evaluation
        rows.append(
            ResultRow(
                definition=t.definition,
                solution=t.solution,
                uuid=t.workload.uuid,
                axes=dict(t.workload.axes),
                status=t.status,
                source=f"{path}:{t.line}",
                **t.measured(),
            )
        )
    table = RunTable(definitions[0] if len(definitions) == 1 else None, "fib-traces", path, rows)
    if env:
        hw, libs = sorted(env, key=str)[0]
        table.meta["environment"] = {"hardware": hw, "libs": dict(libs)}
    table.notes.extend(notes)
    if len(definitions) > 1:
        table.notes.append(f"file holds {len(definitions)} definitions: {', '.join(definitions)}")
    return table


FORMAT = ResultFormat("fib-traces", sniff, lambda probe: _from_traces(probe.path))
