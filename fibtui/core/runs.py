"""Runs: the plan, the journal on disk, and the run record regenerated from the journal.

Layout of one run (``<workspace>/optimize_ops/runs/<run_id>/``)::

    journal.jsonl     line 1: the header (the plan); then one line per finished job, appended
                      with fsync the moment the job finishes; a final "end" line
    run.json          the run record, regenerated from the journal (never from screen state)
    snapshots/<role>-<name>/   the exact sources that ran (solution.json + files)
    worker.log        everything the worker and the kernels printed (never mixed into results)
    lock              pid of the process running it (absent once it ended)

A job is one (workload, solution, repeat). A paired job of the worker times baseline and
candidate of one workload in the same process, interleaved; it yields two job results.
A run killed at any moment resumes from its journal: finished jobs are never redone or lost, a
torn last line is ignored (and reported), and every job ends up exactly once.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core import numbers
from fibtui.core.dataset import MAX_AXIS, positive_number_problem
from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import (
    append_line,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    read_input,
    read_input_text,
    reserve_unique_path,
)
from fibtui.core.locations import RUNS_DIR as RUNS_DIR
from fibtui.core.locations import runs_root as runs_root
from fibtui.core.measurement import MEASUREMENT_FIELDS, Measurement, ordered_json
from fibtui.core.procs import process_alive
from fibtui.core.status import ALL_STATUSES, INFRA_STATUSES, PASSED, TOOL_STATUSES

if TYPE_CHECKING:
    from fibtui.core.results.table import ResultRow

RECORD_FORMAT = "fibtui-run"
RECORD_VERSION = 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class SolutionRef:
    """A solution as it ran: its name, role and the snapshot folder (relative to the run)."""

    name: str
    role: str  # baseline | candidate
    snapshot: str  # relative path of the snapshot folder inside the run folder
    language: str = ""
    entry_point: str = ""
    source_hash: str = ""
    origin: str = ""  # where it was snapshotted from

    @property
    def key(self) -> str:
        return f"{self.role}:{self.name}"


@dataclass
class JobSpec:
    uuid: str
    axes: dict[str, int]
    solution: str
    role: str
    repeat: int

    @property
    def key(self) -> str:
        return job_key(self.uuid, self.solution, self.role, self.repeat)


def job_key(uuid: str, solution: str, role: str, repeat: int) -> str:
    return f"{repeat}|{role}|{solution}|{uuid}"


@dataclass
class JobResult(Measurement):
    uuid: str
    axes: dict[str, int]
    solution: str
    role: str
    repeat: int
    status: str
    #: how the latency was measured: samples (block medians), kernels seen, clocks...
    timing: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1
    #: which evaluator judged the outputs and its numbers (``evaluator``, ``matched_ratio``,
    #: ``tvd``...); empty for results that were never judged (a build failure, an infra error);
    #: None for a result read from a record older than the field (it stays absent when written)
    correctness: dict[str, Any] | None = field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    wall_s: float | None = None
    #: an UNSUPPORTED_HERE job's reason as data (fibtui.core.gpuarch.MachineLimit's JSON: the
    #: GPU architecture it needs and the one it met, or the headers it needs); None otherwise,
    #: and then absent from the JSON, so records without one keep their bytes
    limit: dict[str, Any] | None = None
    #: what the job did besides its result (fibtui.worker.sidefx): ``output_bytes`` (all the
    #: kernel printed on stdout and stderr), ``output_head``/``output_tail`` (its first and last
    #: 64 KiB), ``output_truncated``, ``leftover_processes`` (``pid``, ``command`` of each process
    #: it left running, ended by the worker); None (absent) when it printed nothing, left nothing
    side_effects: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return job_key(self.uuid, self.solution, self.role, self.repeat)

    @property
    def device(self) -> str | None:
        """The GPU (or ``cpu``) the job ran on, as its worker reported it."""
        env = self.timing.get("environment") if isinstance(self.timing, dict) else None
        device = env.get("gpu") if isinstance(env, dict) else None
        return str(device) if device else None

    @property
    def block_medians_ms(self) -> list[float] | None:
        """The job's block medians (``timing.block_medians_ms``), None when it names none."""
        blocks = self.timing.get("block_medians_ms") if isinstance(self.timing, dict) else None
        return blocks if isinstance(blocks, list) else None

    def to_json(self) -> dict[str, Any]:
        out = ordered_json(self, JOB_JSON_ORDER)
        if self.correctness is None:
            del out["correctness"]
        if self.limit is None:
            del out["limit"]
        if self.side_effects is None:
            del out["side_effects"]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> JobResult:
        known = {f for f in cls.__dataclass_fields__}
        fields_ = {k: v for k, v in obj.items() if k in known}
        fields_.setdefault("correctness", None)
        return cls(**fields_)

    @classmethod
    def from_journal(cls, obj: dict[str, Any]) -> JobResult | None:
        """A result line of a journal, or None when any field has the wrong type (a corrupt line
        is never accepted: a number that is not a number would poison every statistic)."""
        if not (
            _is_text(obj.get("uuid"))
            and _is_text(obj.get("solution"))
            and _is_text(obj.get("role"))
            and _is_int(obj.get("repeat"))
            and obj.get("status") in ALL_STATUSES
        ):
            return None
        if not isinstance(obj.get("axes"), dict) or not all(
            _is_int(v) for v in obj["axes"].values()
        ):
            return None
        for key in ("latency_ms", "reference_latency_ms", "speedup"):  # finite, positive, normal
            if obj.get(key) is not None and positive_number_problem(obj[key], key) is not None:
                return None
        for key in (
            "max_abs_error",
            "max_rel_error",
        ):  # a wrong output's error may be NaN or infinite
            if obj.get(key) is not None and not _is_float(obj[key]):
                return None
        wall = obj.get("wall_s")
        if wall is not None and not (_is_float(wall) and math.isfinite(wall) and wall >= 0):
            return None
        for key in ("error", "started", "finished"):
            if obj.get(key) is not None and not isinstance(obj[key], str):
                return None
        if not isinstance(obj.get("timing", {}), dict) or not _is_int(obj.get("attempt", 1)):
            return None
        correctness = obj.get("correctness", {})
        if not isinstance(correctness, dict) or not isinstance(
            correctness.get("evaluator", ""), str
        ):
            return None
        if obj.get("side_effects") is not None and not isinstance(obj["side_effects"], dict):
            return None
        limit = obj.get("limit")
        if limit is not None and not (
            isinstance(limit, dict) and isinstance(limit.get("kind"), str)
        ):
            return None
        return cls.from_json(obj)


