"""The archive (``optimize_ops/``), decisions and round summaries.

One module per concern, everything importable from here (``from fibtui.core.archive import ...``):
:mod:`~fibtui.core.archive.layout` (names and places), :mod:`~fibtui.core.archive.store`
(copying into the archive, never overwriting), :mod:`~fibtui.core.archive.best` (best solutions
and best.json), :mod:`~fibtui.core.archive.checked_in` (the workspace's kernel and config.toml:
install, rename, restore), :mod:`~fibtui.core.archive.vcs` (the git operations, the only module
that runs git), :mod:`~fibtui.core.archive.rounds` (round records),
:mod:`~fibtui.core.archive.run_data` (the run records of a round),
:mod:`~fibtui.core.archive.report` (the round report), :mod:`~fibtui.core.archive.markdown` (its
Markdown) and :mod:`~fibtui.core.archive.decide` (promote, reject, archive_only).

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

Nothing archived is ever overwritten: a taken name becomes ``_run2``, ``_run3``
(:func:`fibtui.core.fsio.reserve_unique_path`). Every folder and file is made through
:mod:`fibtui.core.fsio`, so a write the file system refuses (no permission, a read-only or full
disk, a file where a folder belongs) is one :class:`~fibtui.core.errors.WriteFailed` line naming
the path, and the entry being made is removed again: nothing is left half-written.

Decisions (``promote``, ``reject``, ``archive_only``) archive first, then act, then append a round
record to ``docs/rounds.jsonl`` (a later line for the same round replaces the earlier one) and
regenerate the round summary. A round record freezes what its decision used (the noise floor and
the statistics settings), so the summary is regenerated from the records alone: the run records
named in the round, the round record and the workload definition; the same records give the same
bytes (no clock is read; dates come from the run records).

Restoring on reject: the checked-in kernel (``solution/<language>/``) goes back to the last commit
(``git checkout HEAD -- solution/<language>``, with files the candidate added removed after they
were archived): ``promote`` commits what it changed, so the last commit is the previous best. A
workspace that is not a git repository (or has no commit of that folder) is restored from the best
snapshot under ``best_solution_<language>/`` instead.
"""

from __future__ import annotations

from fibtui.core.archive.best import best_solution_path, read_best, write_best
from fibtui.core.archive.checked_in import RestoreResult, restore_kernel, set_config_value
from fibtui.core.archive.decide import (
    DecisionResult,
    RoundInputs,
    archive_only,
    gather_round,
    promote,
    reject,
    summary_for_runs,
)
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
from fibtui.core.archive.store import (
    archive_file,
    archive_ncu_report,
    archive_parallel_runs,
    archive_run,
    archive_snapshot,
    archive_sources,
)
from fibtui.core.archive.vcs import commit_paths, differs_from_head
from fibtui.core.workspace import archive_root_of

__all__ = [
    "BEST_POINTER",
    "CANDIDATE_ID",
    "DECISIONS",
    "ROUNDS_FILE",
    "RUNS_DIR",
    "DecisionResult",
    "RestoreResult",
    "RoundInputs",
    "RoundRecord",
    "RunData",
    "append_round",
    "archive_file",
    "archive_ncu_report",
    "archive_only",
    "archive_parallel_runs",
    "archive_root_of",
    "archive_run",
    "archive_snapshot",
    "archive_sources",
    "best_artifact_name",
    "best_folder",
    "best_solution_path",
    "build_round_report",
    "candidate_folder",
    "candidate_major",
    "candidate_parts",
    "check_candidate_id",
    "commit_paths",
    "decided_round",
    "differs_from_head",
    "find_round",
    "freeze_floor",
    "gather_round",
    "latency_tag",
    "load_rounds",
    "load_run",
    "promote",
    "read_best",
    "reject",
    "render_round",
    "restore_kernel",
    "round_runs",
    "round_summary_markdown",
    "run_kind",
    "safe_name",
    "set_config_value",
    "summary_for_runs",
    "write_best",
    "write_round_summary",
]
