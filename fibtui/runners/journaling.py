"""Recording finished jobs, shared by every runner (local GPU, CPU interpreter, Modal).

One place turns a worker's result into a :class:`~fibtui.core.runs.JobResult`, appends it to the
journal (fsync) and emits :class:`~fibtui.runners.events.JobFinished`; one place closes a run
(the journal's end line, run.json regenerated from the journal, :class:`RunFinished`). Whatever
runs the jobs, the journal and the run record therefore have the same shape.

A run stops in one of two ways besides finishing: the user cancels it (the TUI's ``c``, a newer save
in watch mode: the run reads ``cancelled``), or something interrupts it (SIGINT, SIGTERM, SIGHUP,
the TUI closing: the run reads ``interrupted``). Either way the cancel event is set before any
worker is stopped, and a job whose worker the runner stopped stays pending (never a result):
``fibtui run --resume`` redoes it. :func:`interrupt` sets the cancel event as an interrupt.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fibtui.core.eta import EtaModel
from fibtui.core.fsio import atomic_write_text
from fibtui.core.runs import (
    JobResult,
    Journal,
    RunHeader,
    RunRecord,
    job_key,
    now_iso,
    read_journal,
    write_record,
)
from fibtui.core.status import INFRA_STATUSES, PASSED
from fibtui.runners.events import EventSink, JobFinished, LogLine, RunFinished

_RESTORED = (
    "the run's journal was changed by another process (a kernel writing into the run folder?); "
    "it was restored from what the runner wrote"
)


class SolutionIds:
    """Worker-side ids of a run's solutions (``<role>-<index>``, in header order) and the
    solution objects the worker loads, each carrying its id."""

    def __init__(self, header: RunHeader, solutions: dict[str, dict[str, Any]]) -> None:
        self.sid_of: dict[tuple[str, str], str] = {}
        self.ref_of: dict[str, tuple[str, str]] = {}
        self.solutions: list[dict[str, Any]] = []
        for i, ref in enumerate(header.solutions):
            sid = f"{ref.role}-{i}"
            self.sid_of[(ref.role, ref.name)] = sid
            self.ref_of[sid] = (ref.role, ref.name)
            self.solutions.append({"id": sid, **solutions[ref.key]})


def pending_groups(
    header: RunHeader, done_keys: set[str], sid_of: dict[tuple[str, str], str]
) -> dict[tuple[str, int], list[str]]:
    """Jobs not yet in the journal, grouped by (workload, repeat): the solutions of one group are
    timed together (the paired baseline and candidate of a workload never run apart)."""
    groups: dict[tuple[str, int], list[str]] = {}
    for job in header.jobs:
        if job.key in done_keys:
            continue
        groups.setdefault((job.uuid, job.repeat), []).append(sid_of[(job.role, job.solution)])
    return groups


#: seconds of results before an ETA is shown
ETA_SETTLE_S = 1.0

_INTERRUPTED_ATTR = "fibtui_interrupted"


def interrupt(cancel: threading.Event, reason: str, recorder: JobRecorder | None = None) -> None:
    """Stop a run because something interrupted it (a signal, the app closing), not because the
    user cancelled it: the run then reads ``interrupted``, not ``cancelled``. The reason is kept on
    the event (and on ``recorder``, for a runner that does not read the event) before the event is
    set, so a runner that sees the event set also sees why. Safe in a signal handler: it neither
    prints nor takes a lock a handler could be interrupted inside (``Event.set`` aside)."""
    if not cancel.is_set():
        setattr(cancel, _INTERRUPTED_ATTR, reason)
        if recorder is not None:
            recorder.interrupted = reason
    cancel.set()


def interrupted_by(cancel: threading.Event | None) -> str | None:
    """Why ``cancel`` was set when it was set by :func:`interrupt`; None for a user's cancel."""
    reason = getattr(cancel, _INTERRUPTED_ATTR, None) if cancel is not None else None
    return reason if isinstance(reason, str) else None


