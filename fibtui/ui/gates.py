"""What g, s and watch mode run, and where: the backend (decided once, in a worker), the gate and
its baseline (``o``), the options of a gate or a sweep, the CPU quick gate, and the one warm
worker kept for the next gate. The run controller (fibtui.ui.controller) asks this for a run's
options; this starts no run itself.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from fibtui.core.errors import FibError
from fibtui.ui.messages import BackendChosen

if TYPE_CHECKING:
    from fibtui.core.quick import History, QuickGate
    from fibtui.core.workspace import Candidate, Workspace
    from fibtui.runners.local import WarmWorkers
    from fibtui.runners.service.client import ServiceWorkers
    from fibtui.services.runs import RunOptions
    from fibtui.ui.app import FibApp
    from fibtui.ui.screens.candidate import Choice


class GatePlanner:
    """The gate, the baseline, the backend and the warm worker of one app."""

    def __init__(self, app: FibApp) -> None:
        self.app = app
        #: what g, s and watch mode run and against what (o); None: the workspace's solution
        #: against the promoted best when there is one
        self.gate_choice: Choice | None = None
        self.base_choice: Choice | None = None
        #: the CPU quick gate of the last gate's options (core.quick), and the past job times
        #: its estimates read
        self.quick_gate: QuickGate | None = None
        self.quick_history: History | None = None
        self.warm: ServiceWorkers | WarmWorkers | None = None
        #: the backend g, s and watch mode run on (None until choose_backend has decided), and
        #: what waits for it (with_backend)
        self.backend_name: str | None = None
        self._backend_waiters: list[Callable[[], object]] = []
        self._backend_asked = False

    @property
    def workspace(self) -> Workspace:
        ws = self.app.workspace
        assert ws is not None, "gates are planned only once a workspace is open"
        return ws

    # -- the backend ------------------------------------------------------------------------

    def backend(self) -> str:
        """The backend g, s and watch mode run on: the shared default of the CLI and the TUI
        (runners.registry.default_backend), decided once in a worker. The actions that need it
        wait for it (with_backend); a thread that asks before it is known decides it there."""
        if self.backend_name is None:
            from fibtui.runners.registry import default_backend

            self.backend_name = default_backend()
        return self.backend_name

    def ask_backend(self) -> None:
        if not self._backend_asked and self.backend_name is None:
            self._backend_asked = True
            self.app.run_worker(
                self._choose_backend,
                name="_choose_backend",
                group="backend",
                thread=True,
                exit_on_error=False,
            )

    def _choose_backend(self) -> None:
        """Detecting the backends runs nvidia-smi (up to 5 s): never on the event loop."""
        from fibtui.runners.registry import default_backend

        self.app.post_message(BackendChosen(default_backend()))

    def backend_chosen(self, name: str) -> None:
        if self.backend_name is None:
            self.backend_name = name
        waiting, self._backend_waiters = self._backend_waiters, []
        for callback in waiting:
            callback()

    def backend_failed(self) -> None:
        """The worker that chose the backend failed: what waited for it is dropped; a key asks
        again."""
        self._backend_asked = False
        self._backend_waiters = []

    def with_backend(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` now when the backend is known, else once the worker has chosen it
        (a key typed in the first moments of the app)."""
        if self.backend_name is not None:
            callback()
            return
        self._backend_waiters.append(callback)
        self.ask_backend()

    # -- a run's options ----------------------------------------------------------------------

    def baseline_dir(self) -> Path | None:
        """The promoted best solution, when there is one: gates are paired against it."""
        from fibtui.services.archive import best_solution_path

        ws = self.app.workspace
        if ws is None or ws.active is None:
            return None
        return best_solution_path(ws.archive_root, ws.active.language)

    def gate_options(self, workloads: str, repeats: int = 1, quick: bool = True) -> RunOptions:
        """``quick``: on the CPU interpreter a gate takes the smallest workload of each band."""
        from fibtui.core import regimes
        from fibtui.services.runs import RunOptions

        if self.base_choice is None:
            best = self.baseline_dir()
            baseline = str(best) if best else None
        else:
            baseline = str(self.base_choice.path) if self.base_choice.path is not None else None
        solutions = (
            [str(self.gate_choice.path)]
            if self.gate_choice is not None and self.gate_choice.path
            else []
        )
        backend = self.backend()
        reps = None
        self.quick_gate = None
        if workloads == "rep":
            pane = self.app.regimes_pane
            report = pane.report
            if report is not None and self.is_quick_gate(backend, workloads, quick):
                from fibtui.core import quick as quick_gate

                self.quick_gate = quick_gate.choose(
                    report,
                    self.quick_history,
                    budget_s=self.quick_budget(),
                    solutions=2 if baseline else 1,
                )
                reps = self.quick_gate.workloads or regimes.smallest_per_band(report)
            else:
                reps = pane.representatives()
        return RunOptions(
            backend=backend,
            workloads=workloads,
            repeats=repeats,
            solutions=solutions,
            baseline=baseline,
            representatives=reps or None,
            warm=self.warm_workers(),
        )

    def quick_budget(self) -> float:
        """``[tui] quick_gate_s`` in fibtui.toml: the CPU quick gate's estimated time at most."""
        from fibtui.core import quick
        from fibtui.core.settings import get_setting

        try:
            value = get_setting(self.workspace.root, "tui.quick_gate_s", quick.DEFAULT_BUDGET_S)
        except FibError:
            return quick.DEFAULT_BUDGET_S
        return (
            float(value)
            if isinstance(value, (int, float)) and value > 0
            else quick.DEFAULT_BUDGET_S
        )

    def read_quick_history(self) -> None:
        """Past interpreter job times of the definition (core.quick), for the quick gate's
        estimates: read in a thread at start and after each run's verdict."""
        self.app.run_worker(
            self._read_quick_history,
            name="_read_quick_history",
            group="quick-history",
            thread=True,
            exclusive=True,
            exit_on_error=False,
        )

    def _read_quick_history(self) -> None:
        from fibtui.core import quick

        ws = self.app.workspace
        report = self.app.regimes_pane.report
        if ws is None or ws.active is None:
            return
        sizes = {u: size for u, (_, size, _) in quick._sizes(report).items()} if report else None
        history = quick.read_history(ws.archive_root, ws.active.definition, sizes)
        self.app.call_from_thread(self._set_quick_history, history)

    def _set_quick_history(self, history: History) -> None:
        self.quick_history = history

    def is_quick_gate(self, backend: str, workloads: str, quick: bool = True) -> bool:
        """Does a gate take the smallest workload of each band? On the CPU interpreter, for the
        representative selection, once the Regimes pane has its bands."""
        from fibtui.core.measurement import CPU_INTERPRETER
        from fibtui.runners.registry import timing_kind

        return (
            quick
            and workloads == "rep"
            and timing_kind(backend) == CPU_INTERPRETER
            and self.app.regimes_pane.report is not None
        )

    def gate_label(self) -> str:
        """What a gate is, shown with its run: the quick gate says what it left out."""
        if self.quick_gate is None:
            return "representative gate"
        return f"CPU quick gate: {self.quick_gate.summary()} (G: the representatives)"

    def watch_folder(self) -> Path:
        if self.gate_choice is not None and self.gate_choice.watch is not None:
            return self.gate_choice.watch
        active = self.workspace.active
        assert active is not None, "watch mode needs a valid solution config"
        return active.source_dir

    # -- the picker (o) -------------------------------------------------------------------------

    def choices(self) -> tuple[list[Choice], list[Choice]]:
        """(gates, baselines) for the picker: the workspace's solution, then its candidates newest
        first; the promoted best, the solution, the candidates, or no baseline."""
        from fibtui.ui.screens.candidate import Choice

        ws = self.workspace
        active = ws.active
        assert active is not None, "the picker needs a valid solution config"

        def newest(folder: Path) -> float:
            try:
                return max(
                    (p.stat().st_mtime for p in folder.rglob("*") if p.is_file()),
                    default=folder.stat().st_mtime,
                )
            except OSError:
                return 0.0

        cands = [c for c in ws.topology.candidates if c.owner.definition == active.definition]
        cands.sort(key=lambda c: newest(c.folder), reverse=True)

        def note(c: Candidate) -> str:
            return f"{c.language} · {len(c.problems)} problem(s)" if c.problems else c.language

        solution = Choice(
            "solution",
            f"{active.name} (the workspace's solution)",
            None,
            active.language,
            watch=active.source_dir,
        )
        gates = [solution] + [
            Choice(
                f"cand:{c.name}",
                c.name,
                c.folder,
                note(c),
                watch=(c.config.source_dir if c.config is not None else c.folder),
            )
            for c in cands
        ]
        baselines = []
        best = self.baseline_dir()
        if best is not None:
            baselines.append(Choice("best", "the promoted best", best, str(best.name)))
        baselines.append(
            Choice(
                "solution",
                f"{active.name} (the workspace's solution)",
                active.folder,
                active.language,
            )
        )
        baselines += [Choice(f"cand:{c.name}", c.name, c.folder, note(c)) for c in cands]
        baselines.append(Choice("none", "no baseline (the gate alone, no verdict)", None))
        return gates, baselines

    # -- the warm worker ------------------------------------------------------------------------

    def keep_worker_warm(self) -> bool:
        """After a run, start the next gate's worker ahead of time (torch, triton and, on a GPU,
        the first CUPTI session: about 10 s on the H200) unless ``[tui] keep_worker_warm = false``
        in fibtui.toml (it holds one idle worker process, with a CUDA context on a GPU)."""
        from fibtui.core.settings import get_setting

        try:
            return get_setting(self.workspace.root, "tui.keep_worker_warm", True) is not False
        except FibError:
            return True  # a broken fibtui.toml is reported where it is read for its own tables

    def prewarm(self) -> None:
        """Keep one worker process started (torch and triton imported) for the next gate: its
        options are read here, on the event loop (they come from the panes), and the worker
        starts in a thread."""
        self.with_backend(lambda: self._prewarm_with(self.gate_options("rep")))

    def warm_workers(self) -> ServiceWorkers | WarmWorkers | None:
        """Where gates find a started worker: the worker service's (so the first gate of a
        session takes one a CLI run left ready), unless ``[workers] daemon = false``. Made once,
        on the event loop."""
        from fibtui.runners.local import WarmWorkers
        from fibtui.runners.service.client import warm_workers_for

        if self.warm is None and self.app.workspace is not None:
            ws = self.app.workspace
            self.warm = warm_workers_for(ws.root, ws.state_dir)
        if isinstance(self.warm, WarmWorkers):  # its own warm workers (the service is off)
            self.warm.keep_given_back = self.keep_worker_warm()
        return self.warm

    def _prewarm_with(self, options: RunOptions) -> None:
        self.app.run_worker(
            partial(self._prewarm_in_thread, options),
            name="_prewarm_with",
            group="warm",
            thread=True,
            exclusive=True,
            exit_on_error=False,
        )

    def _prewarm_in_thread(self, options: RunOptions) -> None:
        from fibtui.runners.local import worker_pool
        from fibtui.services.runs import check_backend, engine_config

        ws = self.workspace
        warm = self.warm
        if warm is None:  # made on the event loop by gate_options; a thread only reads it
            return
        if warm.count():
            return
        try:
            found = check_backend(options.backend)
            assert ws.active is not None
            definition = ws.dataset().definition(ws.active.definition)
        except FibError:
            return  # nothing to keep warm here (no torch, say): the gate itself will say why
        dataset_root = ws.dataset_root
        assert dataset_root is not None  # ws.dataset() above raised otherwise
        pool = worker_pool(
            options.backend,
            found,
            engine_config(options.backend, definition, dataset_root, options),
            options,
        )
        warm.prewarm(pool, 0)

    def close(self) -> None:
        """No warm worker outlives the app."""
        if self.warm is not None:
            self.warm.close()
