"""The run records a round is made of (``runs/<run_id>/run.json``, or the journal when the run
wrote no record), and which runs make a round."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.archive.layout import RUNS_DIR
from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import read_input_text

if TYPE_CHECKING:
    from fibtui.core.runs import JobResult


@dataclass
class RunData:
    run_id: str
    folder: Path
    record: dict[str, Any]

    @property
    def selection(self) -> str:
        return str(self.record.get("workload_selection") or "")

    def solutions(self, role: str) -> list[dict[str, Any]]:
        return [s for s in self.record.get("solutions") or [] if s.get("role") == role]

    def rows(self, role: str, name: str | None = None) -> list[JobResult]:
        """The jobs of a role (and solution), typed: the record's job dicts end here."""
        from fibtui.core.runs import JobResult

        return [
            JobResult.from_json(j)
            for j in self.record.get("jobs") or []
            if j.get("role") == role and (name is None or j.get("solution") == name)
        ]

    @property
    def uuids(self) -> list[str]:
        return list(dict.fromkeys(str(j.get("uuid")) for j in self.record.get("jobs") or []))

    @property
    def gpu(self) -> str | None:
        env = self.record.get("environment") or {}
        return env.get("gpu") if isinstance(env, dict) else None


def load_run(archive_root: Path, run_id: str) -> RunData:
    from fibtui.core.runs import build_record, run_dir

    folder = run_dir(archive_root, run_id)
    path = folder / "run.json"
    from_file = path.is_file()
    if from_file:
        text = read_input_text(path)  # a byte-order mark is accepted; a FIFO or device refused
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc.msg}", line=exc.lineno) from None
        except RecursionError:
            raise InputError(path, "not JSON: RecursionError") from None
        except ValueError:  # an integer of more than 4300 digits
            raise InputError(path, "not JSON: a number with more than 4300 digits") from None
    else:
        record = build_record(folder).to_json()
    if not isinstance(record, dict) or record.get("format") != "fibtui-run":
        raise InputError(path, "not a fibtui run record")
    if from_file:  # a record built from the journal is valid by construction
        from fibtui.core.results import check_run_record

        check_run_record(
            path, record
        )  # a NaN, zero or negative latency is one line, never a statistic
    return RunData(run_id, folder, record)


def run_kind(run: RunData, total_workloads: int | None = None) -> str:
    """gate (the representatives), sweep (every workload) or selection."""
    if run.selection == "all" or (
        total_workloads is not None and len(run.uuids) >= total_workloads
    ):
        return "sweep"
    if run.selection == "rep":
        return "gate"
    return "selection"


def pair_key(
    run: RunData, candidate: str | None, candidate_hash: str | None = None
) -> tuple[str, str, str, str] | None:
    base = run.solutions("baseline")
    cands = run.solutions("candidate")
    if len(base) != 1 or not cands:
        return None
    chosen = [
        c
        for c in cands
        if (candidate is None or c.get("name") == candidate)
        and (candidate_hash is None or c.get("source_hash") == candidate_hash)
    ]
    if not chosen:
        return None
    c = chosen[0]
    return (
        base[0].get("name", ""),
        base[0].get("source_hash", ""),
        c.get("name", ""),
        c.get("source_hash", ""),
    )


def round_runs(
    archive_root: Path,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    candidate_hash: str | None = None,
) -> list[RunData]:
    """The runs of a round: the named ones; else the newest paired run (with ``candidate`` and
    its ``candidate_hash`` when given) and every other paired run of the same baseline and
    candidate sources."""
    from fibtui.core.runs import list_runs

    if run_ids:
        runs = [load_run(archive_root, r) for r in run_ids]
        for r in runs:
            if pair_key(r, candidate) is None:
                what = f"candidate {candidate!r}" if candidate else "a baseline and a candidate"
                raise UsageError(f"run {r.run_id} has no paired {what}")
        return runs
    listings = [x for x in list_runs(archive_root) if x.passed > 0]
    newest: tuple[RunData, tuple[str, str, str, str]] | None = None
    for listing in reversed(listings):
        try:
            run = load_run(archive_root, listing.path.name)
        except (InputError, UsageError):
            continue
        key = pair_key(run, candidate, candidate_hash)
        if key is not None and key[1] != key[3]:
            newest = (run, key)
            break
    if newest is None:
        what = f" with candidate {candidate!r}" if candidate else ""
        what += f" of sources {candidate_hash}" if candidate_hash else ""
        raise UsageError(
            f"no paired run{what} under {archive_root / RUNS_DIR} (run one with fibtui run --baseline DIR "
            "--solution DIR, or name the runs)"
        )
    out = []
    for listing in listings:
        try:
            run = load_run(archive_root, listing.path.name)
        except (InputError, UsageError):
            continue
        key = pair_key(run, newest[1][2], newest[1][3])
        if key == newest[1] and run.record.get("definition") == newest[0].record.get("definition"):
            out.append(run)
    return out
