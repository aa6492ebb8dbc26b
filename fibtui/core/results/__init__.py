"""Result importers: one normalized run table from every result format users have.

Formats (``source_format``), one module each, tried in the order of
:mod:`fibtui.core.results.registry`:

- ``fib-traces`` (:mod:`~fibtui.core.results.fib_traces`): flashinfer-bench trace JSONL (several
  solutions per file).
- ``retained-run``, ``single-container``, ``single-container-single``
  (:mod:`~fibtui.core.results.result_json`): the hand workflow's ``retained_run.json``, the fan-out
  runner's and the single-container runner's ``benchmark_detailed_results.json`` and its
  ``_single`` variant without a summary.
- ``retained-run-log`` (:mod:`~fibtui.core.results.retained_log`): the console table of
  ``retained_run.log``; after a retry section the later result for a workload wins.
- ``fib-console-log`` (:mod:`~fibtui.core.results.fib_console`): flashinfer-bench's own console
  log (status and speedup, no latency).
- ``hand-summary`` (:mod:`~fibtui.core.results.hand_summary`): a hand-written ``summary.json``
  (keys differ per kernel; nothing required).
- ``direct-timing`` (:mod:`~fibtui.core.results.direct_timing`): per-size direct timings
  (``{size: [{metric_ms: value}]}``).
- ``markdown-summary`` (:mod:`~fibtui.core.results.markdown_summary`): a Markdown summary.
- ``fibtui-run`` (:mod:`~fibtui.core.results.fibtui_run`): fibtui's own run record
  (``optimize_ops/runs/<run_id>/run.json``), or its run journal (``journal.jsonl``,
  :mod:`~fibtui.core.results.fibtui_journal`), read through :func:`fibtui.core.runs.read_journal`
  and turned into the same record.
- An Nsight Compute report (:mod:`~fibtui.core.results.ncu_report`) is recognised and sent to
  ``fibtui ncu import``.

Adding a format: a module here with its ``FORMAT = ResultFormat(name, sniff, read)`` (see
:mod:`fibtui.core.results.base`), and one line in :data:`~fibtui.core.results.registry.FORMATS`
(a text format) or :data:`~fibtui.core.results.registry.JSON_LAYOUTS` (a JSON layout).

Latency statistics count PASSED rows only; pass counts are always reported. Every latency,
reference latency and speedup a file states must be a finite, positive, normal number (NaN,
infinities, ``1e400``, zero, negatives and subnormals are refused with the file, line and field),
and a file that holds two results for one (workload, solution) is refused at the second: nothing
is averaged or dropped silently. A UTF-8 byte-order mark at the start of a file is accepted; a
path that is not a regular file (a FIFO, a socket, a device) is refused before it is read.
"""

from __future__ import annotations

from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.fibtui_run import check_run_record, load_run_record, read_run_record
from fibtui.core.results.registry import (
    FORMATS,
    JSON_LAYOUTS,
    detect_format,
    has_workload_latencies,
    load_results,
    load_results_and_document,
)
from fibtui.core.results.table import AxesLookup, ResultRow, RunTable, summarize, table_to_json

__all__ = [
    "FORMATS",
    "JSON_LAYOUTS",
    "AxesLookup",
    "Probe",
    "ResultFormat",
    "ResultRow",
    "RunTable",
    "check_run_record",
    "detect_format",
    "has_workload_latencies",
    "load_results",
    "load_results_and_document",
    "load_run_record",
    "read_run_record",
    "summarize",
    "table_to_json",
]