#: the keys of a journal's result line and of run.json's jobs, in their order
JOB_JSON_ORDER = (
    *("uuid", "axes", "solution", "role", "repeat", "status"),
    *MEASUREMENT_FIELDS,
    *("timing", "attempt", "correctness", "started", "finished", "wall_s", "limit"),
    "side_effects",
)


def jobs_of(record: Any) -> list[JobResult]:
    """A run record's jobs (``run.json``'s ``jobs``, read as JSON), typed: the edge where its job
    dicts become :class:`JobResult`; a job fibtui could not have written (a field of the wrong
    type) is left out, as a corrupt journal line is."""
    jobs = record.get("jobs") if isinstance(record, dict) else None
    out: list[JobResult] = []
    for j in jobs if isinstance(jobs, list) else []:
        job = JobResult.from_journal(j) if isinstance(j, dict) else None
        if job is not None:
            out.append(job)
    return out


def _is_text(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def _is_int(v: Any) -> bool:
    """A count, a repeat or an axis value: a non-negative integer that int64 holds."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_AXIS


def _inside_run(v: Any) -> bool:
    """A snapshot folder named relative to the run folder, never leaving it."""
    if not _is_text(v) or v.startswith(("/", "\\")) or "\0" in v:
        return False
    return ".." not in v.replace("\\", "/").split("/")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    """A number a float can hold (an integer past a float's range is not one)."""
    if not _is_number(v):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


@dataclass
class RunHeader:
    run_id: str
    definition: str
    backend: str  # local | interpreter | modal | parity
    timing_kind: str  # cupti | cpu-interpreter | ...
    l2_policy: str  # cold | warm | n/a
    solutions: list[SolutionRef]
    jobs: list[JobSpec]
    repeats: int
    workload_selection: str
    started: str
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = "header"
        out["format"] = RECORD_FORMAT
        out["version"] = RECORD_VERSION
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any], path: Path | None = None) -> RunHeader:
        jobs, sols = obj.get("jobs"), obj.get("solutions")
        problem = None
        if not isinstance(jobs, list) or not all(
            isinstance(j, dict)
            and _is_text(j.get("uuid"))
            and _is_text(j.get("solution"))
            and _is_text(j.get("role"))
            and _is_int(j.get("repeat"))
            and isinstance(j.get("axes"), dict)
            and all(_is_int(v) for v in j["axes"].values())
            for j in jobs
        ):
            problem = "jobs"
        elif not isinstance(sols, list) or not all(
            isinstance(s, dict)
            and _is_text(s.get("name"))
            and _is_text(s.get("role"))
            and _inside_run(s.get("snapshot"))
            for s in sols
        ):
            problem = "solutions"
        elif not all(
            _is_text(obj.get(k)) for k in ("run_id", "definition", "backend", "timing_kind")
        ):
            problem = "run_id, definition, backend, timing_kind"
        elif not all(
            isinstance(obj.get(k, ""), str) for k in ("l2_policy", "workload_selection", "started")
        ):
            problem = "l2_policy, workload_selection, started"
        elif not _is_int(obj.get("repeats", 1)) or not isinstance(obj.get("settings") or {}, dict):
            problem = "repeats, settings"
        if problem is not None:
            raise InputError(
                path, f"journal header is malformed: bad {problem}", line=1, field="header"
            )
        try:
            return cls(
                run_id=obj["run_id"],
                definition=obj["definition"],
                backend=obj["backend"],
                timing_kind=obj["timing_kind"],
                l2_policy=obj.get("l2_policy", "n/a"),
                solutions=[SolutionRef(**s) for s in obj["solutions"]],
                jobs=[JobSpec(**j) for j in obj["jobs"]],
                repeats=int(obj.get("repeats", 1)),
                workload_selection=obj.get("workload_selection", ""),
                started=obj.get("started", ""),
                settings=dict(obj.get("settings") or {}),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(
                path, f"journal header is malformed: {exc}", line=1, field="header"
            ) from None


# --------------------------------------------------------------------------------------------
# Run ids and folders
# --------------------------------------------------------------------------------------------


def new_run_dir(archive_root: Path, definition: str, backend: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    short = definition.split("_")[0] if definition else "run"
    return reserve_unique_path(
        runs_root(archive_root) / f"{stamp}_{short}_{backend}", directory=True
    )


def run_dir(archive_root: Path, run_id: str) -> Path:
    path = runs_root(archive_root) / run_id
    if not (path / "journal.jsonl").is_file():
        known = (
            sorted(
                p.name for p in runs_root(archive_root).glob("*") if (p / "journal.jsonl").is_file()
            )
            if runs_root(archive_root).is_dir()
            else []
        )
        hint = f" (known: {', '.join(known[-5:])})" if known else ""
        raise UsageError(f"no run {run_id!r} under {runs_root(archive_root)}{hint}")
    return path


# --------------------------------------------------------------------------------------------
# The journal
# --------------------------------------------------------------------------------------------


class Journal:
    """Append-only record of a run. Every line is a whole JSON object, written with fsync.

    While a run is going (:meth:`guard`), the journal keeps a copy of its bytes in memory and,
    before every append and at the end, checks that nobody else changed the file (its inode, size
    and modification time; the whole content at the end). A change made by another process - a
    kernel writing into the run folder, say - is undone by rewriting the file from the copy
    (atomically), so a forged line is never accepted and a finished result is never lost.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "journal.jsonl"
        self._copy: bytearray | None = None
        self._stamp: tuple[int, int, int] | None = None
        #: how many times a foreign change was undone
        self.restored = 0

    def write_header(self, header: RunHeader) -> None:
        if self.path.exists() and self.path.stat().st_size:
            raise UsageError(f"journal {self.path} already exists; resume the run instead")
        append_line(self.path, json.dumps(header.to_json(), separators=(",", ":")))

    def guard(self) -> None:
        """From now on, watch the file for changes this object did not make (see the class)."""
        self._copy = bytearray(self.path.read_bytes())
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def verify(self, full: bool = False) -> bool:
        """True when the file holds exactly what was written through this object; otherwise put
        that back and return False. ``full`` compares the content, not only the file's stamp."""
        if self._copy is None:
            return True
        stamp = self._stat()
        if stamp == self._stamp and (not full or self.path.read_bytes() == self._copy):
            return True
        atomic_write_bytes(self.path, bytes(self._copy))
        self._stamp = self._stat()
        self.restored += 1
        return False

    def _append(self, line: str) -> None:
        self.verify()
        append_line(self.path, line)
        if self._copy is None:
            return
        if self._copy and not self._copy.endswith(b"\n"):
            self._copy += b"\n"
        self._copy += line.encode("utf-8") + b"\n"
        self._stamp = self._stat()
        if self._stamp is None or self._stamp[1] != len(self._copy):
            self.verify(full=True)  # someone wrote between the check and our append

    def append_result(self, result: JobResult) -> None:
        line = {"kind": "result", **result.to_json()}
        self._append(json.dumps(line, separators=(",", ":"), default=str))

    def append_retry(self, keys: list[str], reason: str = "retry requested") -> None:
        """Reopen these jobs: their earlier results are superseded and a resume runs them again
        (a user's explicit retry of failed jobs; the run keeps one journal)."""
        self._append(json.dumps({"kind": "retry", "keys": keys, "reason": reason, "at": now_iso()}))

    def append_end(self, state: str, reason: str = "", **extra: Any) -> None:
        self._append(
            json.dumps({"kind": "end", "state": state, "reason": reason, "at": now_iso(), **extra})
        )

    def append_stop(self, stop: dict[str, Any]) -> None:
        """An adaptive run stops repeating a workload (``uuid``, ``repeats`` done, ``reason``:
        fibtui.core.sequential): its jobs not run yet are settled, never pending."""
        self._append(json.dumps({"kind": "stop", **stop, "at": now_iso()}))

    def read(self) -> JournalContents:
        return read_journal(self.path)


@dataclass
class JournalContents:
    header: RunHeader
    results: dict[str, JobResult]  # job key -> result (the first valid line per job)
    end: dict[str, Any] | None
    corrupt_lines: list[int]
    duplicate_lines: list[int]
    #: adaptive runs: uuid -> the stop line of a workload no longer repeated
    stops: dict[str, dict[str, Any]] = field(default_factory=dict)

    def skipped_keys(self) -> set[str]:
        """Jobs an adaptive run decided not to run: the missing jobs of stopped workloads."""
        return {
            j.key for j in self.header.jobs if j.uuid in self.stops and j.key not in self.results
        }


def read_journal(path: Path) -> JournalContents:
    """Read a run's journal. A torn or corrupt line (a latency that is not a finite, positive,
    normal number included) is left out and listed; a path that is not a regular file (a FIFO, a
    device) is refused before it is read."""
    data = read_input(Path(path), folder_message="is a folder; give a run's journal.jsonl")
    lines = data.split(b"\n")
    header: RunHeader | None = None
    results: dict[str, JobResult] = {}
    end: dict[str, Any] | None = None
    corrupt: list[int] = []
    duplicates: list[int] = []
    stops: dict[str, dict[str, Any]] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or a number past 4300 digits
            corrupt.append(number)
            continue
        if not isinstance(obj, dict):
            corrupt.append(number)
            continue
        kind = obj.get("kind")
        if kind == "header":
            if header is None:
                header = RunHeader.from_json(obj, path)
            continue
        if kind == "end":
            if (
                not isinstance(obj.get("state"), str)
                or not isinstance(obj.get("at", ""), str)
                or not isinstance(obj.get("reason", ""), str)
            ):
                corrupt.append(number)
                continue
            end = obj
            continue
        if kind == "retry":
            keys = obj.get("keys")
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                corrupt.append(number)
                continue
            for key in keys:
                results.pop(key, None)
                stops.pop(key.rsplit("|", 1)[-1], None)  # a reopened job reopens its workload
            end = None  # the run is open again
            continue
        if kind == "stop":
            if not _is_text(obj.get("uuid")) or not _is_int(obj.get("repeats")):
                corrupt.append(number)
                continue
            stops[obj["uuid"]] = obj
            continue
        if kind != "result":
            corrupt.append(number)
            continue
        result = JobResult.from_journal({k: v for k, v in obj.items() if k != "kind"})
        if result is None:
            corrupt.append(number)
            continue
        if result.key in results:
            duplicates.append(number)
            continue
        results[result.key] = result
    if header is None:
        raise InputError(
            path, "journal has no header line (the run never started)", line=1, field="header"
        )
    known = {j.key for j in header.jobs}
    stray = [k for k in results if k not in known]
    for k in stray:
        results.pop(k)
    return JournalContents(header, results, end, corrupt, duplicates, stops)


# --------------------------------------------------------------------------------------------
# Run state and record
# --------------------------------------------------------------------------------------------


def lock_path(folder: Path) -> Path:
    return folder / "lock"


def lock_holder(folder: Path) -> int:
    """The pid written in the run's lock file; 0 when there is none (or it cannot be read)."""
    try:
        return int(lock_path(folder).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def take_lock(folder: Path) -> None:
    pid = lock_holder(folder)
    if pid and pid != os.getpid() and process_alive(pid):
        raise UsageError(f"run {folder.name} is being run by process {pid}")
    # whole or absent (through a temp file), but not fsynced: after a crash the pid it names is
    # dead, which is what a lost lock says too (an fsync pair took ~40 ms of a watch gate's
    # start on the H200)
    atomic_write_text(lock_path(folder), str(os.getpid()), durable=False)


def release_lock(folder: Path) -> None:
    try:
        lock_path(folder).unlink()
    except FileNotFoundError:
        pass


def run_state(folder: Path, contents: JournalContents | None = None) -> str:
    """running | interrupted | complete | failed (| cancelled)."""
    contents = contents or read_journal(folder / "journal.jsonl")
    return _state(
        folder,
        None if contents.end is None else contents.end.get("state"),
        len(contents.results),
        len(contents.header.jobs) - len(contents.skipped_keys()),
        any(r.status in INFRA_STATUSES for r in contents.results.values()),
    )


def _state(folder: Path, end: str | None, done: int, total: int, infra_failed: bool) -> str:
    """A run's state from its journal's end line's state (None: no end line), its finished and
    planned jobs, whether a job failed for the infrastructure, and its lock."""
    if end is None and process_alive(lock_holder(folder)):
        return "running"
    if done < total:
        return "interrupted" if end != "cancelled" else "cancelled"
    return "failed" if infra_failed else "complete"


@dataclass
class SolutionTally:
    """One solution's line of a run record's summary (``summary.per_solution``)."""

    name: str
    role: str
    jobs: int
    done: int
    passed: int
    mean_latency_ms: float | None
    p95_latency_ms: float | None


@dataclass
class RunSummary:
    """The counts of a run record (``summary``): every job, finished or not."""

    total: int
    done: int
    passed: int
    failed: int
    complete: bool
    per_solution: dict[str, SolutionTally]  # "role:name" -> its tally
    #: jobs in the plan, and those an adaptive run settled without running (absent in records
    #: written before adaptive repeats: then None, and not written back)
    planned: int | None = None
    skipped: int | None = None


@dataclass
class JournalNotes:
    """What reading the journal left out (``journal``): 1-based line numbers."""

    corrupt_lines: list[int]
    duplicate_lines: list[int]


@dataclass
class RunRecord:
    """A run record: ``run.json``, derived from the journal alone (:func:`build_record`).

    :meth:`to_json` is the file's content, key for key and in the same order, so a record read
    with :meth:`from_json` and written again is the same bytes."""

    run_id: str
    definition: str
    backend: str
    timing_kind: str
    l2_policy: str
    state: str  # running | interrupted | cancelled | complete | failed
    started: str
    finished: str | None
    repeats: int
    workload_selection: str
    settings: dict[str, Any]
    environment: dict[str, Any]
    solutions: list[SolutionRef]
    jobs: list[JobResult]  # the finished jobs, in the plan's order
    summary: RunSummary
    journal: JournalNotes
    #: an adaptive run's plan and stops (``adaptive``); None for a fixed design
    adaptive: dict[str, Any] | None = None
    format: str = RECORD_FORMAT
    version: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in _RECORD_PLAIN}
        out["solutions"] = [asdict(s) for s in self.solutions]
        out["jobs"] = [j.to_json() for j in self.jobs]
        summary = asdict(self.summary)
        for key in ("planned", "skipped"):
            if summary[key] is None:
                del summary[key]
        out["summary"] = summary
        if self.adaptive is not None:
            out["adaptive"] = self.adaptive
        out["journal"] = asdict(self.journal)
        return out

    @classmethod
    def from_json(cls, obj: Any, path: Path | None = None) -> RunRecord:
        """A record read back (``run.json``); a malformed one is one :class:`InputError`.

        The values are taken as they are: :func:`fibtui.core.results.check_run_record` is
        the check of a record's numbers."""
        try:
            plain = {key: obj[key] for key in _RECORD_PLAIN}
            summary = obj["summary"]
            tallies = {k: SolutionTally(**v) for k, v in summary["per_solution"].items()}
            record = cls(
                **plain,
                solutions=[SolutionRef(**s) for s in obj["solutions"]],
                jobs=[JobResult.from_json(j) for j in obj["jobs"]],
                summary=RunSummary(**{**summary, "per_solution": tallies}),
                journal=JournalNotes(**obj["journal"]),
                adaptive=obj.get("adaptive"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(path, f"not a fibtui run record: {exc}") from None
        for key in ("settings", "environment"):
            if not isinstance(plain[key], dict):
                raise InputError(path, f"not a fibtui run record: {key} is not an object")
        return record


#: RunRecord's fields that run.json holds as they are, in the file's order (the structured ones
#: follow them: solutions, jobs, summary, journal)
_RECORD_PLAIN = (
    *("format", "version", "run_id", "definition", "backend", "timing_kind", "l2_policy"),
    *("state", "started", "finished", "repeats", "workload_selection", "settings", "environment"),
)


def build_record(folder: Path, contents: JournalContents | None = None) -> RunRecord:
    """The run record (run.json), derived from the journal alone."""
    contents = contents or read_journal(folder / "journal.jsonl")
    h = contents.header
    order = {j.key: i for i, j in enumerate(h.jobs)}
    results = sorted(contents.results.values(), key=lambda r: order.get(r.key, 1 << 30))
    passed = sum(1 for r in results if r.status == PASSED)
    skipped = contents.skipped_keys()
    total = len(h.jobs) - len(skipped)
    return RunRecord(
        run_id=h.run_id,
        definition=h.definition,
        backend=h.backend,
        timing_kind=h.timing_kind,
        l2_policy=h.l2_policy,
        state=run_state(folder, contents),
        started=h.started,
        finished=(contents.end or {}).get("at"),
        repeats=h.repeats,
        workload_selection=h.workload_selection,
        settings=h.settings,
        environment=_environment(results),
        solutions=list(h.solutions),
        jobs=results,
        summary=RunSummary(
            total=total,
            done=len(results),
            passed=passed,
            failed=len(results) - passed,
            complete=passed == total and total > 0,
            per_solution={ref.key: _tally(ref, h.jobs, results, skipped) for ref in h.solutions},
            planned=len(h.jobs),
            skipped=len(skipped),
        ),
        journal=JournalNotes(list(contents.corrupt_lines), list(contents.duplicate_lines)),
        adaptive=_adaptive(contents).get("adaptive"),
    )


def _tally(
    ref: SolutionRef, planned: list[JobSpec], results: list[JobResult], skipped: set[str]
) -> SolutionTally:
    mine = [r for r in results if r.solution == ref.name and r.role == ref.role]
    lat = [r.latency_ms for r in mine if r.status == PASSED and r.latency_ms is not None]
    return SolutionTally(
        name=ref.name,
        role=ref.role,
        jobs=sum(
            1
            for j in planned
            if j.solution == ref.name and j.role == ref.role and j.key not in skipped
        ),
        done=len(mine),
        passed=sum(1 for r in mine if r.status == PASSED),
        mean_latency_ms=numbers.mean(lat),
        p95_latency_ms=numbers.p95(lat),
    )


def _adaptive(contents: JournalContents) -> dict[str, Any]:
    """``adaptive`` of an adaptive run's record: its plan, why each workload stopped (the journal's
    stop lines) and why the run stopped (its end line); nothing for a fixed design."""
    plan = contents.header.settings.get("adaptive")
    if not isinstance(plan, dict):
        return {}
    end = contents.end or {}
    return {
        "adaptive": {
            "plan": plan,
            "stopped": end.get("stopped") or (end.get("state") if end else None),
            "reason": end.get("reason") if end else None,
            "workloads": {
                uuid: {k: v for k, v in stop.items() if k not in ("kind", "uuid")}
                for uuid, stop in contents.stops.items()
            },
        }
    }


@dataclass(frozen=True)
class NotJudged:
    """Jobs this machine could not judge for one reason (UNSUPPORTED_HERE rows of one kind and
    need): how many, of which solutions and workloads, and whether Modal's B200 has what they
    need (then ``fibtui run --send-unsupported RUN_ID`` runs them there, in the same run)."""

    kind: str  # arch | headers | tool
    needs: tuple[str, ...]
    has: str | None
    uuids: tuple[str, ...]
    solutions: tuple[str, ...]
    jobs: int
    evidence: str
    on_b200: bool

    def describe(self) -> str:
        from fibtui.core.numbers import count

        who = f"{count(len(self.uuids), 'workload')} of {', '.join(self.solutions)}"
        if self.kind == "arch":
            need = " or ".join(self.needs) if self.needs else "another GPU architecture"
            text = f"{who} need {need}; this GPU is {self.has or 'another architecture'}"
        elif self.kind == "headers":
            text = f"{who} need the CUTLASS/CuTe headers {', '.join(self.needs[:2])}"
        else:
            text = f"{who} cannot run on this machine"
        return text + ": not judged here, not a kernel failure"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "needs": list(self.needs),
            "has": self.has,
            "workloads": list(self.uuids),
            "solutions": list(self.solutions),
            "jobs": self.jobs,
            "evidence": self.evidence,
            "on_b200": self.on_b200,
        }


def not_judged(jobs: list[JobResult]) -> list[NotJudged]:
    """The UNSUPPORTED_HERE jobs grouped by what they lack (a GPU architecture, headers, a
    tool), largest group first."""
    from fibtui.core.gpuarch import B200_ARCH, MachineLimit

    groups: dict[tuple[str, tuple[str, ...], str | None], list[JobResult]] = {}
    evidence: dict[tuple[str, tuple[str, ...], str | None], str] = {}
    for job in jobs:
        if job.status not in TOOL_STATUSES:
            continue
        limit = MachineLimit.from_json(job.limit) or MachineLimit(
            "tool", evidence=(job.error or "")[:300]
        )
        key = (limit.kind, limit.needs, limit.has)
        groups.setdefault(key, []).append(job)
        evidence.setdefault(key, limit.evidence or (job.error or "")[:300])
    out = []
    for (kind, needs, has), members in groups.items():
        limit = MachineLimit(kind, needs, has)
        out.append(
            NotJudged(
                kind,
                needs,
                has,
                tuple(dict.fromkeys(j.uuid for j in members)),
                tuple(dict.fromkeys(j.solution for j in members)),
                len(members),
                evidence[(kind, needs, has)],
                limit.runs_on(B200_ARCH),
            )
        )
    return sorted(out, key=lambda g: -g.jobs)


@dataclass(frozen=True)
class HostPhases:
    """The worker's host time a job, by phase (``timing.job_phases_ms``, fibtui.worker.phases):
    the median over the run's jobs of each phase, in the order the worker wrote them."""

    jobs: int
    median_ms: dict[str, float]

    @property
    def total_ms(self) -> float:
        return sum(self.median_ms.values())

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in self.median_ms.items() if v >= 0.05)
        return f"host time a job (median of {self.jobs}, ms): {parts}"


def host_phases(jobs: list[JobResult]) -> HostPhases | None:
    """The median host time per phase over the run's worker jobs (a job's phases are recorded
    on each of its solutions' rows: counted once per workload and repeat), or None when no row carries them (a run of an older fibtui, or nothing measured)."""
    per_job: dict[tuple[str, int], dict[str, float]] = {}
    for job in jobs:
        phases = job.timing.get("job_phases_ms") if isinstance(job.timing, dict) else None
        if not isinstance(phases, dict):
            continue
        clean = {
            str(k): float(v)
            for k, v in phases.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if clean:
            per_job[(job.uuid, job.repeat)] = clean
    if not per_job:
        return None
    names: list[str] = []
    for phases in per_job.values():
        names += [n for n in phases if n not in names]
    return HostPhases(
        len(per_job),
        {n: statistics.median([p.get(n, 0.0) for p in per_job.values()]) for n in names},
    )


def _environment(results: list[JobResult]) -> dict[str, Any]:
    for r in results:
        env = r.timing.get("environment") if isinstance(r.timing, dict) else None
        if env and isinstance(env, dict):
            return env
    return {}


def write_record(folder: Path, contents: JournalContents | None = None) -> RunRecord:
    record = build_record(folder, contents)
    atomic_write_json(folder / "run.json", record.to_json())
    return record


@dataclass(frozen=True)
class RecordFacts:
    """What a run's run.json says that readers of many runs check before they read it whole."""

    #: its timing kind and the distinct workloads of its first candidate's rows, when fibtui
    #: reads it as a run record (timing_kind None: it does not)
    timing_kind: str | None
    workloads: int
    #: one baseline and a candidate of the same sources by hash (an A/A pair), by its solutions
    same_code_pair: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Any) -> RecordFacts | None:
        if not isinstance(obj, dict) or set(obj) != {"timing_kind", "workloads", "same_code_pair"}:
            return None
        kind, n, pair = obj["timing_kind"], obj["workloads"], obj["same_code_pair"]
        if not isinstance(kind, (str, type(None))) or not _is_int(n) or not isinstance(pair, bool):
            return None
        return cls(kind, n, pair)


@dataclass
class RunListing:
    run_id: str
    state: str
    jobs_done: int
    jobs_total: int
    backend: str
    started: str
    definition: str
    path: Path
    passed: int = 0
    #: what its run.json says (None: there is none), for readers that pass over runs (not printed)
    record: RecordFacts | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("record")
        out["path"] = str(self.path)
        return out


#: the shape of the listing cache's entries (fibtui.core.cachefile): bumped whenever it changes
_LISTING_CACHE_VERSION = 1


def list_runs(archive_root: Path) -> list[RunListing]:
    """Every run under ``<archive>/runs``, oldest first. What a listing needs of each journal and
    run.json is kept in the user's cache folder under the file's key
    (:mod:`fibtui.core.cachefile`): neither is parsed again until it changes."""
    root = runs_root(archive_root)
    out: list[RunListing] = []
    if not root.is_dir():
        return out
    cache = _ListingCache(root)
    for folder in sorted(root.iterdir()):
        journal = folder / "journal.jsonl"
        if folder.name.startswith(".") or not journal.is_file():
            continue  # a hidden folder is an archive copy still being made (or one that was cut short)
        facts = cache.journal_facts(folder.name, journal)
        if facts is not None:
            out.append(_listing(folder, facts, cache.record_facts(folder.name, folder)))
    cache.save()
    return out


def _journal_facts(contents: JournalContents) -> dict[str, Any]:
    """What a run listing keeps of a journal (all that :func:`list_runs` reads of it)."""
    h = contents.header
    return {
        "run_id": h.run_id,
        "definition": h.definition,
        "backend": h.backend,
        "started": h.started,
        "end": None if contents.end is None else contents.end.get("state"),
        "done": len(contents.results),
        "total": len(h.jobs) - len(contents.skipped_keys()),
        "passed": sum(1 for r in contents.results.values() if r.status == PASSED),
        "infra_failed": any(r.status in INFRA_STATUSES for r in contents.results.values()),
    }


_FACT_TYPES: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("run_id", "definition", "backend", "started"), (str,)),
    **dict.fromkeys(("done", "total", "passed"), (int,)),
    "end": (str, type(None)),
    "infra_failed": (bool,),
}


