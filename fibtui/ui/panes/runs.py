"""Runs pane: every run of the workspace, the selected run's per-workload table (live while it
runs), a progress bar with pass/fail counts and ETA, and the selected job's log.

The pane starts runs through fibtui.services.runs in a thread worker; the runner's events come
back as messages. It holds no domain logic: statuses, floors and records come from the core.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import DataTable, ProgressBar, Static

from fibtui.ui.messages import (
    LaunchEnded,
    RecordLoaded,
    RunEvent,
    RunFailed,
    RunsListed,
    RunStartedHere,
    VerdictReady,
)
from fibtui.ui.panes.base import Pane, PaneHost
from fibtui.ui.panes.runs_launch import interrupt_slot, run_in_slot
from fibtui.ui.panes.runs_view import (
    JOB_COLUMNS,
    NOT_RUN,
    RESUMABLE,
    STATE_STYLE,
    JobView,
    Row,
    compute_floors,
    detail_lines,
    errors_text,
    header_of_record,
    header_of_start,
    job_row,
    status_text,
    verdict_line,
)

if TYPE_CHECKING:
    from textual.widgets import RichLog

    from fibtui.core.runs import JobResult, JobSpec, RunRecord
    from fibtui.core.stats import CompareOutcome
    from fibtui.core.workspace import Workspace
    from fibtui.runners.split import Send
    from fibtui.services.runs import RunOptions

FLUSH_S = 0.2
ROWS_PER_FLUSH = 40


class RunsPane(Pane):
    """Keys (app bindings): g gate, s full sweep, t retry failed, c cancel, enter opens a run."""

    DEFAULT_CSS = """
    RunsPane #runs-status { height: auto; padding: 0 1; }
    RunsPane #runs-progress { height: 1; padding: 0 1; }
    RunsPane #runs-body { height: 1fr; }
    RunsPane #runs-list { width: 46; min-width: 30; }
    RunsPane #jobs-table { width: 1fr; }
    RunsPane #job-log { height: 7; border-top: solid $panel; }
    """

    # ---------------------------------------------------------------- messages

    active_run: reactive[str | None] = reactive(None)
    shown_run: reactive[str | None] = reactive(None)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cancel: threading.Event | None = None
        self._jobs: dict[str, JobView] = {}
        self._floors: dict[str, float] = {}
        self._header_info: dict[str, Any] = {}
        self.last_job_started_at: float | None = None
        #: live updates are coalesced: rows and progress change in memory at once and reach the
        #: table at most every FLUSH_S seconds, only the cells that changed, only while shown
        self._dirty: set[str] = set()
        self._pending_progress: tuple[int, int, int, int, float | None] | None = None
        self._flush_scheduled = False
        self._rendered: dict[str, Row] = {}
        self._by_task: dict[tuple[str, int], list[JobView]] = {}
        #: the job whose details the log below the table shows
        self._detail_key: str | None = None
        #: what the runs started here are ("correctness gate ...", "full sweep"), shown with them
        self._labels: dict[str, str] = {}
        #: (done, total, passed, failed) of the run shown, and when its ETA runs out
        self._progress: tuple[int, int, int, int] | None = None
        self._eta_deadline: float | None = None
        #: the shown run's verdict line (paired runs), under its progress
        self._verdict = ""
        #: what the run in the slot is (start's label)
        self._active_label: str | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("no run yet: g starts a representative gate, s a full sweep", id="runs-status")
        yield ProgressBar(total=1, show_eta=False, id="runs-progress")
        with Horizontal(id="runs-body"):
            yield DataTable(id="runs-list", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="jobs-table", cursor_type="row", zebra_stripes=True)
        from textual.widgets import RichLog  # rich.pretty and attrs: ~30 ms, after the first frame

        # a job's details open at their top (auto_scroll off): at 80x24 the log is a few rows
        yield RichLog(id="job-log", wrap=True, markup=True, max_lines=400, auto_scroll=False)

    def built_hook(self) -> None:
        self.set_interval(1.0, self._tick)
        runs = self.query_one("#runs-list", DataTable)
        runs.add_columns("run", "state", "jobs", "ok", "backend")
        jobs = self.query_one("#jobs-table", DataTable)
        for column in JOB_COLUMNS:
            jobs.add_column(column, key=column)

    # ---------------------------------------------------------------- listing and opening

    def reload(self) -> None:
        self.refresh_list()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.refresh_list()

    @work(thread=True, exclusive=True, group="runs-list", exit_on_error=False)
    def refresh_list(self) -> None:
        from fibtui.core.runs import list_runs

        if self.workspace is None:
            return
        self.post_message(RunsListed(list(reversed(list_runs(self.workspace.archive_root)))))

    @on(RunsListed)
    def _listed(self, message: RunsListed) -> None:
        table = self.query_one("#runs-list", DataTable)
        keep = table.cursor_row
        table.clear()
        for r in message.runs:
            state = Text(r.state, style=STATE_STYLE.get(r.state, ""))
            table.add_row(
                r.run_id,
                state,
                f"{r.jobs_done}/{r.jobs_total}",
                str(r.passed),
                r.backend,
                key=r.run_id,
            )
        if table.row_count:
            table.move_cursor(row=min(keep, table.row_count - 1))
        if self.shown_run is None and message.runs:
            self.open_run(message.runs[0].run_id)

    @on(DataTable.RowSelected, "#runs-list")
    def _run_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.open_run(str(event.row_key.value))

    @work(thread=True, exclusive=True, group="runs-open", exit_on_error=False)
    def open_run(self, run_id: str) -> None:
        from fibtui.core.runs import build_record, read_journal, run_dir

        if self.workspace is None:
            return
        folder = run_dir(self.workspace.archive_root, run_id)
        contents = read_journal(folder / "journal.jsonl")
        record = build_record(folder, contents)
        planned = list(contents.header.jobs)
        floors = self._compute_floors(record.definition, planned, record.environment.get("gpu"))
        self.post_message(RecordLoaded(run_id, record, planned, floors, self._verdict_text(record)))

    def _verdict_text(self, record: RunRecord) -> str:
        """The verdict line of a finished paired run (call from a thread), or ''."""
        return self._verdict_of(record)[0]

    def _verdict_of(self, record: RunRecord) -> tuple[str, CompareOutcome | None]:
        """(verdict line, comparison) of a finished paired run, or ('', None). From a thread."""
        from fibtui.services import decide

        outcome = decide.run_verdict(self.workspace, record) if self.workspace else None
        return (verdict_line(outcome) if outcome is not None else ""), outcome

    @work(thread=True, exclusive=True, group="runs-verdict", exit_on_error=False)
    def _load_verdict(self, run_id: str, record: RunRecord) -> None:
        text, outcome = "", None
        try:
            text, outcome = self._verdict_of(record)
        finally:  # whatever happened, the app hears that the run's verdict is settled
            self.post_message(VerdictReady(run_id, text, outcome))

    @on(VerdictReady)
    def _verdict_ready(self, message: VerdictReady) -> None:
        self.refresh_list()  # the run's state in the list (after the verdict, not beside it)
        if message.run_id == self.shown_run:
            self._verdict = message.text
            self._render_progress()

    def _compute_floors(
        self, definition_name: str, planned: list[JobSpec], gpu: str | None = None
    ) -> dict[str, float]:
        """Floor (us) per workload on the run's GPU (B200 when unknown or on the interpreter)."""
        if self.workspace is None:
            return {}
        return compute_floors(self.workspace, definition_name, planned, gpu)

    @on(RecordLoaded)
    def _record_loaded(self, message: RecordLoaded) -> None:
        self.shown_run = message.run_id
        self._floors = message.floors
        record = message.record
        self._header_info = header_of_record(record)
        self._verdict = message.verdict
        stopped = set((record.adaptive or {}).get("workloads") or {})
        self._jobs = {}
        done = {j.key: j for j in record.jobs}
        for p in message.planned:
            view = JobView.of(p)
            j = done.get(p.key)
            if j is not None:
                self._fill(view, j)
            elif p.uuid in stopped:
                view.status = "SKIPPED"
            elif record.state != "running" and message.run_id != self.active_run:
                view.status = NOT_RUN  # the run ended without it: never QUEUED again
            self._jobs[view.key] = view
        self._redraw_jobs()
        s = record.summary
        self._update_progress(s.done, s.total, s.passed, s.done - s.passed, None)

    def _fill(self, view: JobView, j: JobResult) -> None:
        view.fill(j, self._floors.get(view.uuid))

    def _row(self, v: JobView) -> Row:
        return job_row(v, self._header_info.get("timing_kind") == "cupti")

    def _redraw_jobs(self) -> None:
        self._by_task = {}
        for v in self._jobs.values():
            self._by_task.setdefault((v.uuid, v.repeat), []).append(v)
        table = self.query_one("#jobs-table", DataTable)
        table.clear()
        self._rendered = {}
        self._dirty.clear()
        rows = []
        for v in self._jobs.values():
            row = self._row(v)
            self._rendered[v.key] = row
            rows.append(row)
        for v, row in zip(self._jobs.values(), rows, strict=True):
            table.add_row(*row, key=v.key)

    def _update_progress(
        self, done: int, total: int, passed: int, failed: int, eta: float | None
    ) -> None:
        bar = self.query_one("#runs-progress", ProgressBar)
        bar.update(total=max(total, 1), progress=done)
        # the ETA counts down between results (a 1 s tick), instead of standing still until the next one
        self._progress = (done, total, passed, failed)
        self._eta_deadline = time.monotonic() + eta if eta else None
        self._render_progress()

    def _tick(self) -> None:
        if (
            self._eta_deadline is not None
            and self.active_run is not None
            and self._progress is not None
        ):
            self._render_progress()

    def _render_progress(self) -> None:
        if self._progress is None:
            return
        h = self._header_info
        deadline = self._eta_deadline
        verdict = (f"\n{self._verdict}" if self._verdict else "") + errors_text(self._jobs.values())
        self.query_one("#runs-status", Static).update(
            status_text(
                h,
                self._progress,
                deadline - time.monotonic() if deadline is not None else None,
                self.active_run == h.get("run_id"),
                self._labels.get(h.get("run_id", "")),
                verdict,
            )
        )

    @property
    def can_resume(self) -> bool:
        """Can ``r`` resume the run shown (cancelled or interrupted, jobs left, nothing running)?"""
        h = self._header_info
        progress = self._progress
        return (
            not self.busy
            and self.shown_run is not None
            and h.get("state") in RESUMABLE
            and progress is not None
            and progress[0] < progress[1]
        )

    def resume(self) -> bool:
        """Resume the run shown (its jobs left, in the same journal): False when it cannot."""
        if not self.can_resume or self.shown_run is None:
            return False
        claimed = self.claim()
        if claimed is None:
            return False
        self._launch(None, "resumed run", claimed, resume_of=self.shown_run)
        return True

    @on(DataTable.RowHighlighted, "#jobs-table")
    def _job_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail_key = str(event.row_key.value) if event.row_key is not None else None
        self._show_detail(self._jobs.get(self._detail_key) if self._detail_key else None)

    def _job_log(self) -> RichLog:
        from textual.widgets import RichLog

        return self.query_one("#job-log", RichLog)

    def _show_detail(self, view: JobView | None) -> None:
        log = self._job_log()
        log.clear()
        if view is None:
            return
        for line in detail_lines(view):
            log.write(line)

    # ---------------------------------------------------------------- starting and following runs

    @property
    def busy(self) -> bool:
        """Is a run claimed, being started, running or winding down? Decided on the UI thread
        (claim), so two keys or saves a moment apart never start two runs."""
        return self._cancel is not None

    def claim(self, say: bool = False) -> threading.Event | None:
        """Take the one run slot (on the UI thread): the new run's cancel event, or None when a
        run holds it (``say``: and tell the user so). A cancel before the run's thread starts
        ends it before it prepares."""
        if self._cancel is not None:
            if say:
                self.notify(
                    f"run {self.active_run or '(starting)'} is still going: cancel it first (c)",
                    severity="warning",
                )
            return None
        self._cancel = threading.Event()
        self._active_label = None
        return self._cancel

    def start(
        self,
        options: RunOptions | None,
        label: str,
        claimed: threading.Event | None = None,
        send: Send | None = None,
    ) -> bool:
        """Start a run in the slot ``claimed`` (claim), or claim it now; False when busy.
        ``send`` (fibtui.runners.split.Send, already confirmed): instead of a new run, the jobs
        this GPU could not run, on Modal's B200, journaled into the run they came from."""
        if claimed is None:
            claimed = self.claim(say=True)
            if claimed is None:
                return False
        elif claimed is not self._cancel:
            return False  # a slot given back since (its launch was abandoned)
        self._active_label = label
        self._launch(options, label, claimed, send=send)
        return True

    @work(thread=True, group="runs-active", exit_on_error=False)
    def _launch(
        self,
        options: RunOptions | None,
        label: str,
        cancel: threading.Event,
        retry_of: str | None = None,
        resume_of: str | None = None,
        send: Send | None = None,
    ) -> None:
        run_in_slot(
            self.workspace,
            options,
            label,
            cancel,
            self.post_message,
            self._labels,
            retry_of,
            resume_of,
            send,
        )

    @on(LaunchEnded)
    def _launch_ended(self, message: LaunchEnded) -> None:
        if self._cancel is message.cancel:
            self._cancel = None
            if message.run_id is None or self.active_run == message.run_id:
                self.active_run = None
            self.app.refresh_bindings()

    def retry(self, run_id: str) -> bool:
        """Run the failed jobs of ``run_id`` again, merged back into it (the run controller asks
        first where that costs): False when a run holds the slot."""
        claimed = self.claim()
        if claimed is None:
            self.notify("a run is going: wait or cancel it first", severity="warning")
            return False
        self._launch(None, "retry", claimed, retry_of=run_id)
        return True

    def interrupt(self, reason: str) -> None:
        """Stop the run in flight because the app ends (runs_launch.interrupt_slot)."""
        interrupt_slot(self._cancel, reason)

    def cancel(self) -> bool:
        """Cancel the run in the slot: running, or still being started (it then ends before it
        prepares, or as soon as it starts)."""
        if self._cancel is None:
            return False
        self._cancel.set()
        return True

    @on(RunStartedHere)
    def _started_here(self, message: RunStartedHere) -> None:
        self.active_run = message.run_id

    def watch_active_run(self, _old: str | None, _new: str | None) -> None:
        self.app.refresh_bindings()  # Cancel is live only while a run is in flight

    @on(RunFailed)
    def _run_failed(self, message: RunFailed) -> None:
        from fibtui.ui.screens.error import ErrorScreen

        _ = self.app.push_screen(ErrorScreen(message.title, message.reason))

    @on(RunEvent)
    def _run_event(self, message: RunEvent) -> None:
        from fibtui.runners.events import (
            JobFinished,
            JobStarted,
            JobStarting,
            LogLine,
            RunFinished,
            RunStarted,
            WorkerRestarted,
        )

        event = message.event
        log = self._job_log()
        if isinstance(event, RunStarted):
            self.active_run = message.run_id
            self.shown_run = message.run_id
            self._header_info = header_of_start(message.run_id, event.header)
            self._jobs = {j.key: JobView.of(j) for j in event.header.jobs}
            self._floors = {}
            self._verdict = ""
            self._redraw_jobs()
            self._update_progress(event.done_before, len(event.header.jobs), 0, 0, None)
            self.refresh_list()
            self._load_floors(message.run_id)
        elif message.run_id != self.shown_run:
            return
        elif isinstance(event, JobStarting):  # Modal: a container took it and loads
            for view in self._by_task.get((event.uuid, event.repeat), ()):
                if view.solution in event.solutions and view.status == "QUEUED":
                    view.status = "STARTING"
                    self._mark(view)
        elif isinstance(event, JobStarted):
            self.last_job_started_at = time.monotonic()
            for view in self._by_task.get((event.uuid, event.repeat), ()):
                if view.solution in event.solutions and view.status in ("QUEUED", "STARTING"):
                    view.status = "RUNNING"
                    self._mark(view)
        elif isinstance(event, JobFinished):
            r = event.result
            finished = self._jobs.get(r.key)
            if finished is not None:
                self._fill(finished, r)
                self._mark(finished)
            self._pending_progress = (
                event.done,
                event.total,
                event.passed,
                event.failed,
                event.eta_s,
            )
            self._schedule_flush()
        elif isinstance(event, WorkerRestarted):
            log.write(f"[yellow]worker {event.slot} restarted: {event.reason}[/]")
        elif isinstance(event, LogLine):
            log.write(
                Text(event.text, style={"error": "red", "warning": "yellow"}.get(event.level, ""))
            )
        elif isinstance(event, RunFinished):
            stopped = set((event.record.adaptive or {}).get("workloads") or {})
            for view in self._jobs.values():
                if view.status == "QUEUED" and view.uuid in stopped:
                    view.status = "SKIPPED"  # an adaptive run decided it was not needed
                    self._mark(view)
            if event.state != "complete":
                # cancelled, interrupted or failed: what never finished is pending (resumable), not running
                for view in self._jobs.values():
                    if view.status in ("RUNNING", "STARTING", "QUEUED"):
                        view.status = NOT_RUN
                        self._mark(view)
            self.flush(force=True)
            self.active_run = None  # the slot itself is free once its thread ends (LaunchEnded)
            s = event.record.summary
            self._header_info["state"] = event.state
            self._update_progress(s.done, s.total, s.passed, s.done - s.passed, None)
            self.notify(
                f"run {message.run_id}: {event.state}, {s.passed}/{s.total} PASSED",
                severity="information" if s.complete else "warning",
            )
            self._load_verdict(message.run_id, event.record)  # the list follows the verdict

    @work(thread=True, exclusive=True, group="runs-floors", exit_on_error=False)
    def _load_floors(self, run_id: str) -> None:
        from fibtui.core.runs import run_dir

        if self.workspace is None:
            return
        folder = run_dir(self.workspace.archive_root, run_id)
        from fibtui.core.runs import read_journal

        contents = read_journal(folder / "journal.jsonl")
        floors = self._compute_floors(contents.header.definition, contents.header.jobs)
        self.app.call_from_thread(self._set_floors, floors)

    def _set_floors(self, floors: dict[str, float]) -> None:
        self._floors = floors

    def _mark(self, view: JobView) -> None:
        self._dirty.add(view.key)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.set_timer(FLUSH_S, self.flush)

    def flush(self, force: bool = False) -> None:
        """Bring the table and the progress up to date: only the cells that changed, and only
        while the Runs pane is on screen (the rest waits in memory until it is)."""
        self._flush_scheduled = False
        host = self.app
        shown = not isinstance(host, PaneHost) or host.is_shown("runs")
        if not self.built or (not force and not shown):
            return
        if self._pending_progress is not None:
            self._update_progress(*self._pending_progress)
            self._pending_progress = None
        if not self._dirty:
            return
        table = self.query_one("#jobs-table", DataTable)
        # a bounded slice per flush, so a backlog (rows that changed while the pane was hidden)
        # is spread over frames and keys keep getting answered in between
        batch = list(self._dirty)[:ROWS_PER_FLUSH]
        self._dirty.difference_update(batch)
        dirty = batch
        if self._dirty:
            self._flush_scheduled = True
            self.set_timer(0.03, self.flush)
        try:
            for key in dirty:
                view = self._jobs.get(key)
                if view is None:
                    continue
                row = self._row(view)
                before = self._rendered.get(key)
                for i, (column, value) in enumerate(zip(JOB_COLUMNS, row, strict=True)):
                    if before is None or str(before[i]) != str(value):
                        # the status column grows to the longest status (QUEUED -> INCORRECT_NUMERICAL)
                        table.update_cell(key, column, value, update_width=column == "status")
                self._rendered[key] = row
                if key == self._detail_key and before != row:  # the detail line follows its row
                    self._show_detail(view)
        except Exception:  # noqa: BLE001 - a row that is not there (another run shown): redraw
            self._redraw_jobs()

    @property
    def folder(self) -> Path | None:
        if self.workspace is None or self.shown_run is None:
            return None
        from fibtui.core.locations import run_folder

        return run_folder(self.workspace.archive_root, self.shown_run)