class JobRecorder:
    """Appends finished jobs to a run's journal and keeps the progress counters."""

    def __init__(self, folder: Path, header: RunHeader, ref_of: dict[str, tuple[str, str]]) -> None:
        self.folder = folder
        self.header = header
        self.ref_of = ref_of
        self.journal = Journal(folder)
        self.axes = {j.uuid: j.axes for j in header.jobs}
        self._lock = threading.Lock()
        self.done = 0
        self.passed = 0
        self.failed = 0
        #: set by :func:`interrupt`: the run was interrupted (a signal), not cancelled by the user
        self.interrupted: str | None = None
        #: when this session's first result came: the ETA is paced from there, so start-up (worker
        #: start, imports, first compiles) does not inflate it
        self._t_first: float | None = None
        #: the axes of each job not finished yet, and the session's cost model (fibtui.core.eta)
        self._left = {j.key: dict(j.axes) for j in header.jobs}
        #: the ETA counts groups, not jobs: the jobs of one (workload, repeat) are measured
        #: together (a pair interleaves its solutions in one worker and shares one wall time), so
        #: a group's cost is known once all of its jobs are in; a result that leaves its group
        #: open carries the last ETA, less the time since
        self._group_of = {j.key: (j.uuid, j.repeat) for j in header.jobs}
        self._group_left: dict[tuple[str, int], int] = {}
        for g in self._group_of.values():
            self._group_left[g] = self._group_left.get(g, 0) + 1
        self._group_walls: dict[tuple[str, int], list[float]] = {}
        self._last_eta: tuple[float, float] | None = None  # (seconds left, when)
        self._eta = self._new_eta()
        #: every result of the run (the journal's and this session's): an adaptive run's rule reads them
        self.results: dict[str, JobResult] = {}
        #: adaptive runs: uuid -> the stop line of each workload no longer repeated
        self.stops: dict[str, dict[str, Any]] = {}
        #: jobs an adaptive run will not run (its stopped workloads' missing jobs)
        self.skipped: set[str] = set()

    def resume(self) -> set[str]:
        """Read what the journal already holds; returns the keys of settled jobs (finished, or
        not needed by an adaptive run)."""
        contents = read_journal(self.journal.path)
        self.journal.guard()
        # an infrastructure failure says nothing about the kernel: a resume runs the job again
        # (a retry line reopens it, so the journal keeps one result per job)
        infra = sorted(k for k, r in contents.results.items() if r.status in INFRA_STATUSES)
        if infra:
            self.journal.append_retry(infra, "infrastructure failure: redone on resume")
            contents = read_journal(self.journal.path)
        done_keys = set(contents.results)
        self.results = dict(contents.results)
        self.stops = dict(contents.stops)
        self.skipped = contents.skipped_keys()
        self.done = len(done_keys)
        self.passed = sum(1 for r in contents.results.values() if r.status == PASSED)
        self.failed = self.done - self.passed
        self._t_first = None
        for key in done_keys | self.skipped:
            self._pop_left(key)
        self._eta = self._new_eta()
        self._last_eta = None
        return done_keys | self.skipped

    def stop(self, stop: dict[str, Any]) -> None:
        """An adaptive run stops repeating a workload: the stop line (fsync), and its jobs not run
        yet leave the total."""
        uuid = str(stop["uuid"])
        with self._lock:
            self.journal.append_stop(stop)
            self.stops[uuid] = stop
            for j in self.header.jobs:
                if j.uuid == uuid and j.key not in self.results:
                    self.skipped.add(j.key)
                    self._pop_left(j.key)

    def _new_eta(self) -> EtaModel:
        """The session's cost model: on the CPU interpreter a job's time grows with its
        workload's size from the first sample on (fibtui.core.eta, ``prior``)."""
        return EtaModel(prior="size" if self.header.timing_kind == "cpu-interpreter" else None)

    def _pop_left(self, key: str) -> bool:
        """Take a job off what is left; True when that closed its group (nothing of it left)."""
        if self._left.pop(key, None) is None:
            return False
        g = self._group_of.get(key)
        if g is None:
            return False
        self._group_left[g] -= 1
        return self._group_left[g] == 0

    def _groups_left(self) -> list[dict[str, Any]]:
        return [dict(self.axes.get(u, {})) for (u, _), n in self._group_left.items() if n > 0]

    @property
    def total(self) -> int:
        """The jobs that count: the plan's, less those an adaptive run decided not to run."""
        return len(self.header.jobs) - len(self.skipped)

    def record(
        self,
        sid: str,
        uuid: str,
        repeat: int,
        attempt: int,
        r: dict[str, Any],
        on_event: EventSink,
        where: dict[str, Any] | None = None,
    ) -> JobResult:
        """``where``: which worker ran it (``slot``, ``worker_device``), added to the timing."""
        role, name = self.ref_of[sid]
        timing = dict(r.get("timing") or {})
        if where:
            timing.update(where)
        result = JobResult(
            uuid=uuid,
            axes=dict(self.axes.get(uuid, {})),
            solution=name,
            role=role,
            repeat=repeat,
            status=str(r.get("status")),
            latency_ms=r.get("latency_ms"),
            reference_latency_ms=r.get("reference_latency_ms"),
            speedup=r.get("speedup"),
            max_abs_error=as_float(r.get("max_abs_error")),
            max_rel_error=as_float(r.get("max_rel_error")),
            error=r.get("error"),
            timing=timing,
            attempt=attempt,
            started=r.get("started"),
            finished=now_iso(),
            wall_s=r.get("wall_s"),
            correctness=dict(r["correctness"]) if isinstance(r.get("correctness"), dict) else {},
            limit=dict(r["limit"]) if isinstance(r.get("limit"), dict) else None,
            side_effects=(
                dict(r["side_effects"]) if isinstance(r.get("side_effects"), dict) else None
            ),
        )
        with self._lock:
            restored = self.journal.restored
            self.journal.append_result(result)
            self.results[result.key] = result
            self.skipped.discard(result.key)  # a job in flight when its workload stopped
            if self.journal.restored != restored:
                on_event(LogLine(_RESTORED, "warning"))
            self.done += 1
            if result.status == PASSED:
                self.passed += 1
            else:
                self.failed += 1
            total = self.total
            remaining = total - self.done
            now = time.monotonic()
            key = job_key(uuid, name, role, repeat)
            group = self._group_of.get(key, (uuid, repeat))
            if isinstance(result.wall_s, (int, float)):
                self._group_walls.setdefault(group, []).append(float(result.wall_s))
            closed = self._pop_left(key)
            eta: float | None = None
            if closed:
                walls = self._group_walls.pop(group, [])
                # a pair's jobs carry the pair's one wall time: the group's is the longest
                self._eta.add(result.axes, max(walls) if walls else None, self._t_first is None)
                if self._t_first is None:
                    self._t_first = now
            if remaining <= 0:
                eta = 0.0
            elif closed and self._t_first is not None:
                # the results of a pair (or of several workers) land together: no ETA from an
                # instant
                if now - self._t_first >= ETA_SETTLE_S:
                    eta = self._eta.seconds_left(self._groups_left(), now - self._t_first)
                    if eta is not None:
                        self._last_eta = (eta, now)
            elif self._last_eta is not None:
                eta = max(0.0, self._last_eta[0] - (now - self._last_eta[1]))
            event = JobFinished(result, self.done, total, self.passed, self.failed, eta)
        on_event(event)
        return result

    def finish(
        self,
        cancelled: bool,
        on_event: EventSink,
        interrupted: str | None = None,
        reason: str | None = None,
    ) -> RunRecord:
        """The journal's end line, run.json regenerated from the journal, RunFinished.

        ``interrupted`` (or :attr:`interrupted`): why the run was interrupted (a signal, the app
        closing). Its end line says ``interrupted``, so an unfinished run reads ``interrupted``
        (``cancelled`` is the user's own cancel); a finished one reads complete or failed either way."""
        interrupted = interrupted or self.interrupted
        if not self.journal.verify(full=True):
            on_event(LogLine(_RESTORED, "warning"))
        if interrupted:
            self.journal.append_end("interrupted", interrupted)
        elif cancelled:  # ``reason``: why fibtui stopped it, when the user did not
            self.journal.append_end("cancelled", reason or "cancelled by the user")
        elif isinstance(self.header.settings.get("adaptive"), dict):
            from fibtui.core.sequential import run_outcome

            stopped, why = run_outcome(self.stops.values())
            self.journal.append_end("finished", why, stopped=stopped)
        else:
            self.journal.append_end("finished")
        record = write_record(self.folder)
        on_event(RunFinished(record.state, record))
        return record