def _journal_facts_ok(facts: Any) -> bool:
    """Are cached journal facts of the shape :func:`_journal_facts` makes?"""
    if not isinstance(facts, dict) or set(facts) != set(_FACT_TYPES):
        return False
    return all(
        isinstance(facts[k], types) and (bool in types or not isinstance(facts[k], bool))
        for k, types in _FACT_TYPES.items()
    )


def _record_facts(path: Path) -> RecordFacts:
    """What ``path`` (a run.json) says, read as :func:`latest_rows` and
    :func:`fibtui.core.stats.aa_sessions` read it."""
    # the module, not the package: fibtui.core.results reads journals through this module
    from fibtui.core.dataset import parse_json_text
    from fibtui.core.results.fibtui_run import read_run_record, sniff_record

    try:  # the file is read once: its solutions leniently, its table as load_run_record does
        text = read_input_text(path)
    except InputError:
        return RecordFacts(None, 0, False)
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raw = None
    sols = raw.get("solutions") if isinstance(raw, dict) else None
    sols = [s for s in sols if isinstance(s, dict)] if isinstance(sols, list) else []
    base = [s["source_hash"] for s in sols if s.get("role") == "baseline" and s.get("source_hash")]
    cands = [
        s["source_hash"] for s in sols if s.get("role") == "candidate" and s.get("source_hash")
    ]
    pair = len(base) == 1 and base[0] in cands
    try:
        data = parse_json_text(path, text, unique_keys=True)
        if not sniff_record(data):
            raise InputError(path, "not a fibtui run record")
        table = read_run_record(path, data)
    except InputError:
        return RecordFacts(None, 0, pair)
    kind = table.meta.get("timing_kind")
    rows = _first_candidate_rows(table.rows)
    return RecordFacts(kind if isinstance(kind, str) else None, len({r.uuid for r in rows}), pair)


