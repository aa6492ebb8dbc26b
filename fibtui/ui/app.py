"""The fibtui application: header, six panes (keys 1-6), footer, command palette, watch mode.

``make_app`` is the factory shared by the CLI and the tests. The app is the shell: the layout,
pane switching, focus, themes (fibtui.ui.theming), the footer (fibtui.ui.footer), the palette
(fibtui.ui.palette), the global keys and quitting. Panes own their data (loaded in thread workers,
received as messages: fibtui.ui.messages) and their keys' work; the run slot, gates, sweeps and
watch mode are the run controller's (fibtui.ui.controller).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, ClassVar, TypeVar

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.css.query import NoMatches
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from fibtui.core.errors import FibError
from fibtui.core.workspace import Workspace
from fibtui.resources import bundled
from fibtui.ui import keys
from fibtui.ui.controller import RunControl
from fibtui.ui.footer import PaneFooter
from fibtui.ui.hangups import Hangups
from fibtui.ui.keys import PANE_ACTIONS, PANES
from fibtui.ui.messages import (
    OpenVerdict,
)
from fibtui.ui.palette import Command, FibCommands, palette_commands
from fibtui.ui.panes.base import Pane, elide_middle
from fibtui.ui.panes.history import HistoryPane
from fibtui.ui.panes.ncu import NcuPane
from fibtui.ui.panes.promotion import PromotionPane
from fibtui.ui.panes.recon import ReconPane
from fibtui.ui.panes.regimes import RegimesPane
from fibtui.ui.panes.runs import RunsPane
from fibtui.ui.run_keys import RunKeys
from fibtui.ui.safe_text import ControlCharacters
from fibtui.ui.startup import (
    SWITCH_INTERVAL_S,
    default_demo_dir,
    open_demo_workspace,
    release_collector,
    tune_collector,
)

if TYPE_CHECKING:
    from textual._path import CSSPathType
    from textual.binding import BindingType
    from textual.filter import LineFilter

__all__ = ["INITIAL_PANE", "PANES", "SWITCH_INTERVAL_S", "FibApp", "PaneFooter", "make_app"]

#: the pane in view at start: the only one whose widgets the first frame mounts (Pane.build)
INITIAL_PANE = "regimes"
#: how long the other panes wait for the data of the pane in view before they load anyway
FIRST_DATA_WAIT_S = 2.0
#: the header's cells besides the title: its icon, margins and the room Textual keeps at the right
HEADER_MARGIN = 24

P = TypeVar("P", bound=Pane)


class PaneTabs(TabbedContent):
    """TabbedContent that follows focus only while focus is still in the pane: Textual shows the
    pane of a newly focused widget through a message handled a moment later, so a pane key typed
    in between (focus moved on, or cleared) was undone by it."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()  # else TabbedContent's own handler runs too (Textual calls each class's)
        app = self.app
        focused = app.focused
        wanted = app.wanted_pane if isinstance(app, FibApp) else None
        if (
            event.tab_pane.id is not None
            and focused is not None
            and event.tab_pane in focused.ancestors
            and wanted in (None, event.tab_pane.id)
        ):
            self.active = event.tab_pane.id


