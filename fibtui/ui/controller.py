"""The run controller: the one run slot of the app and what fills it.

Starting a gate, a sweep, a Modal sweep, a retry of a run's failed jobs or a send to Modal's B200
(each asked first where it costs time or money), cancelling and resuming, quitting with a run in
flight, and the pane refreshes after a run's verdict. The app's keys call it (fibtui.ui.run_keys);
the Runs pane holds the slot itself (RunsPane.claim) and runs what is started in it. What is run
(gate, baseline, backend, options) comes from fibtui.ui.gates; watch mode (fibtui.ui.watch) starts
its gates through here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from fibtui.core.errors import FibError
from fibtui.core.status import TOOL_STATUSES
from fibtui.ui.gates import GatePlanner
from fibtui.ui.watch import WatchMode

if TYPE_CHECKING:
    import threading

    from fibtui.core.plan import SweepEstimate
    from fibtui.core.workspace import Workspace
    from fibtui.runners.modal_runner import ModalPlan, ModalSettings, RunCost
    from fibtui.runners.split import Send
    from fibtui.services.runs import RunOptions
    from fibtui.ui.app import FibApp
    from fibtui.ui.messages import RunEvent, VerdictReady
    from fibtui.ui.screens.candidate import Choice

LARGE_SWEEP = 40
#: "Cancel it and quit" waits this long at most for the run's thread to stop its workers
QUIT_WAIT_S = 10.0


class RunControl:
    """The run slot's keys, dialogs and watch mode, for one app."""

    def __init__(self, app: FibApp) -> None:
        self.app = app
        self.gates = GatePlanner(app)
        self.watch = WatchMode(app, self)
        self.note_acknowledged = False
        #: "Quit when it ends" was chosen while a run was in flight
        self.quit_when_run_ends = False
        #: "Cancel it and quit": the app ends once the run's thread has (LaunchEnded)
        self.quit_after_cancel = False
        #: runs whose verdict the other panes' refresh waits for (VerdictReady)
        self._refresh_after: set[str] = set()
        #: runs that ended with rows this GPU could not run, whose send to Modal's B200 is to
        #: be offered after their verdict, and those offered once already (issue 31)
        self._may_send: set[str] = set()
        self._send_offered: set[str] = set()

    @property
    def workspace(self) -> Workspace:
        ws = self.app.workspace
        assert ws is not None, "runs start only once a workspace is open"
        return ws

    def _worker(self, name: str, group: str, work: Callable[[], object]) -> None:
        """``work`` in a thread worker of the app (exclusive in its group; a failure goes to the
        app's error dialog, under ``name``)."""
        self.app.run_worker(
            work, name=name, group=group, thread=True, exclusive=True, exit_on_error=False
        )

    # -- gates and sweeps -----------------------------------------------------------------------

    def pick_candidate(self) -> None:
        from fibtui.ui.screens.candidate import CandidateScreen

        ws = self.app.workspace
        if ws is None or ws.active is None:
            return
        gates = self.gates
        choices, baselines = gates.choices()
        gate_key = gates.gate_choice.key if gates.gate_choice is not None else "solution"
        base_key = (
            gates.base_choice.key
            if gates.base_choice is not None
            else ("best" if baselines[0].key == "best" else "none")
        )

        def picked(answer: tuple[Choice, Choice] | None) -> None:
            if not answer:
                return
            gate, base = answer
            if gate.key == base.key and gate.key != "none":
                self.app.notify(
                    "the gate and its baseline are the same solution: pick another baseline",
                    severity="warning",
                )
                return
            gates.gate_choice = None if gate.key == "solution" else gate
            gates.base_choice = base
            self.app.set_titles()
            if self.watch.on:  # watch the sources of what is gated now
                self.watch.restart()
            self.app.notify(f"g, s and watch mode: {gate.label} against {base.label}")

        _ = self.app.push_screen(CandidateScreen(choices, baselines, gate_key, base_key), picked)

    def gate(self) -> None:
        """The paired gate on the representatives; on the CPU interpreter, the quick correctness
        gate (the smallest workload of each band: seconds, where the representatives take
        minutes, and interpreter wall times give no speed verdict anyway). G runs the full one."""
        if self.app.workspace is None:
            return
        self.gates.with_backend(self._gate)

    def _gate(self) -> None:
        options = self.gates.gate_options("rep")
        label = self.gates.gate_label()
        self.with_note_check(lambda: self.start(options, label))

    def gate_full(self) -> None:
        if self.app.workspace is None:
            return
        self.gates.with_backend(
            lambda: self.with_note_check(
                lambda: self.start(
                    self.gates.gate_options("rep", quick=False), "representative gate"
                )
            )
        )

    def sweep(self) -> None:
        if self.app.workspace is None:
            return
        self.gates.with_backend(self._sweep)

    def _sweep(self) -> None:
        options = self.gates.gate_options("all")
        self.with_note_check(lambda: self._plan_sweep(options))

    def modal_sweep(self) -> None:
        """A full paired sweep fanned out over Modal containers: always asks first, with the plan."""
        if self.app.workspace is None:
            return
        self.gates.with_backend(lambda: self._plan_modal(self.gates.gate_options("all")))

    def _plan_modal(self, options: RunOptions) -> None:
        self._worker("_plan_modal", "modal-plan", partial(self._plan_modal_thread, options))

    def _plan_modal_thread(self, options: RunOptions) -> None:
        from fibtui.runners.modal_runner import plan_modal

        options.backend = "modal"
        options.warm = None
        plan = plan_modal(self.workspace, options)
        self.app.call_from_thread(self._confirm_modal, options, plan)

    def _confirm_modal(self, options: RunOptions, plan: ModalPlan) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        lines = plan.lines()
        facts = [("", line.strip()) for line in lines[1:]]
        head = lines[0]

        def answered(ok: bool | None) -> None:
            if ok:
                self.start(options, "Modal sweep")

        _ = self.app.push_screen(
            ConfirmScreen(
                "Modal fan-out: " + head, facts, "Start these containers? (GPU time is billed)"
            ),
            answered,
        )

    def _plan_sweep(self, options: RunOptions) -> None:
        self._worker("_plan_sweep", "sweep-plan", partial(self._plan_sweep_thread, options))

    def _plan_sweep_thread(self, options: RunOptions) -> None:
        """How many jobs a sweep runs and how long earlier runs took per job (core.plan's
        estimate, read from the files in a worker: the workloads file may be large), answered on
        the event loop."""
        from fibtui.core.plan import sweep_estimate

        try:
            est = sweep_estimate(
                self.workspace, options.backend, options.repeats, bool(options.baseline)
            )
        except FibError as exc:
            self.app.call_from_thread(self._sweep_refused, exc.one_line())
            return
        self.app.call_from_thread(self._confirm_sweep, options, est)

    def _sweep_refused(self, reason: str) -> None:
        from fibtui.ui.screens.error import ErrorScreen

        _ = self.app.push_screen(ErrorScreen("cannot plan the sweep", reason))

    def _confirm_sweep(self, options: RunOptions, est: SweepEstimate) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        def go() -> None:
            self.start(options, "full sweep")

        if est.workloads <= LARGE_SWEEP and est.repeats <= 1:
            go()
            return
        when = (
            f"~{est.seconds / 60:.1f} min of {options.backend} time ({est.history})"
            if est.seconds is not None
            else "unknown (no earlier run of this definition here on this backend)"
        )
        facts = [
            ("workloads", str(est.workloads)),
            ("repeats", str(est.repeats)),
            ("solutions", str(est.solutions)),
            ("jobs", str(est.jobs)),
            ("backend", options.backend),
            ("estimated time", when),
            ("cost", "none (local)"),
        ]
        _ = self.app.push_screen(
            ConfirmScreen(f"Full sweep of {est.workloads} workloads", facts, "Start it?"),
            lambda ok: go() if ok else None,
        )

    def has_note(self) -> bool:
        from fibtui.core import recon

        ws = self.workspace
        return ws.active is not None and recon.note_exists_for_round(ws.root, ws.active.definition)

    def with_note_check(self, go: Callable[[], object]) -> None:
        from fibtui.core import recon
        from fibtui.ui.screens.confirm import ConfirmScreen

        ws = self.workspace
        repos = self.app.recon_pane.repo_count
        if repos is None:
            repos = len(recon.discover_repos(ws.root))
        # no reference repos: there is nothing to take a recon note of, so nothing to ask
        if (
            self.note_acknowledged
            or ws.active is None
            or repos == 0
            or recon.note_exists_for_round(ws.root, ws.active.definition)
        ):
            go()
            return

        def answered(ok: bool | None) -> None:
            if ok:
                self.note_acknowledged = True
                go()

        _ = self.app.push_screen(
            ConfirmScreen(
                "No recon note for this round",
                [
                    ("definition", ws.active.definition),
                    ("notes folder", str(ws.archive_root / "docs")),
                ],
                "Candidate work should start from a recon note (Recon pane: f search, a add, ctrl+s write). Go on anyway?",
                yes="Go on (y)",
                no="Back (n)",
            ),
            answered,
        )

    # -- the run slot ---------------------------------------------------------------------------

    def start(self, options: RunOptions | None, label: str, send: Send | None = None) -> bool:
        """Claim the run slot now, on the UI thread (a second key or save a moment later finds
        it taken), then start the run once the Runs pane is built. False when a run holds it."""
        runs = self.app.runs_pane
        claimed: threading.Event | None = runs.claim(say=True)
        if claimed is None:
            return False
        self.app.show_pane("runs")
        runs.when_built(lambda: runs.start(options, label, claimed, send))
        return True

    def cancel_run(self) -> None:
        runs = self.app.runs_pane
        run_id = runs.active_run
        if runs.cancel():
            self.app.notify(
                f"cancelling run {run_id}: r on the Runs pane resumes it "
                f"(or: fibtui run --resume {run_id})"
                if run_id
                else "cancelling the gate being started"
            )
        else:
            self.app.notify("no run in flight", severity="warning")

    def resume_run(self) -> None:
        runs = self.app.runs_pane
        run_id = runs.shown_run
        if runs.resume():
            self.app.show_pane("runs")
            self.app.notify(f"resuming run {run_id}: its jobs left, in the same journal")
        else:
            self.app.notify(
                "the run shown cannot be resumed (not cancelled or interrupted, or a run is going)",
                severity="warning",
            )

    def retry_failed(self) -> None:
        """t: the failed jobs of the run shown, run again and merged back into it; a retry that
        starts containers (Modal) asks first, with its worst case (issue 34)."""
        runs = self.app.runs_pane
        if runs.shown_run is None:
            runs.notify("no run selected", severity="warning")
            return
        if runs.busy:
            runs.notify("a run is going: wait or cancel it first", severity="warning")
            return
        self._worker(
            "_retry_cost", "runs-retry-cost", partial(self._retry_cost_thread, runs.shown_run)
        )

    def _retry_cost_thread(self, run_id: str) -> None:
        from fibtui.runners.modal_runner import rerun_cost

        found = rerun_cost(self.workspace, run_id, retry=True)
        self.app.call_from_thread(self._confirm_retry, run_id, found)

    def _confirm_retry(self, run_id: str, found: tuple[RunCost, ModalSettings] | None) -> None:
        runs = self.app.runs_pane
        if found is None:
            runs.retry(run_id)
            return
        from fibtui.ui.screens.confirm import ConfirmScreen

        cost, settings = found
        lines = cost.lines(settings)

        def answered(ok: bool | None) -> None:
            if ok:
                runs.retry(run_id)

        _ = self.app.push_screen(
            ConfirmScreen(
                lines[0], [("", line.strip()) for line in lines[1:]], "Retry on Modal? (billed)"
            ),
            answered,
        )

    def run_event(self, message: RunEvent) -> None:
        from fibtui.runners.events import JobStarted, RunFinished

        if isinstance(message.event, JobStarted):
            self.watch.job_started()
        if isinstance(message.event, RunFinished):
            record = message.event.record
            if record is not None and any(j.status in TOOL_STATUSES for j in record.jobs):
                self._may_send.add(message.run_id)  # a run without such rows reads nothing more
            if self.watch.pending_gate:
                # a save while the gate ran: its gate follows once this run's thread has ended
                # (LaunchEnded), and the other panes' refreshes after that gate's verdict
                self._refresh_after.discard(message.run_id)
            else:
                # the Runs pane works out the run's verdict first, alone; the other panes and the
                # next worker follow its VerdictReady (below)
                self._refresh_after.add(message.run_id)
            if self.quit_when_run_ends:  # the run in flight has ended ("Quit when it ends")
                self.app.exit(0)

    def slot_freed(self) -> None:
        """The run slot is free: the gate of the save that replaced the one in it starts now."""
        if self.quit_after_cancel:
            self.app.exit(0)
            return
        if self.watch.pending_gate:
            self.watch.pending_gate = False
            if self.watch.on:
                self.watch.queue_gate()

    def after_verdict(self, message: VerdictReady) -> None:
        """A run's verdict is on screen: now the panes that read the archive catch up (History's
        chart, the regime analysis's latency shares, the Promotion panel, which is handed the
        comparison the verdict came from rather than working it out again) and the next gate's
        worker is made ready. Before, all of this started with the run's end, in threads beside
        the verdict's, and on the H200 a watch-mode verdict came 0.6-1.3 s after its run ended."""
        if message.run_id not in self._refresh_after:
            return  # a watch gate started at the run's end: its own verdict brings the refresh
        self._refresh_after.discard(message.run_id)
        app = self.app
        history, promotion, regimes = app.history_pane, app.promotion_pane, app.regimes_pane
        history.when_built(history.load)
        outcome = message.outcome
        if outcome is not None:
            promotion.when_built(lambda: promotion.evaluate(message.run_id, outcome))
        else:
            promotion.when_built(promotion.evaluate)
        regimes.when_built(regimes.analyze)
        self.gates.read_quick_history()
        if self.watch.on or self.gates.keep_worker_warm():
            self.gates.prewarm()
        if message.run_id in self._may_send and message.run_id not in self._send_offered:
            self._may_send.discard(message.run_id)
            self._send_offered.add(message.run_id)
            self._plan_send(message.run_id, quiet=True)

    # -- quitting with a run in flight ------------------------------------------------------------

    def ask_before_quitting(self) -> bool:
        """q with a run in flight: ask first (over SSH one stray key must not end a sweep).
        False when no run is in flight (the app quits at once)."""
        app = self.app
        runs = app.kept_runs_pane
        if runs is None or not runs.busy:
            return False
        from fibtui.ui.screens.confirm import ChoiceScreen

        def answered(choice: str | None) -> None:
            if choice == "cancel":
                # the app stays up until the run's thread has stopped its workers (a few
                # seconds at most), then ends: the terminal is given back clean, with no
                # thread left that the process would wait for after it
                app.interrupt_run("the app was closed")
                if runs.busy:
                    self.quit_after_cancel = True
                    app.notify("stopping the run's workers, then quitting…")
                    app.set_timer(QUIT_WAIT_S, partial(app.exit, 0))
                else:
                    app.exit(0)
            elif choice == "after":
                self.quit_when_run_ends = True
                app.set_titles()
                app.notify("fibtui quits when the run ends (q again asks again)")

        _ = app.push_screen(
            ChoiceScreen(
                "A run is in flight",
                f"{runs.active_run or 'A gate being started'} is still going. Cancelling keeps what finished; the jobs in flight stay "
                "pending and `fibtui run --resume` picks them up.",
                [
                    ("c", "Cancel it and quit", "cancel"),
                    ("e", "Quit when it ends", "after"),
                    ("b", "Back", "back"),
                ],
            ),
            answered,
        )
        return True

    # -- what this GPU cannot run, sent to Modal's B200 (issue 31) ------------------------------

    def send_unsupported(self) -> None:
        """The shown run's jobs this GPU lacks the architecture for, on Modal's B200: the plan
        and its worst-case cost first, always asked (the palette's entry; a run's end offers it
        by itself)."""
        run_id = self.app.runs_pane.shown_run
        if run_id is None:
            self.app.notify("no run selected", severity="warning")
            return
        self._plan_send(run_id, quiet=False)

    def _plan_send(self, run_id: str, quiet: bool) -> None:
        self._worker("_plan_send", "send-plan", partial(self._plan_send_thread, run_id, quiet))

    def _plan_send_thread(self, run_id: str, quiet: bool) -> None:
        """plan_send reads the run's journal and Modal's settings (files, no network): in a
        thread, answered on the event loop. ``quiet``: after a run, say nothing when there is
        nothing to send."""
        from fibtui.runners.split import plan_send

        app = self.app
        try:
            send = plan_send(self.workspace, run_id)
        except FibError as exc:
            if not quiet:
                app.call_from_thread(
                    partial(app.notify, f"cannot plan the send: {exc.one_line()}", severity="error")
                )
            return
        if send is None:
            if not quiet:
                app.call_from_thread(
                    app.notify, f"run {run_id} has no job a B200 could run that this GPU could not"
                )
            return
        app.call_from_thread(self._confirm_send, send)

    def _confirm_send(self, send: Send) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        lines = send.lines()

        def answered(ok: bool | None) -> None:
            if ok:
                self.start(None, "send to Modal's B200", send=send)

        _ = self.app.push_screen(
            ConfirmScreen(
                "Cannot run here: " + lines[0],
                [("", line.strip()) for line in lines[1:]],
                "Run them on Modal's B200 in the same run? (GPU time is billed)",
                yes="Send (y)",
                no="Not now (n)",
            ),
            answered,
        )