def _first_candidate_rows(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows of a run's first candidate (the solution under test; of its first solution
    when it names no candidate)."""
    candidates = [r for r in rows if r.role == "candidate"] or rows
    first = next((r.solution for r in candidates if r.solution), None)
    return [r for r in candidates if r.solution == first]


def _listing(folder: Path, f: dict[str, Any], record: RecordFacts | None) -> RunListing:
    return RunListing(
        run_id=f["run_id"],
        state=_state(folder, f["end"], f["done"], f["total"], f["infra_failed"]),
        jobs_done=f["done"],
        jobs_total=f["total"],
        backend=f["backend"],
        started=f["started"],
        definition=f["definition"],
        path=folder,
        passed=f["passed"],
        record=record,
    )


class _ListingCache:
    """The listing facts of one runs folder by run folder name: its journal's and its run.json's,
    each under the file's key. A file whose key differs (or that is still changing) is read."""

    def __init__(self, root: Path) -> None:
        from fibtui.core import cachefile

        self._cf = cachefile
        name = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        self.path = cachefile.cache_folder("runs") / f"{name}.json"
        self.old = cachefile.read(self.path, _LISTING_CACHE_VERSION) or {}
        self.new: dict[str, dict[str, Any]] = {}

    def _cached(self, name: str, part: str, key: list[int] | None) -> Any:
        entry = self.old.get(name)
        if key is None or not isinstance(entry, dict) or not isinstance(entry.get(part), dict):
            return None
        return entry[part].get("facts") if entry[part].get("key") == key else None

    def _keep(self, name: str, part: str, key: list[int] | None, facts: Any) -> None:
        if self._cf.settled(key):
            self.new.setdefault(name, {})[part] = {"key": key, "facts": facts}

    def journal_facts(self, name: str, journal: Path) -> dict[str, Any] | None:
        key = self._cf.file_key(journal)  # before reading: a later change gives another key
        facts = self._cached(name, "journal", key)
        if not _journal_facts_ok(facts):
            try:
                facts = _journal_facts(read_journal(journal))
            except InputError:
                return None
        self._keep(name, "journal", key, facts)
        return facts

    def record_facts(self, name: str, folder: Path) -> RecordFacts | None:
        path = folder / "run.json"
        if not path.is_file():
            return None
        key = self._cf.file_key(path)
        facts = RecordFacts.from_json(self._cached(name, "record", key))
        if facts is None:
            facts = _record_facts(path)
        self._keep(name, "record", key, facts.to_json())
        return facts

    def save(self) -> None:
        if self.new != self.old:
            self._cf.write(self.path, _LISTING_CACHE_VERSION, self.new)