class FibApp(RunKeys):
    CSS_PATH: ClassVar[CSSPathType | None] = str(bundled("themes") / "app.tcss")
    TITLE: str | None = "fibtui"
    COMMANDS = App.COMMANDS | {FibCommands}
    BINDINGS: ClassVar[list[BindingType]] = [*keys.BINDINGS]

    def __init__(
        self,
        workspace: Workspace | None,
        *,
        watch: bool = False,
        cwd: str | None = None,
        demo_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self._start_watching = watch
        self.cwd = cwd or os.getcwd()
        self.demo_dir = demo_dir
        #: the pane the user asked for last (a pane key, the palette): focus follows it
        self.wanted_pane: str | None = None
        #: the run slot, gates, sweeps and watch mode
        self.run_control = RunControl(self)
        #: the Runs pane (kept: it is gone from the DOM by the time the app unmounts)
        self._runs_pane: RunsPane | None = None
        self._panes: dict[str, Pane] = {}
        self._tabs: TabbedContent | None = None
        #: panes given the workspace (set_workspace: their loading workers started)
        self._loaded: set[str] = set()
        #: the first frame is on screen (Textual's Ready); until then the workspace waits to load
        self._first_frame = False
        self._load_waits = False
        self._full_sub_title: str | None = None
        self._switch_interval = sys.getswitchinterval()
        #: SIGHUP and SIGTERM: the run in flight is interrupted, then the app ends
        self._hangups = Hangups(self._hung_up)
        self.set_titles()
        self.choose_theme()

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # the layout classes before any widget is styled (set after, they restyle every widget)
        width, height = self.size
        self._fit(width, height)
        yield Header()
        with PaneTabs(initial=INITIAL_PANE, id="main-tabs") as tabs:
            self._tabs = tabs
            for pane in PANES:
                with TabPane(f"{pane.key} {pane.title}", id=pane.id):
                    # the panes out of view mount their widgets after the first frame
                    widget = pane.widget(id=f"{pane.id}-pane", deferred=pane.id != INITIAL_PANE)
                    self._panes[pane.id] = widget
                    yield widget
        self._runs_pane = self._pane_of("runs", RunsPane)  # check_action asks it at once
        yield PaneFooter(compact=width < 100)

    def set_titles(self) -> None:
        ws = self.workspace
        if ws is None:
            self.sub_title = "no workspace"
            return
        control = self.run_control
        active = ws.active
        definition = active.definition if active else "no valid config"
        # the states first: at 80 columns the end of the line is what the header cuts
        flags = ("WATCHING · " if control.watch.on else "") + (
            "QUITS AFTER THE RUN · " if control.quit_when_run_ends else ""
        )
        gate_choice, base = control.gates.gate_choice, control.gates.base_choice
        gate = gate_choice.label if gate_choice is not None else (active.name if active else None)
        against = (
            f" vs {base.label.split(' (')[0]}" if base is not None and base.path is not None else ""
        )
        full = flags + (f"{gate}{against} · " if gate else "") + f"{definition} · {ws.root.name}"
        self._full_sub_title = full
        self.sub_title = elide_middle(full, self._title_room())

    def _title_room(self) -> int:
        """Cells the header has for the sub-title: the screen's width less its icon, the
        title and their margins (Textual's Header cuts the end; fibtui elides the middle)."""
        width = self.size.width if self.is_running else 0
        return max(20, (width or 200) - len(self.title) - 3 - HEADER_MARGIN)

    _control_filter = ControlCharacters()

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters (monochrome, dim) and, always, the control-character filter: no
        name or message from a file can act on the terminal (fibtui.ui.safe_text)."""
        return [*super().get_line_filters(), self._control_filter]

    def on_mount(self) -> None:
        from fibtui.ui.user_config import load_keymap

        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)

        keymap = load_keymap()
        if keymap:
            self.set_keymap(keymap)
        self._runs_pane = self._pane_of("runs", RunsPane)
        self._hangups.catch()
        if self.workspace is None:
            from fibtui.ui.screens.no_workspace import NoWorkspaceScreen

            _ = self.push_screen(
                NoWorkspaceScreen(self.cwd, self.demo_dir or str(default_demo_dir())),
                self._on_no_workspace,
            )
        else:
            self._use_workspace(self.workspace)

    def _use_workspace(self, ws: Workspace) -> None:
        self.workspace = ws
        self.set_titles()
        for pane in PANES:  # every pane knows the workspace at once (a key may act before loading)
            self.pane(pane.id).workspace = ws
        # focus in the pane in view before the first frame (a focus change repaints the screen)
        self.wanted_pane = self.active_pane
        self._focus_into(self.wanted_pane)
        # Paint first, then load: the visible pane right after the first frame, the others once
        # its data is in (their workers import polars, git, plotext; on two cores they would
        # halve the speed of the one whose data is awaited).
        if self._first_frame:
            self.call_after_refresh(self._load_panes, ws)
        else:
            self._load_waits = True

    def on_ready(self) -> None:
        """The first frame is on screen: the pane in view starts loading now, not after the frames
        that follow it (the tables' own layout passes: ~100 ms here before a call_after_refresh ran)."""
        self._first_frame = True
        if self.workspace is None:  # nothing loads before a workspace is chosen
            release_collector()
        if self._load_waits and self.workspace is not None:
            self._load_waits = False
            self._load_panes(self.workspace)

    def _load_panes(self, ws: Workspace) -> None:
        visible = self.active_pane
        self._load_pane(visible)
        self.wanted_pane = visible
        self.call_after_refresh(
            self._focus_into, visible
        )  # keys go to the pane in view from the start
        self._load_rest(visible)
        self.set_timer(3.0, tune_collector)
        if self._start_watching:
            self._start_watching = False
            self.set_timer(0.2, self.action_toggle_watch)

    def _load_pane(self, pane_id: str) -> None:
        """Give a pane the workspace (its loading workers start) once, once it is built."""
        pane = self.pane(pane_id)

        def load() -> None:
            if self.workspace is not None and pane_id not in self._loaded:
                self._loaded.add(pane_id)
                pane.set_workspace(self.workspace)

        pane.when_built(load)

    @work(group="panes", exit_on_error=False)
    async def _load_rest(self, visible: str) -> None:
        """Build and load the panes out of view, one a frame, after the data of the pane in view
        (or FIRST_DATA_WAIT_S at most)."""
        shown = self.pane(visible)
        deadline = time.monotonic() + FIRST_DATA_WAIT_S
        while time.monotonic() < deadline and any(
            w.node is shown and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
            for w in self.workers
        ):
            await asyncio.sleep(0.02)
        await self._next_frame()  # its rows painted first
        release_collector()
        self.run_control.gates.ask_backend()
        self.run_control.gates.read_quick_history()
        for pane in PANES:
            if pane.id != visible:
                await self._open_pane(pane.id)
                await self._next_frame()

    async def _open_pane(self, pane_id: str) -> None:
        await self.pane(pane_id).build()
        self._load_pane(pane_id)

    async def _next_frame(self) -> None:
        painted = asyncio.Event()
        self.call_after_refresh(painted.set)
        await painted.wait()

    # -- the panes ------------------------------------------------------------------------------

    def pane(self, pane_id: str) -> Pane:
        found = self._panes.get(pane_id)
        return found if found is not None else self.query_one(f"#{pane_id}-pane", Pane)

    def _pane_of(self, pane_id: str, kind: type[P]) -> P:
        pane = self.pane(pane_id)
        assert isinstance(pane, kind), f"#{pane_id}-pane is a {type(pane).__name__}"
        return pane

    @property
    def runs_pane(self) -> RunsPane:
        return self._pane_of("runs", RunsPane)

    @property
    def recon_pane(self) -> ReconPane:
        return self._pane_of("recon", ReconPane)

    @property
    def regimes_pane(self) -> RegimesPane:
        return self._pane_of("regimes", RegimesPane)

    @property
    def ncu_pane(self) -> NcuPane:
        return self._pane_of("ncu", NcuPane)

    @property
    def promotion_pane(self) -> PromotionPane:
        return self._pane_of("promotion", PromotionPane)

    @property
    def history_pane(self) -> HistoryPane:
        return self._pane_of("history", HistoryPane)

    @property
    def kept_runs_pane(self) -> RunsPane | None:
        """The Runs pane, also once the app is unmounting (gone from the DOM); None before compose."""
        return self._runs_pane

    def is_shown(self, pane_id: str) -> bool:
        return self.active_pane == pane_id

    @property
    def main_tabs(self) -> TabbedContent | None:
        return self._tabs

    @property
    def active_pane(self) -> str:
        tabs = self._tabs if self._tabs is not None else self.query_one("#main-tabs", TabbedContent)
        return (
            tabs.active or INITIAL_PANE
        )  # "" until the tabs have processed their first activation

    # -- actions ------------------------------------------------------------------------------

    async def action_show_pane(self, pane_id: str) -> None:
        """A pane key: show_pane, and a pane shown before its turn is built before the next key
        is handled (a key for it, typed next, then finds its widgets)."""
        self.show_pane(pane_id)
        if not self.pane(pane_id).built:
            await self._open_pane(pane_id)

    def show_pane(self, pane_id: str) -> None:
        """Show a pane and move focus into it. Focus left in the pane being hidden would pull it
        back: Textual's TabbedContent shows the pane that holds the focused widget.

        The screen is laid out at once (refresh(layout=True)): the blur repaints the whole screen
        (Screen.focused), and without it the first frame after the key was that repaint of the
        old layout, the new pane's layout request still queued, and the pane showed two frames
        later, after the footer's update. Focus goes in after the pane's first frame."""
        self.wanted_pane = pane_id
        self.restyle_stale(pane_id)
        target = self.pane(pane_id)
        focused = self.focused
        if focused is not None and target not in focused.ancestors:
            self.set_focus(None)
        self.query_one("#main-tabs", TabbedContent).active = pane_id
        self.screen.refresh(layout=True)
        if not target.built:  # shown before its turn: built now, focus goes in once it is
            self.call_later(self._open_pane, pane_id)
            target.when_built(lambda: self.call_after_refresh(self._focus_into, pane_id))
        self.call_after_refresh(self._focus_into, pane_id)

    def _focus_into(self, pane_id: str) -> None:
        if (
            self.active_pane != pane_id or len(self.screen_stack) > 1
        ):  # another pane since, or a dialog on top
            return
        focused = self.focused
        pane = self.pane(pane_id)
        if focused is not None and pane in focused.ancestors:
            return
        widget = pane.focus_target()
        if (
            widget is not None
        ):  # now, not later (Widget.focus defers): a key typed next must not undo it
            self.screen.set_focus(widget, scroll_visible=False)

    def action_maximize_panel(self) -> None:
        """z: the focused panel fills the screen; z again (or escape) gives the layout back."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        widget = self.focused
        if widget is None:
            widget = self.pane(self.active_pane).focus_target()
        if widget is None:
            self.notify("nothing to maximize here: move focus onto a panel first (tab)")
            return
        # any focused panel, a scrolling container too (Textual's own maximize refuses those:
        # History's summary is one)
        screen.maximized = widget

    def action_leave_input(self) -> None:
        """Escape in a text box gives focus back to the pane, so the next key is a key again."""
        from textual.widgets import Input

        if self.screen.maximized is not None:
            self.screen.minimize()
            return
        if isinstance(self.focused, Input):
            target = self.pane(self.active_pane).focus_target()
            if target is None or isinstance(target, Input):
                self.set_focus(None)
            else:
                self.screen.set_focus(target, scroll_visible=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A pane's own keys act (and show in the footer) on that pane only; Cancel only while a
        run is in flight (the footer has no room to spare at 80 columns). Once the app is
        quitting no key acts: keys typed after q (a word typed into the wrong window, say) would
        open dialogs on an app that is being taken down."""
        if self._exit:  # Textual sets it in App.exit
            return False
        pane = PANE_ACTIONS.get(action)
        if pane is not None:
            try:
                return self.active_pane == pane
            except NoMatches:  # before the panes exist
                return False
        if action == "cancel_run" and self._runs_pane is not None:
            return self._runs_pane.busy
        return True

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """Layout classes for small terminals (80x24 over SSH): app.tcss gives the charts and
        tables of each pane the rows they need there. The header and the footer fit the width."""
        if self._full_sub_title is not None:
            self.sub_title = elide_middle(self._full_sub_title, self._title_room())
        if self.is_running:
            self.refresh_bindings()  # the footer keeps the keys that fit (PaneFooter)
        self.set_class(height < 32, "-short")
        self.set_class(width < 100, "-narrow")
        try:
            self.query_one(Footer).compact = width < 100
        except Exception:  # noqa: BLE001 - before compose
            pass

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id is not None:
            self.restyle_stale(event.pane.id)  # a click on the tab bar
        self.refresh_bindings()
        # a click on the tab bar (not a pane key, which set wanted_pane): focus follows the click;
        # an event about a pane that is no longer the one shown is stale and changes nothing
        if event.pane.id is not None and event.pane.id == self.active_pane != self.wanted_pane:
            self.wanted_pane = event.pane.id
            self.call_after_refresh(self._focus_into, event.pane.id)
        if event.pane.id == "runs":
            # live updates that waited while the pane was hidden: after the pane's first frame,
            # so the switch itself paints at once and the changed cells follow a frame later
            self.set_timer(0.05, self.runs_pane.flush)

    def action_show_keys(self) -> None:
        from fibtui.ui.screens.help import HelpKeysScreen

        _ = self.push_screen(HelpKeysScreen(keys.key_rows()))

    def palette_commands(self) -> list[Command]:
        return palette_commands(self)

    # -- quitting -------------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """Quit; with a run in flight, ask first (over SSH one stray key must not end a sweep)."""
        if self.run_control.ask_before_quitting():
            return
        self.interrupt_run("the app was closed")
        self.exit(0)

    def interrupt_run(self, reason: str) -> None:
        """Stop the run in flight because the app ends (quit, SIGHUP, SIGTERM): RunsPane.interrupt
        (the jobs in flight stay pending; the run reads ``interrupted``)."""
        if self._runs_pane is not None:
            self._runs_pane.interrupt(reason)

    def _hung_up(self, signum: int) -> None:
        import signal

        self.interrupt_run(f"{signal.Signals(signum).name} received")
        self.exit(return_code=128 + signum)

    def on_unmount(self) -> None:
        # however the app ends (q, ctrl+c, a signal, a test's pilot): the run in flight is
        # interrupted (cancel first; its thread stops its workers) and no warm worker outlives it
        self.interrupt_run("the app was closed")
        self._hangups.release()
        self.run_control.gates.close()
        sys.setswitchinterval(self._switch_interval)

    # -- the panes' keys ------------------------------------------------------------------------

    def action_open_demo(self) -> None:
        self._open_demo()

    def action_refresh(self) -> None:
        """r: the pane in view loads its data again (Pane.reload); on the Runs pane a cancelled
        or interrupted run shown is resumed instead."""
        if self.workspace is None:
            return
        pane = self.pane(self.active_pane)
        if isinstance(pane, RunsPane) and pane.can_resume:
            self.action_resume_run()
            return
        pane.when_built(pane.reload)
        if isinstance(pane, ReconPane):
            self.notify("refreshing the reference repos…")

    def _pane_key(self, pane_id: str, kind: type[P], key: Callable[[P], object]) -> None:
        """A pane's own key: ``key`` called on the pane in view, now or once it is built."""
        if self.active_pane == pane_id:
            pane = self._pane_of(pane_id, kind)
            pane.when_built(partial(key, pane))

    def action_pin(self) -> None:
        self._pane_key("regimes", RegimesPane, RegimesPane.toggle_pin)

    def action_search(self) -> None:
        self._pane_key("recon", ReconPane, ReconPane.focus_search)

    def action_add_hit(self) -> None:
        self._pane_key("recon", ReconPane, ReconPane.add_selected_hit)

    def action_delete_note_row(self) -> None:
        self._pane_key("recon", ReconPane, ReconPane.delete_note_row)

    def action_write_note(self) -> None:
        self._pane_key("recon", ReconPane, ReconPane.write_note)

    def action_decide(self, action: str) -> None:
        self._pane_key("promotion", PromotionPane, partial(PromotionPane.decide, action=action))

    def action_mark_baseline(self) -> None:
        self._pane_key("ncu", NcuPane, NcuPane.mark_baseline)

    @on(OpenVerdict)
    def _open_verdict(self, message: OpenVerdict) -> None:
        """History's enter on a paired run: the Promotion pane shows that run's verdict."""
        self.show_pane("promotion")
        pane = self.promotion_pane
        pane.when_built(partial(pane.show_run, message.run_id))

    # -- loading ----------------------------------------------------------------------------------

    def _on_no_workspace(self, open_demo: bool | None) -> None:
        if open_demo:
            self._open_demo()
        elif open_demo is None:  # escape: back to the empty app, not out of it
            self.notify("no workspace: ctrl+p → Open the bundled demo workspace, or q to quit")
        else:
            self.exit(0)

    @work(thread=True, exclusive=True, group="workspace", exit_on_error=False)
    def _open_demo(self) -> None:
        ws = open_demo_workspace(target=self.demo_dir)
        self.call_from_thread(self._use_workspace, ws)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            if event.worker.group == "backend":  # what waited for it is dropped; a key asks again
                self.run_control.gates.backend_failed()
            self.report_worker_failure(event.worker)

    def report_worker_failure(self, worker: Worker[object]) -> None:
        """The one place worker failures are handled: never a crash, always the error dialog."""
        from fibtui.ui.screens.error import ErrorScreen

        error = worker.error
        if isinstance(error, FibError):
            reason = error.one_line()
            details = ""
        else:
            import traceback

            reason = f"{type(error).__name__}: {error}"
            details = "".join(traceback.format_exception(error))[-3000:] if error else ""
        _ = self.push_screen(
            ErrorScreen(f"{worker.name or 'a background task'} failed", reason, details)
        )


def make_app(
    workspace: Workspace | None,
    *,
    watch: bool = False,
    cwd: str | None = None,
    demo_dir: str | None = None,
) -> FibApp:
    return FibApp(workspace, watch=watch, cwd=cwd, demo_dir=demo_dir)
