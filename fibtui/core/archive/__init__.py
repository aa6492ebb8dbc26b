"""The archive (``optimize_ops/``) as data: its names and places, the round records, the run
records of a round, and the round report and its Markdown.

One module per concern, everything importable from here (``from fibtui.core.archive import ...``):
:mod:`~fibtui.core.archive.layout` (names and places), :mod:`~fibtui.core.archive.rounds` (round
records), :mod:`~fibtui.core.archive.run_data` (the run records of a round),
:mod:`~fibtui.core.archive.report` (the round report) and :mod:`~fibtui.core.archive.markdown`
(its Markdown). What changes the archive and the workspace (copying into the archive, best.json,
the checked-in kernel, git, and the decisions promote, reject and archive_only) is the
application's: :mod:`fibtui.services.archive`.

Layout (docs/formats.md, "The archive, optimize_ops/"), relative to the archive root ``<workspace>/optimize_ops``::

    runs/<run_id>/                 fibtui's run folders (journal, run.json, snapshots, worker logs)
    benchmarks/                    run results and other measurement files; benchmarks/ncu/ for
                                   Nsight Compute reports; benchmarks/aa.jsonl: A/A sessions
    docs/                          round summaries round_<date>_<topic>.md (+ .json twin),
                                   rounds.jsonl (one line per decision: the round records)
    kernels/<id>/                  isolated candidates (ids without a version, rejected workspace edits)
    v<major>/<id>/                 snapshots of each tested kernel (v2_smallb_splitv -> v2/)
    <operator>/parallel_runs/      result folders of other runners, archived as they are
    best_solution_<language>/      the best kernel, named latency-first
                                   (<operator>_<model>_lat<xxpxxx>us.kernel.<ext>), its full
                                   snapshot in a folder of the same stem, and best.json (the
                                   pointer to the current best: the one file rewritten here)

A round record freezes what its decision used (the noise floor and the statistics settings), so
the summary is regenerated from the records alone: the run records named in the round, the round
record and the workload definition; the same records give the same bytes (no clock is read; dates
come from the run records). A later line of ``docs/rounds.jsonl`` for the same round replaces the
earlier one.
"""

from __future__ import annotations

from fibtui.core.archive.layout import (
    BEST_POINTER,
    CANDIDATE_ID,
    ROUNDS_FILE,
    RUNS_DIR,
    best_artifact_name,
    best_folder,
    candidate_folder,
    candidate_major,
    candidate_parts,
    check_candidate_id,
    latency_tag,
    safe_name,
)
from fibtui.core.archive.markdown import render_round, round_summary_markdown, write_round_summary
from fibtui.core.archive.report import build_round_report, freeze_floor
from fibtui.core.archive.rounds import (
    DECISIONS,
    RoundRecord,
    append_round,
    decided_round,
    find_round,
    load_rounds,
)
from fibtui.core.archive.run_data import RunData, load_run, round_runs, run_kind
from fibtui.core.workspace import archive_root_of

__all__ = [
    "BEST_POINTER",
    "CANDIDATE_ID",
    "DECISIONS",
    "ROUNDS_FILE",
    "RUNS_DIR",
    "RoundRecord",
    "RunData",
    "append_round",
    "archive_root_of",
    "best_artifact_name",
    "best_folder",
    "build_round_report",
    "candidate_folder",
    "candidate_major",
    "candidate_parts",
    "check_candidate_id",
    "decided_round",
    "find_round",
    "freeze_floor",
    "latency_tag",
    "load_rounds",
    "load_run",
    "render_round",
    "round_runs",
    "round_summary_markdown",
    "run_kind",
    "safe_name",
    "write_round_summary",
]