def recent_job_seconds(
    archive_root: Path, definition: str, timing_kind: str, last_runs: int = 5
) -> list[dict[tuple[str, int], float]]:
    """Wall seconds per solution job of the newest ``last_runs`` runs of ``definition`` with
    this timing kind that have any, newest first: per run, (workload, repeat) -> seconds (a
    paired group's wall time shared by its solutions). Reads files: call it from a worker."""
    out: list[dict[tuple[str, int], float]] = []
    for listing in reversed(list_runs(archive_root)):
        if len(out) >= last_runs:
            break
        if listing.definition != definition:
            continue
        try:
            contents = read_journal(listing.path / "journal.jsonl")
        except InputError:
            continue
        if contents.header.timing_kind != timing_kind:
            continue
        groups: dict[tuple[str, int], list[float | None]] = {}
        for r in contents.results.values():
            groups.setdefault((r.uuid, r.repeat), []).append(r.wall_s)
        run: dict[tuple[str, int], float] = {}
        for key, walls in groups.items():
            known = [w for w in walls if isinstance(w, (int, float)) and w > 0]
            if known:
                run[key] = max(known) / len(walls)
        if run:
            out.append(run)
    return out


def history_seconds_per_job(
    archive_root: Path, definition: str, timing_kind: str = "cupti", last_runs: int = 5
) -> tuple[float, str] | None:
    """Median wall seconds per solution job over the newest runs of ``definition`` with this
    timing kind (a paired group's wall time is shared by its solutions), with where it came from.
    GPU and CPU-interpreter runs are never mixed: one says nothing about the other's wall time."""
    runs = recent_job_seconds(archive_root, definition, timing_kind, last_runs)
    per_job = [seconds for run in runs for seconds in run.values()]
    if not per_job:
        return None
    median = numbers.median(per_job)
    assert median is not None
    where = "GPU" if timing_kind == "cupti" else timing_kind
    return (
        median,
        f"median of {len(per_job)} job(s) in {len(runs)} past {where} run(s) of this definition",
    )