def report_builds(
    folder: Path, ref_of: dict[str, tuple[str, str]], report: dict[str, Any], on_event: EventSink
) -> None:
    """Say how each solution built (a worker's ``loaded`` report) and keep the compiler's output
    in ``<run>/builds/<role>-<name>.log``: a failed build is the kernel's COMPILE_ERROR with its
    first compiler error line, or UNSUPPORTED_HERE when this machine lacks what it needs."""
    for sid, rep in report.items():
        if sid not in ref_of:
            continue
        role, name = ref_of[sid]
        log = rep.get("log")
        if isinstance(log, str) and log:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{role}-{name}")[:120]
            try:
                atomic_write_text(folder / "builds" / f"{safe}.log", log)
            except OSError:
                pass  # the log is a convenience: the result row holds the first error line
        if not rep.get("ok"):
            status = rep.get("status") or "COMPILE_ERROR"
            on_event(
                LogLine(
                    f"{name}: {status}: {rep.get('error')}",
                    "warning" if status == "UNSUPPORTED_HERE" else "error",
                )
            )
            continue
        build = rep.get("build") or {}
        if build.get("builder") in ("tvm-ffi", "torch"):
            how = (
                "from the build cache"
                if build.get("cached")
                else f"compiled in {build.get('compile_s', 0):.1f} s"
            )
            on_event(
                LogLine(
                    f"{name}: {build['builder']} build {how} (loaded in {build.get('build_s', 0):.2f} s)",
                    "info",
                )
            )


def take_job_fields(r: dict[str, Any], job: dict[str, Any], started: str | None) -> dict[str, Any]:
    """Copy what the worker measured for the whole job onto one solution's result: when it started,
    the job's wall time, and (into its timing) the worker's CPU time and host time per phase for
    the job (fibtui.worker.phases). Every backend
    records a job the same way."""
    r.setdefault("started", started)
    r["wall_s"] = job.get("wall_s")
    if isinstance(job.get("side_effects"), dict):
        r["side_effects"] = job["side_effects"]
    if isinstance(r.get("timing"), dict) and job.get("cpu_s") is not None:
        r["timing"]["job_cpu_s"] = job["cpu_s"]
    if isinstance(r.get("timing"), dict) and isinstance(job.get("phases_ms"), dict):
        r["timing"]["job_phases_ms"] = job["phases_ms"]
    return r


def as_float(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None
