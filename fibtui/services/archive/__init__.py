"""What changes the archive (``optimize_ops/``) and the workspace: the application's side of the
archive, whose data (layout, round records, run records, the round report) is
:mod:`fibtui.core.archive`.

One module per concern, everything importable from here (``from fibtui.services.archive import
...``): :mod:`~fibtui.services.archive.store` (copying into the archive, never overwriting),
:mod:`~fibtui.services.archive.best` (best solutions and best.json),
:mod:`~fibtui.services.archive.checked_in` (the workspace's kernel and config.toml: install,
rename, restore), :mod:`~fibtui.services.archive.vcs` (the git operations, the only module that
runs git) and :mod:`~fibtui.services.archive.decide` (promote, reject, archive_only).

Nothing archived is ever overwritten: a taken name becomes ``_run2``, ``_run3``
(:func:`fibtui.core.fsio.reserve_unique_path`). Every folder and file is made through
:mod:`fibtui.core.fsio`, so a write the file system refuses (no permission, a read-only or full
disk, a file where a folder belongs) is one :class:`~fibtui.core.errors.WriteFailed` line naming
the path, and the entry being made is removed again: nothing is left half-written.

Decisions (``promote``, ``reject``, ``archive_only``) archive first, then act, then append a round
record to ``docs/rounds.jsonl`` and regenerate the round summary (:mod:`fibtui.core.archive`).

Restoring on reject: the checked-in kernel (``solution/<language>/``) goes back to the last commit
(``git checkout HEAD -- solution/<language>``, with files the candidate added removed after they
were archived): ``promote`` commits what it changed, so the last commit is the previous best. A
workspace that is not a git repository (or has no commit of that folder) is restored from the best
snapshot under ``best_solution_<language>/`` instead.
"""

from __future__ import annotations

from fibtui.services.archive.best import (
    best_solution_path,
    installed_is_not_best,
    read_best,
    write_best,
)
from fibtui.services.archive.checked_in import RestoreResult, restore_kernel, set_config_value
from fibtui.services.archive.decide import (
    DecisionResult,
    RoundInputs,
    archive_only,
    gather_round,
    promote,
    reject,
    summary_for_runs,
)
from fibtui.services.archive.store import (
    archive_file,
    archive_ncu_report,
    archive_parallel_runs,
    archive_run,
    archive_snapshot,
    archive_sources,
)
from fibtui.services.archive.vcs import commit_paths, differs_from_head

__all__ = [
    "DecisionResult",
    "RestoreResult",
    "RoundInputs",
    "archive_file",
    "archive_ncu_report",
    "archive_only",
    "archive_parallel_runs",
    "archive_run",
    "archive_snapshot",
    "archive_sources",
    "best_solution_path",
    "commit_paths",
    "differs_from_head",
    "gather_round",
    "installed_is_not_best",
    "promote",
    "read_best",
    "reject",
    "restore_kernel",
    "set_config_value",
    "summary_for_runs",
    "write_best",
]