def failed_keys(contents: JournalContents) -> list[str]:
    return [k for k, r in contents.results.items() if r.status != PASSED]


def latest_rows(
    archive_root: Path,
    definition: str,
    timing_kinds: tuple[str, ...] = ("cupti",),
    workloads: int | None = None,
) -> tuple[list[ResultRow], str, str | None] | None:
    """Result rows of the newest run of ``definition`` measured on a GPU, as
    ``(rows, label, hardware)``, or None. With ``workloads`` (the definition's count), the newest
    run that covered every workload wins over newer partial ones (a gate). Rows are the first
    candidate's (the solution under test); CPU-interpreter runs are skipped, since their latencies
    say nothing about the GPU."""
    found = latest_run(archive_root, definition, timing_kinds, workloads)
    return found[1] if found is not None else None


def latest_run(
    archive_root: Path,
    definition: str,
    timing_kinds: tuple[str, ...] = ("cupti",),
    workloads: int | None = None,
) -> tuple[RunListing, tuple[list[ResultRow], str, str | None]] | None:
    """:func:`latest_rows`'s answer with the run it comes from. Only that run's record is read:
    the others are passed over by what their run.json said (:class:`RecordFacts`)."""
    partial: list[RunListing] = []  # newest first: the fallback when no run covers every workload
    for listing in _gpu_runs(archive_root, definition, timing_kinds):
        assert listing.record is not None
        if workloads is None or listing.record.workloads >= workloads:
            found = candidate_rows(listing, timing_kinds)
            if found is not None:
                return listing, found
        else:
            partial.append(listing)
    for listing in partial:
        found = candidate_rows(listing, timing_kinds)
        if found is not None:
            return listing, found
    return None


