"""Nsight Compute reports: read them, boil each kernel down to one row, classify it, diff two.

One module per concern; everything is importable from here (``from fibtui.core.ncu import ...``):

- :mod:`~fibtui.core.ncu.units`: cells of a page, units normalized (:func:`normalize`): times to
  microseconds (``us``), sizes to bytes (``byte``; ncu's ``Kbyte``/``Mbyte`` and ``KB``/``MB`` are
  decimal, ``KiB``/``MiB`` binary), rates to per second, frequencies to ``GHz``, percentages to
  ``%``; thousands separators (``36,029``) removed. A unit fibtui does not scale (``block``,
  ``register/thread``, ``%/Kbyte``, anything unknown) is kept as written, and a value that is not a
  number is kept as text; nothing there raises on an odd cell.
- :mod:`~fibtui.core.ncu.records`: :class:`NcuReport` of :class:`Launch` records, and the compact
  fields (:data:`FIELDS`).
- Readers (none needs ``ncu``; all return an :class:`NcuReport`):
  :mod:`~fibtui.core.ncu.csv_pages` (the details CSV page, ``ncu --import X --csv --page details``,
  one row per metric or rule; the raw CSV page, ``--page raw --csv``, one row per launch, one column
  per metric, a second header row holding the units), :mod:`~fibtui.core.ncu.text_page` (the
  details page as text), and :mod:`~fibtui.core.ncu.reading` (:func:`load_report`: any of those,
  the hand workflow's result JSON whose ``ncu_profile.rows[].output`` holds such a page, or a
  binary ``.ncu-rep`` through an exporter the caller injects: :func:`fibtui.runners.ncu.load_report`
  runs ncu for it).
- :mod:`~fibtui.core.ncu.classify`: :func:`classify`, its thresholds (a table in that module's
  docstring, used nowhere else) and tactic families.
- :mod:`~fibtui.core.ncu.summary`: the compact table (:func:`summarize`: one
  :class:`KernelSummary` per kernel name and band, the slowest instance's metrics plus the number
  of instances) and :func:`shape_matrix` (band -> dominant kernel -> bottleneck -> limiter).
- :mod:`~fibtui.core.ncu.diff`: :func:`diff_summaries`, :func:`diff_reports`, :func:`diff_bands`
  (per kernel and band, each compact metric before / after / delta / percent, with classification
  changes flagged).
- :mod:`~fibtui.core.ncu.display`: metric values and report labels as plain strings (TUI and CLI).
- :mod:`~fibtui.core.ncu.errors`: what the ``ncu`` executable raises (it runs in
  :mod:`fibtui.runners.ncu`, never here).
"""

from __future__ import annotations

from fibtui.core.ncu.classify import (
    BUSY_PCT,
    CROSS_BLOCK_DRAM_GAP_PCT,
    CROSS_BLOCK_L2_HIT_PCT,
    FULL_OCCUPANCY_PCT,
    GRID_TOO_SMALL_WAVES,
    IMBALANCE_RATIO,
    L2_HIT_LOW_PCT,
    LAUNCH_GAP_SHARE,
    TACTICS,
    TAIL_FILL,
    TAIL_MAX_WAVES,
    Classification,
    Finding,
    HostGaps,
    classify,
)
from fibtui.core.ncu.csv_pages import parse_details_csv, parse_raw_csv
from fibtui.core.ncu.diff import (
    DIFF_FIELDS,
    KernelDiff,
    MetricDelta,
    ReportDiff,
    diff_bands,
    diff_kernel,
    diff_reports,
    diff_summaries,
)
from fibtui.core.ncu.display import (
    COUNT_FIELDS,
    ELLIPSIS,
    abbreviate_middle,
    format_metric,
    report_labels,
    report_name,
)
from fibtui.core.ncu.errors import NcuFailed, NcuNotFound, NcuTimeout
from fibtui.core.ncu.reading import (
    PageExporter,
    load_exported,
    load_report,
    merge_raw,
    parse_hand_json,
    parse_page,
    parse_report_text,
)
from fibtui.core.ncu.records import (
    FIELDS,
    LIMITS,
    FieldSpec,
    Launch,
    Metric,
    NcuReport,
    Rule,
    launch_fields,
)
from fibtui.core.ncu.summary import (
    KernelSummary,
    attach_request,
    attach_workloads,
    band_of,
    report_to_json,
    request_path_for,
    shape_matrix,
    summarize,
)
from fibtui.core.ncu.text_page import parse_details_text
from fibtui.core.ncu.units import normalize, normalize_unit, parse_number

__all__ = [
    "BUSY_PCT",
    "COUNT_FIELDS",
    "CROSS_BLOCK_DRAM_GAP_PCT",
    "CROSS_BLOCK_L2_HIT_PCT",
    "DIFF_FIELDS",
    "ELLIPSIS",
    "FIELDS",
    "FULL_OCCUPANCY_PCT",
    "GRID_TOO_SMALL_WAVES",
    "IMBALANCE_RATIO",
    "L2_HIT_LOW_PCT",
    "LAUNCH_GAP_SHARE",
    "LIMITS",
    "TACTICS",
    "TAIL_FILL",
    "TAIL_MAX_WAVES",
    "Classification",
    "FieldSpec",
    "Finding",
    "HostGaps",
    "KernelDiff",
    "KernelSummary",
    "Launch",
    "Metric",
    "MetricDelta",
    "NcuFailed",
    "NcuNotFound",
    "NcuReport",
    "NcuTimeout",
    "PageExporter",
    "ReportDiff",
    "Rule",
    "abbreviate_middle",
    "attach_request",
    "attach_workloads",
    "band_of",
    "classify",
    "diff_bands",
    "diff_kernel",
    "diff_reports",
    "diff_summaries",
    "format_metric",
    "launch_fields",
    "load_exported",
    "load_report",
    "merge_raw",
    "normalize",
    "normalize_unit",
    "parse_details_csv",
    "parse_details_text",
    "parse_hand_json",
    "parse_number",
    "parse_page",
    "parse_raw_csv",
    "parse_report_text",
    "report_labels",
    "report_name",
    "report_to_json",
    "request_path_for",
    "shape_matrix",
    "summarize",
]
