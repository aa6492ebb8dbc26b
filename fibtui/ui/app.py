"""The fibtui application: header, six panes (keys 1-6), footer, command palette.

``make_app`` is the factory shared by the CLI and the tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from fibtui.core.errors import FibError
from fibtui.core.workspace import Workspace
from fibtui.resources import bundled
from fibtui.ui.messages import DefinitionFailed, DefinitionLoaded
from fibtui.ui.panes.missing import MissingCore
from fibtui.ui.panes.regimes import RegimesPane
from fibtui.ui.screens.help import HelpKeysScreen
from fibtui.ui.screens.no_workspace import NoWorkspaceScreen


@dataclass(frozen=True)
class PaneInfo:
    id: str
    title: str
    key: str
    about: str


PANES: tuple[PaneInfo, ...] = (
    PaneInfo("recon", "Recon", "1", "reference repos, their state and the recon note"),
    PaneInfo("regimes", "Regimes", "2", "bands of the real workloads, shares, representatives, floors"),
    PaneInfo("runs", "Runs", "3", "live runs: per-workload status, progress, logs"),
    PaneInfo("ncu", "NCU", "4", "Nsight Compute tables and baseline-vs-candidate diffs"),
    PaneInfo("promotion", "Promotion", "5", "the verdict with its statistics, and the decision"),
    PaneInfo("history", "History", "6", "past rounds and runs from optimize_ops/"),
)

#: What each pane still lacks, shown in the pane itself until its core lands.
MISSING: dict[str, tuple[str, str]] = {
    "recon": ("Recon is not built yet.",
              "It needs fibtui/core/recon.py (refresh reference repos, search them, keep the recon note)."),
    "runs": ("Runs are not built yet.",
             "It needs the worker and the runners (fibtui/worker, fibtui/runners): local GPU, CPU interpreter."),
    "ncu": ("Nsight Compute is not built yet.",
            "It needs fibtui/core/ncu.py (import, classify, diff) and the ncu runner."),
    "promotion": ("Promotion is not built yet.",
                  "It needs fibtui/core/stats.py (paired verdict) and fibtui/core/archive.py."),
    "history": ("History is not built yet.",
                "It needs fibtui/core/archive.py to read rounds and runs from optimize_ops/."),
}


class PaneCommands(Provider):
    """Command palette: jump to any pane; state-dependent commands join as features land."""

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, FibApp)
        matcher = self.matcher(query)
        for pane in PANES:
            text = f"Show {pane.title} pane"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(app.action_show_pane, pane.id), help=pane.about)
        if app.workspace is None:
            text = "Open the bundled demo workspace"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), app.action_open_demo, help="copy it once and open it")


class FibApp(App[int]):
    CSS_PATH = str(bundled("themes") / "app.tcss")
    TITLE = "fibtui"
    COMMANDS = App.COMMANDS | {PaneCommands}
    BINDINGS = [
        *[
            Binding(p.key, f"show_pane('{p.id}')", p.title, id=f"pane.{p.id}", tooltip=f"Show the {p.title} pane: {p.about}")
            for p in PANES
        ],
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Quit fibtui"),
        Binding("question_mark", "show_keys", "Keys", id="app.keys", tooltip="List every key binding"),
    ]

    def __init__(self, workspace: Workspace | None, *, watch: bool = False, cwd: str | None = None,
                 demo_dir: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.watch_mode = watch
        self.cwd = cwd or os.getcwd()
        self.demo_dir = demo_dir
        self._set_titles()

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="regimes", id="main-tabs"):
            for pane in PANES:
                with TabPane(f"{pane.key} {pane.title}", id=pane.id):
                    if pane.id == "regimes":
                        yield RegimesPane(id="regimes-pane")
                    else:
                        what, needs = MISSING[pane.id]
                        yield MissingCore(what, needs, id=f"{pane.id}-missing")
        yield Footer()

    def _set_titles(self) -> None:
        ws = self.workspace
        if ws is None:
            self.sub_title = "no workspace"
            return
        active = ws.active
        definition = active.definition if active else "no valid config"
        self.sub_title = f"{ws.root.name} · {definition}" + (f" · {active.name}" if active else "")

    def on_mount(self) -> None:
        if self.workspace is None:
            self.push_screen(NoWorkspaceScreen(self.cwd, self.demo_dir or _default_demo_dir()), self._on_no_workspace)
        else:
            self.load_definition()

    # -- actions ------------------------------------------------------------------------------

    def action_show_pane(self, pane_id: str) -> None:
        self.query_one("#main-tabs", TabbedContent).active = pane_id

    def action_show_keys(self) -> None:
        rows = []
        for key, binding in self._all_bindings():
            rows.append((binding.key_display or key, binding.description or binding.action, binding.id or ""))
        self.push_screen(HelpKeysScreen(rows))

    def _all_bindings(self):
        seen = set()
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            for key in binding.key.split(","):
                if (key, binding.action) not in seen:
                    seen.add((key, binding.action))
                    yield key, binding

    async def action_quit(self) -> None:
        self.exit(0)

    def action_open_demo(self) -> None:
        self._open_demo()

    # -- loading ------------------------------------------------------------------------------

    def _on_no_workspace(self, open_demo: bool | None) -> None:
        if open_demo:
            self._open_demo()
        else:
            self.exit(0)

    @work(thread=True, exclusive=True, group="workspace", exit_on_error=False)
    def _open_demo(self) -> None:
        from fibtui.verbs.tui import open_demo_workspace

        ws = open_demo_workspace(target=self.demo_dir)
        self.call_from_thread(self._use_workspace, ws)

    def _use_workspace(self, ws: Workspace) -> None:
        self.workspace = ws
        self._set_titles()
        self.load_definition()

    @work(thread=True, exclusive=True, group="definition", exit_on_error=False)
    def load_definition(self) -> None:
        ws = self.workspace
        if ws is None or ws.active is None:
            self.post_message(DefinitionFailed("no valid solution config in this workspace (run: fibtui check)"))
            return
        try:
            ds = ws.dataset()
            definition = ds.definition(ws.active.definition)
            workloads = ds.workloads(definition.name)
        except FibError as exc:
            self.post_message(DefinitionFailed(exc.one_line()))
            return
        self.post_message(DefinitionLoaded(definition, workloads))

    @on(DefinitionLoaded)
    def _definition_loaded(self, message: DefinitionLoaded) -> None:
        self.query_one(RegimesPane).show(message.definition, message.workloads)

    @on(DefinitionFailed)
    def _definition_failed(self, message: DefinitionFailed) -> None:
        self.query_one(RegimesPane).show_error(message.reason)
        self.notify(message.reason, severity="error", timeout=8)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures are handled: never a crash, always a message."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            text = error.one_line() if isinstance(error, FibError) else f"{type(error).__name__}: {error}"
            self.notify(f"{event.worker.name or 'worker'} failed: {text}", severity="error", timeout=10)


def _default_demo_dir() -> str:
    from fibtui.verbs.tui import default_demo_dir

    return str(default_demo_dir())


def make_app(workspace: Workspace | None, *, watch: bool = False, cwd: str | None = None,
             demo_dir: str | None = None) -> FibApp:
    return FibApp(workspace, watch=watch, cwd=cwd, demo_dir=demo_dir)