def newest_covering(
    archive_root: Path, definition: str, workloads: int, timing_kinds: tuple[str, ...] = ("cupti",)
) -> RunListing | None:
    """The run :func:`latest_rows` answers from when one covers every one of the ``workloads``
    workloads (by what its run.json said; nothing is read): None when no run does."""
    for listing in _gpu_runs(archive_root, definition, timing_kinds):
        assert listing.record is not None
        if listing.record.workloads >= workloads:
            return listing
    return None


def _gpu_runs(
    archive_root: Path, definition: str, timing_kinds: tuple[str, ...]
) -> Iterator[RunListing]:
    """Newest first, the runs of ``definition`` with a PASSED job whose run.json is a run record
    of one of ``timing_kinds``."""
    for listing in reversed(list_runs(archive_root)):
        if listing.definition != definition or listing.passed == 0:
            continue
        facts = listing.record
        if facts is None or facts.timing_kind not in timing_kinds:
            continue  # no run.json, one that is not a run record, or another timing kind
        yield listing


def candidate_rows(
    listing: RunListing, timing_kinds: tuple[str, ...] = ("cupti",)
) -> tuple[list[ResultRow], str, str | None] | None:
    """(rows of the run's first candidate, label, hardware) from its run.json, or None when it
    cannot be read (or holds another timing kind)."""
    # the module, not the package: fibtui.core.results reads journals through this module
    from fibtui.core.results.fibtui_run import load_run_record

    try:
        table = load_run_record(listing.path / "run.json")
    except InputError:
        return None
    if table.meta.get("timing_kind") not in timing_kinds:
        return None
    rows = _first_candidate_rows(table.rows)
    first = rows[0].solution if rows else None
    hardware = (table.meta.get("environment") or {}).get("gpu")
    return rows, f"run {listing.run_id} ({first}, {table.meta.get('timing_kind')})", hardware
