"""The result formats, in the order they are tried, and the two functions that use them.

A format is a :class:`~fibtui.core.results.base.ResultFormat`: a ``name``, a ``sniff`` (does this file hold it? decided from
the content, the file name only as a tie-breaker) and a ``read`` (the file as a
:class:`~fibtui.core.results.table.RunTable`). Each lives in a module of its own under
``fibtui/core/results/``; adding one is that module plus one line in :data:`FORMATS` (a text
format) or :data:`JSON_LAYOUTS` (a layout of a JSON document).

:func:`detect_format` reads the first MiB and returns the name of the first text format whose sniff
says yes (``json`` for any JSON document); :func:`load_results` reads the file with it. A JSON
document is parsed once (an object naming one key twice is refused) and offered to the layouts of
:data:`JSON_LAYOUTS` in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core.dataset import _kind, read_json_file
from fibtui.core.errors import InputError
from fibtui.core.fsio import read_input
from fibtui.core.results import (
    direct_timing,
    fib_console,
    fib_traces,
    fibtui_journal,
    fibtui_run,
    hand_summary,
    markdown_summary,
    ncu_report,
    result_json,
    retained_log,
)
from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fields import FOLDER
from fibtui.core.results.table import AxesLookup, RunTable

HEAD_BYTES = 1 << 20  # what detection reads of a file


def _json_document(probe: Probe) -> bool:
    return probe.stripped.startswith(("[", "{"))


def _read_json_document(probe: Probe) -> RunTable:
    data = read_json_file(probe.path, unique_keys=True)
    return _read_layouts(Probe(probe.path, probe.head, data))


def _read_layouts(document: Probe) -> RunTable:
    """A parsed JSON document (``document.data``) read by the first layout that claims it."""
    data = document.data
    for layout in JSON_LAYOUTS:
        if layout.sniff(document):
            return layout.read(document)
    if not isinstance(data, dict):
        raise InputError(document.path, f"expected a JSON object, got {_kind(data)}")
    raise InputError(
        document.path, "unrecognized JSON result layout (no 'results', 'runs' or per-size timings)"
    )


#: Any JSON document that no text format above it claimed: read by the first matching layout.
JSON_DOCUMENT = ResultFormat("json", _json_document, _read_json_document)

#: Text formats, in the order they are tried (the first whose sniff says yes reads the file).
FORMATS: tuple[ResultFormat, ...] = (
    ncu_report.FORMAT,
    fib_traces.FORMAT,
    fibtui_journal.FORMAT,
    JSON_DOCUMENT,  # a document starting with [ or { that none of the above claimed
    retained_log.FORMAT,
    markdown_summary.FORMAT,
    fib_console.FORMAT,
)

#: Layouts of a JSON document, in the order they are tried.
JSON_LAYOUTS: tuple[ResultFormat, ...] = (
    fibtui_run.FORMAT,
    result_json.FORMAT,
    hand_summary.FORMAT,
    direct_timing.FORMAT,
)


def _probe(path: Path) -> Probe:
    head = read_input(
        path, folder_message=FOLDER, limit=HEAD_BYTES
    )  # a FIFO or a device is refused here
    return Probe(path, head.decode("utf-8", errors="replace"))


def _format_of(probe: Probe) -> ResultFormat:
    if not probe.stripped:
        raise InputError(probe.path, "file is empty")
    for fmt in FORMATS:
        if fmt.sniff(probe):
            return fmt
    if probe.path.suffix == ".log":
        raise InputError(
            probe.path,
            "no result table found (expected a retained_run.log table or flashinfer-bench console lines)",
        )
    raise InputError(
        probe.path,
        "unrecognized result format (expected traces JSONL, a result JSON, a retained_run.log or a summary)",
    )


def detect_format(path: Path) -> str:
    """Guess the source format from the file's content (never from the name alone)."""
    return _format_of(_probe(Path(path))).name


def load_results(path: str | Path, axes_lookup: AxesLookup | None = None) -> RunTable:
    """Read any supported result file into one normalized :class:`RunTable`."""
    return load_results_and_document(path, axes_lookup)[0]


def load_results_and_document(
    path: str | Path, axes_lookup: AxesLookup | None = None
) -> tuple[RunTable, Any]:
    """:func:`load_results`, and the parsed JSON document the table was read from (None for a
    text format): a reader that needs more of a run record than its table reads the file once."""
    path = Path(path)
    probe = _probe(path)
    fmt = _format_of(probe)
    document: Any = None
    if fmt is JSON_DOCUMENT:
        document = read_json_file(probe.path, unique_keys=True)
        table = _read_layouts(Probe(probe.path, probe.head, document))
    else:
        table = fmt.read(probe)
    if axes_lookup is not None:
        for r in table.rows:
            if not r.axes:
                found = axes_lookup(r.definition, r.uuid)
                if found:
                    r.axes = dict(found)
    return table, document


def has_workload_latencies(source_format: str) -> bool:
    """Whether a table of this ``source_format`` carries per-workload latencies (a summary, a
    console log without latencies or per-size timings do not: there is nothing to pair)."""
    return all(
        fmt.per_workload for fmt in (*FORMATS, *JSON_LAYOUTS) if source_format in fmt.table_formats
    )
