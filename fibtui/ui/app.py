"""The fibtui application: header, six panes (keys 1-6), footer, command palette, watch mode.

``make_app`` is the factory shared by the CLI and the tests. Panes load their data in thread
workers and receive it as messages; this module wires keys, dialogs and watch mode together.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.widgets._footer import FooterKey
from textual.worker import Worker, WorkerState

from fibtui.core.errors import FibError
from fibtui.core.status import TOOL_STATUSES
from fibtui.core.workspace import Workspace
from fibtui.resources import bundled
from fibtui.ui.panes.base import elide_middle
from fibtui.ui.panes.history import HistoryPane
from fibtui.ui.panes.ncu import NcuPane
from fibtui.ui.panes.promotion import PromotionPane
from fibtui.ui.panes.recon import ReconPane
from fibtui.ui.panes.regimes import RegimesPane
from fibtui.ui.panes.runs import RunsPane
from fibtui.ui.safe_text import ControlCharacters
from fibtui.ui.startup import default_demo_dir, open_demo_workspace, release_collector
from fibtui.ui.themes import DEFAULT_THEME, load_themes

if TYPE_CHECKING:
    from fibtui.core.plan import SweepEstimate

#: actions that belong to one pane: elsewhere their key does nothing and the footer hides it
PANE_ACTIONS = {
    "search": "recon",
    "add_hit": "recon",
    "delete_note_row": "recon",
    "write_note": "recon",
    "pin": "regimes",
    "retry_failed": "runs",
    "mark_baseline": "ncu",
    "decide": "promotion",
}

WATCH_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h", ".hpp", ".cc")
#: the pane in view at start: the only one whose widgets the first frame mounts (Pane.build)
INITIAL_PANE = "regimes"
#: how long the other panes wait for the data of the pane in view before they load anyway
FIRST_DATA_WAIT_S = 2.0
LARGE_SWEEP = 40
#: the header's cells besides the title: its icon, margins and the room Textual keeps at the right
HEADER_MARGIN = 24
#: the footer's keys dropped first when they do not fit the width (? and q never are)
FOOTER_DROP_ORDER = ("pick_candidate", "sweep", "toggle_watch", "gate", "cancel_run")
#: cells the footer keeps for the command palette's key at its right
FOOTER_PALETTE_CELLS = 13
#: "Cancel it and quit" waits this long at most for the run's thread to stop its workers
QUIT_WAIT_S = 10.0


@dataclass(frozen=True)
class PaneInfo:
    id: str
    title: str
    key: str
    about: str
    widget: type


PANES: tuple[PaneInfo, ...] = (
    PaneInfo("recon", "Recon", "1", "reference repos, their state and the recon note", ReconPane),
    PaneInfo(
        "regimes",
        "Regimes",
        "2",
        "bands of the real workloads, shares, representatives, floors",
        RegimesPane,
    ),
    PaneInfo("runs", "Runs", "3", "live runs: per-workload status, progress, logs", RunsPane),
    PaneInfo("ncu", "NCU", "4", "Nsight Compute tables and baseline-vs-candidate diffs", NcuPane),
    PaneInfo(
        "promotion",
        "Promotion",
        "5",
        "the verdict with its statistics, and the decision",
        PromotionPane,
    ),
    PaneInfo("history", "History", "6", "past rounds and runs from optimize_ops/", HistoryPane),
)


class PaneTabs(TabbedContent):
    """TabbedContent that follows focus only while focus is still in the pane: Textual shows the
    pane of a newly focused widget through a message handled a moment later, so a pane key typed
    in between (focus moved on, or cleared) was undone by it."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()  # else TabbedContent's own handler runs too (Textual calls each class's)
        focused = self.app.focused
        wanted = getattr(self.app, "wanted_pane", None)
        if (
            event.tab_pane.id is not None
            and focused is not None
            and event.tab_pane in focused.ancestors
            and wanted in (None, event.tab_pane.id)
        ):
            self.active = event.tab_pane.id


class PaneFooter(Footer):
    """Textual's Footer, showing the same keys in the same order, that changes only what changed.
    Textual's recomposes (every key removed, mounted again and restyled: ~30 ms here) on every
    bindings signal: each focus change and each refresh_bindings, several times a pane switch,
    mostly to show the same keys again. This one keeps every key it has shown: a pane switch shows
    and hides keys (display) and a recompose happens only for a key it has not met yet in a place
    it can take, a changed label or state, or a binding group (Textual's own compose then)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # the first compose shows the keys: Textual's Footer composes empty and recomposes on the
        # first bindings signal, a frame (and ~30 ms of mounting here) later
        self.set_reactive(Footer._bindings_ready, True)
        #: what was composed: every key entry in order, the palette key's entry; None: Textual's compose
        self._layout: tuple[list[tuple], tuple | None] | None = None
        self._key_widgets: list[FooterKey] = []

    def _wanted(self) -> tuple[list[tuple], tuple | None] | None:
        """What Textual's Footer would show now: one entry per key (key, label, description, action,
        enabled, tooltip), the first binding of each action in binding order, and the palette key;
        None when a binding group is shown (left to Textual's compose)."""
        app = self.app
        active = self.screen.active_bindings
        by_action: dict[str, tuple] = {}
        for _, binding, enabled, tooltip in active.values():
            if not binding.show:
                continue
            if binding.group is not None:
                return None
            by_action.setdefault(
                binding.action,
                (
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    tooltip,
                ),
            )
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, _ = found
                palette = (
                    binding.key,
                    app.get_key_display(binding),
                    binding.description,
                    binding.action,
                    enabled,
                    binding.tooltip or binding.description,
                )
        return _fitting(list(by_action.values()), app.size.width), palette

    def _merged(self, entries: list[tuple]) -> list[tuple]:
        """The keys composed before with the new ones each placed right after the key shown before
        it; the new entries alone where that order cannot hold them all."""
        if self._layout is None:
            return entries
        merged = list(self._layout[0])
        for i, entry in enumerate(entries):
            if entry not in merged:
                merged.insert(merged.index(entries[i - 1]) + 1 if i else 0, entry)
        return merged if _in_order(entries, merged) else entries

    def compose(self) -> ComposeResult:
        wanted = self._wanted()
        if wanted is None:
            self._layout, self._key_widgets = None, []
            yield from super().compose()
            return
        entries, palette = wanted
        layout = self._merged(entries)
        self._layout = (layout, palette)
        self._key_widgets = []
        shown = set(entries)
        self.styles.grid_size_columns = len(entries)
        for key, label, description, action, enabled, tooltip in layout:
            widget = FooterKey(
                key, label, description, action, disabled=not enabled, tooltip=tooltip
            )
            widget.data_bind(compact=Footer.compact)
            if (key, label, description, action, enabled, tooltip) not in shown:
                widget.display = False
            self._key_widgets.append(widget)
            yield widget
        if palette is not None:
            key, label, description, action, enabled, tooltip = palette
            yield FooterKey(
                key,
                label,
                description,
                action,
                classes="-command-palette",
                disabled=not enabled,
                tooltip=tooltip,
            )

    def bindings_changed(self, screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._update_keys)

    async def _update_keys(self) -> None:
        if not self.is_attached:
            return
        wanted = self._wanted()
        if wanted is not None and self._layout is not None:
            entries, palette = wanted
            layout, composed_palette = self._layout
            if palette == composed_palette and _in_order(entries, layout):
                shown = set(entries)
                for entry, widget in zip(layout, self._key_widgets, strict=True):
                    if widget.display != (entry in shown):
                        widget.display = entry in shown
                self.styles.grid_size_columns = len(entries)
                return
        await self.recompose()


def _fitting(entries: list[tuple], width: int) -> list[tuple]:
    """The footer's keys that fit ``width`` cells (compact: "k Label " each, the palette's key
    at the right): the global keys of FOOTER_DROP_ORDER go first, ``?`` and ``q`` never."""
    if width <= 0:
        return entries

    def cells(entry: tuple) -> int:
        return len(entry[1]) + len(entry[2]) + 2

    room = width - FOOTER_PALETTE_CELLS
    kept = list(entries)
    for action in FOOTER_DROP_ORDER:
        if sum(cells(e) for e in kept) <= room:
            break
        kept = [e for e in kept if e[3] != action]
    return kept


def _in_order(entries: list[tuple], layout: list[tuple]) -> bool:
    """Are ``entries`` all in ``layout``, in the same order?"""
    rest = iter(layout)
    return all(entry in rest for entry in entries)


def B(
    key: str,
    action: str,
    description: str,
    id: str,
    tooltip: str,
    show: bool = True,
    key_display: str | None = None,
) -> Binding:
    return Binding(
        key, action, description, show=show, id=id, tooltip=tooltip, key_display=key_display
    )


class FibCommands(Provider):
    """Command palette: panes, themes, and what makes sense right now (state-dependent). The
    empty palette lists them all (``discover``); typing narrows them (``search``)."""

    async def discover(self) -> Hits:
        app = self.app
        assert isinstance(app, FibApp)
        for text, callback, help_text in app.palette_commands():
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        app = self.app
        assert isinstance(app, FibApp)
        matcher = self.matcher(query)
        for text, callback, help_text in app.palette_commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)


#: The interpreter lock's switch interval while the app runs (Python's default: 5 ms). The app's
#: threads (a verdict, a pane's loading) make many short blocking calls (stat, open, read) beside
#: the event loop's CPU work, and each call gives up the lock and may wait a whole interval to get
#: it back. Measured (2-core CPU): a run's verdict worked out in a thread took 30-40 ms alone,
#: 380-480 ms beside one busy thread at 5 ms, 120-190 ms at 1 ms.
SWITCH_INTERVAL_S = 0.001


def _tune_collector() -> None:
    """Keep the cyclic collector's full passes off the key path. Start-up (modules, panes, the
    loaded workspace) is frozen, so a full pass scans only what came after; full passes run a
    tenth as often (young passes are untouched, so short-lived cycles still go at once).
    Measured by scripts/bench_load.py: under a 4,000-job stream the default collector made 33
    full passes of ~110-370 ms each, which were the key-to-repaint tail."""
    import gc

    release_collector()
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, 100))


class FibApp(App[int]):
    CSS_PATH = str(bundled("themes") / "app.tcss")
    TITLE = "fibtui"
    COMMANDS = App.COMMANDS | {FibCommands}
    BINDINGS = [
        # the tab bar already shows each pane's digit: the footer keeps its room for the keys below
        *[
            B(
                p.key,
                f"show_pane('{p.id}')",
                p.title,
                f"pane.{p.id}",
                f"Show the {p.title} pane: {p.about}",
                show=False,
            )
            for p in PANES
        ],
        # the keys of one pane (PANE_ACTIONS): the footer shows them only on that pane
        B("f", "search", "Search", "recon.search", "Search the reference repos"),
        B("a", "add_hit", "Add to note", "recon.add", "Add the selected hit to the recon note"),
        B(
            "x",
            "delete_note_row",
            "Delete row",
            "recon.delete",
            "Delete the selected recon note row",
            show=False,
        ),
        B(
            "ctrl+s",
            "write_note",
            "Write note",
            "recon.write",
            "Write the recon note to optimize_ops/docs/",
        ),
        B(
            "p",
            "pin",
            "Pin",
            "regimes.pin",
            "Pin, exclude or return the selected workload to automatic (cycles)",
        ),
        B(
            "t",
            "retry_failed",
            "Retry",
            "run.retry",
            "Run the failed jobs of the selected run again",
        ),
        B(
            "b",
            "mark_baseline",
            "Baseline",
            "ncu.baseline",
            "Mark the selected NCU report as the diff baseline",
        ),
        B(
            "A",
            "decide('archive')",
            "Archive",
            "promotion.archive",
            "Archive the candidate and write the round summary",
        ),
        B(
            "P",
            "decide('promote')",
            "Promote",
            "promotion.promote",
            "Promote the candidate (asks first; needs PROMOTE)",
        ),
        B(
            "R",
            "decide('reject')",
            "Reject",
            "promotion.reject",
            "Reject the candidate and restore the previous best (asks first)",
        ),
        # everywhere
        B("g", "gate", "Gate", "run.gate", "Start a paired gate on the representative workloads"),
        B(
            "o",
            "pick_candidate",
            "Candidate",
            "run.pick",
            "Pick what g, s and watch mode run, and the baseline",
        ),
        B(
            "G",
            "gate_full",
            "Full gate",
            "run.gate_full",
            "The representative gate even on the CPU interpreter (g there checks the smallest workload of each band)",
            show=False,
        ),
        B(
            "s",
            "sweep",
            "Sweep",
            "run.sweep",
            "Start a full sweep of every workload (asks first when large)",
        ),
        B(
            "c",
            "cancel_run",
            "Cancel",
            "run.cancel",
            "Cancel the run in flight (it can be resumed)",
        ),
        B(
            "w",
            "toggle_watch",
            "Watch",
            "app.watch",
            "Watch the kernel files: rerun the gate on every save",
        ),
        B(
            "r",
            "refresh",
            "Refresh",
            "pane.refresh",
            "Refresh the current pane (Recon: refresh the repos; Runs: resume a cancelled or interrupted run)",
            show=False,
        ),
        B(
            "z",
            "maximize_panel",
            "Maximize",
            "app.maximize",
            "Maximize the focused panel (History's summary, NCU's diff, a table); z again restores",
            show=False,
        ),
        B(
            "ctrl+t",
            "next_theme",
            "Theme",
            "app.theme",
            "Switch to the next theme (remembered)",
            show=False,
        ),
        B("q", "quit", "Quit", "app.quit", "Quit fibtui (asks first while a run is in flight)"),
        B(
            "question_mark",
            "show_keys",
            "Keys",
            "app.keys",
            "List every key binding",
            key_display="?",
        ),
        B(
            "escape",
            "leave_input",
            "Leave box",
            "app.leave_input",
            "Leave a text box: focus goes back to the pane",
            show=False,
        ),
    ]

    @dataclass
    class WatchFired(Message):
        paths: list[str]
        detected: float

    @dataclass
    class BackendChosen(Message):
        """The backend g, s and watch mode run on, decided in a worker (_choose_backend)."""

        name: str

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
        self.watch_mode = False
        self._start_watching = watch
        self.cwd = cwd or os.getcwd()
        self.demo_dir = demo_dir
        self.note_acknowledged = False
        #: the pane the user asked for last (a pane key, the palette): focus follows it
        self.wanted_pane: str | None = None
        #: what g, s and watch mode run and against what (o); None: the workspace's solution
        #: against the promoted best when there is one
        self.gate_choice = None
        self.base_choice = None
        #: "Quit when it ends" was chosen while a run was in flight
        self.quit_when_run_ends = False
        self._pending_watch_gate = False
        #: the CPU quick gate of the last gate's options (core.quick), and the past job times
        #: its estimates read
        self.quick_gate = None
        self._quick_history = None
        #: a watch gate waits for the backend (_with_backend): a save meanwhile joins it
        self._watch_queued = False
        #: saves seen by watch mode (each WatchFired)
        self.watch_saves = 0
        #: "Cancel it and quit": the app ends once the run's thread has (LaunchEnded)
        self._quit_after_cancel = False
        self.watch_latencies_ms: list[float] = []
        self._watch_detected: float | None = None
        self._warm = None
        #: the backend g, s and watch mode run on (None until _choose_backend has decided), and
        #: what waits for it (_with_backend)
        self._backend_name: str | None = None
        self._backend_waiters: list[Callable[[], object]] = []
        self._backend_asked = False
        #: the Runs pane (kept: it is gone from the DOM by the time the app unmounts)
        self._runs_pane: RunsPane | None = None
        #: runs whose verdict the other panes' refresh waits for (RunsPane.VerdictReady)
        self._refresh_after: set[str] = set()
        #: runs that ended with rows this GPU could not run, whose send to Modal's B200 is to
        #: be offered after their verdict, and those offered once already (issue 31)
        self._may_send: set[str] = set()
        self._send_offered: set[str] = set()
        self._panes: dict[str, Any] = {}
        self._tabs: TabbedContent | None = None
        #: panes given the workspace (set_workspace: their loading workers started)
        self._loaded: set[str] = set()
        #: the first frame is on screen (Textual's Ready); until then the workspace waits to load
        self._first_frame = False
        self._load_waits = False
        #: signals whose handlers this app installed on its event loop (SIGHUP, SIGTERM), with
        #: the handlers they had before (put back when the app ends)
        self._signals_caught: dict[int, Any] = {}
        self._themes = load_themes()
        #: (theme, CSS sources) -> the stylesheet's parsed rules and sources (refresh_css)
        self._parsed_css: dict[tuple, tuple[list, dict]] = {}
        self._set_titles()
        self._choose_theme()

    def _choose_theme(self) -> None:
        """Register fibtui's themes and set the remembered one before anything is styled: set in
        on_mount, the theme change restyled every widget once more (a full CSS refresh) before the
        first frame. Set here, Textual applies it when the stylesheet is first parsed."""
        from fibtui.ui.user_config import load_settings

        for theme in self._themes:
            self.register_theme(theme)
        wanted = load_settings().get("theme", DEFAULT_THEME)
        names = {t.name for t in self._themes} | set(self.available_themes)
        self.theme = (
            wanted if wanted in names else (DEFAULT_THEME if DEFAULT_THEME in names else self.theme)
        )

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
        self._runs_pane = self._panes[
            "runs"
        ]  # check_action asks it from the footer's first compose
        yield PaneFooter(compact=width < 100)

    def _set_titles(self) -> None:
        ws = self.workspace
        if ws is None:
            self.sub_title = "no workspace"
            return
        active = ws.active
        definition = active.definition if active else "no valid config"
        # the states first: at 80 columns the end of the line is what the header cuts
        flags = ("WATCHING · " if self.watch_mode else "") + (
            "QUITS AFTER THE RUN · " if self.quit_when_run_ends else ""
        )
        gate = (
            self.gate_choice.label
            if getattr(self, "gate_choice", None) is not None
            else (active.name if active else None)
        )
        base = getattr(self, "base_choice", None)
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

    def get_line_filters(self):
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
        self._runs_pane = self.pane("runs")
        self._catch_hangups()
        if self.workspace is None:
            from fibtui.ui.screens.no_workspace import NoWorkspaceScreen

            self.push_screen(
                NoWorkspaceScreen(self.cwd, self.demo_dir or str(default_demo_dir())),
                self._on_no_workspace,
            )
        else:
            self._use_workspace(self.workspace)

    def _use_workspace(self, ws: Workspace) -> None:
        self.workspace = ws
        self._set_titles()
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
        self.set_timer(3.0, _tune_collector)
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
        self._ask_backend()
        self._read_quick_history()
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

    def _on_pane(self, pane_id: str, method: str, *args: Any) -> None:
        """Call a pane's method now, or once the pane is built (a key typed before its turn)."""
        pane = self.pane(pane_id)
        pane.when_built(lambda: getattr(pane, method)(*args))

    def pane(self, pane_id: str):
        found = self._panes.get(pane_id)
        return found if found is not None else self.query_one(f"#{pane_id}-pane")

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
        self._restyle_stale(pane_id)
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

    def refresh_css(self, animate: bool = True) -> None:
        """A theme switch restyles what is on screen only: the header, the footer, the pane in
        view and any dialog. The five hidden panes (most of the widgets) are restyled when they
        are shown next (_restyle_stale), one at a time: Textual restyles every widget of the app
        at once, which took most of a theme switch here. Any other CSS refresh is Textual's own."""
        tabs = self._tabs
        if not getattr(self, "_theme_switching", False) or tabs is None or not self.is_running:
            super().refresh_css(animate)
            return
        self._theme_switching = False
        stylesheet = self.stylesheet
        stylesheet.set_variables(self.get_css_variables())
        # the rules parsed for a theme are kept: switching back to it parses nothing (the
        # sources are the same while no new widget class brought its own CSS)
        key = (self.theme, tuple(stylesheet.source))
        cached = self._parsed_css.get(key)
        if cached is not None:
            stylesheet._rules, stylesheet.source = list(cached[0]), dict(cached[1])
            stylesheet._rules_map = None
            stylesheet._require_parse = False
        else:
            stylesheet.reparse()
            self._parsed_css[key] = (list(stylesheet.rules), dict(stylesheet.source))
        shown = self.active_pane
        hidden = {tp for tp in tabs.query(TabPane) if tp.id != shown}

        def walk(node):
            yield node
            for child in list(node._nodes):
                if child not in hidden:
                    yield from walk(child)

        stylesheet.update_nodes(walk(self), animate=animate)
        self._css_stale = {tp.id for tp in hidden if tp.id is not None}
        try:
            if self.screen.is_mounted:
                self.screen._refresh_layout(self.size)
                self.screen._css_update_count = self._css_update_count
        except Exception:  # noqa: BLE001 - no screen yet (Textual's own guard)
            pass
        for screen in self.screen_stack:  # a dialog on top: the screens below it too
            if screen is not self.screen:
                stylesheet.update_nodes(walk(screen), animate=animate)
                screen._css_update_count = self._css_update_count

    def _restyle_stale(self, pane_id: str) -> None:
        """A pane hidden during a theme switch takes the theme's styles as it is shown."""
        stale = getattr(self, "_css_stale", None)
        if not stale or pane_id not in stale:
            return
        stale.discard(pane_id)
        try:
            tab_pane = self.query_one(f"#{pane_id}", TabPane)
        except NoMatches:
            return
        self.stylesheet.update_nodes(tab_pane.walk_children(with_self=True), animate=False)

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
        if getattr(self, "_exit", False):  # Textual sets it in App.exit
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

    def on_resize(self, event) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        """Layout classes for small terminals (80x24 over SSH): app.tcss gives the charts and
        tables of each pane the rows they need there. The header and the footer fit the width."""
        if getattr(self, "_full_sub_title", None) is not None:
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
            self._restyle_stale(event.pane.id)  # a click on the tab bar
        self.refresh_bindings()
        # a click on the tab bar (not a pane key, which set wanted_pane): focus follows the click;
        # an event about a pane that is no longer the one shown is stale and changes nothing
        if event.pane.id is not None and event.pane.id == self.active_pane != self.wanted_pane:
            self.wanted_pane = event.pane.id
            self.call_after_refresh(self._focus_into, event.pane.id)
        if event.pane.id == "runs":
            # live updates that waited while the pane was hidden: after the pane's first frame,
            # so the switch itself paints at once and the changed cells follow a frame later
            self.set_timer(0.05, self.pane("runs").flush)

    def key_rows(self) -> list[tuple[str, str, str, str, str]]:
        """Every key for the ``?`` list, grouped by the pane it acts on: (group, key, action,
        what it does, id), with the keys remapped in keymap.toml shown as remapped."""
        keymap: dict[str, str] = {}
        try:
            from fibtui.ui.user_config import load_keymap

            keymap = load_keymap()
        except Exception:  # noqa: BLE001 - the list still shows the defaults
            keymap = {}
        titles = {p.id: p.title for p in PANES}
        order = ["Panes", "Everywhere", *(p.title for p in PANES)]
        rows = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            bid = binding.id or ""
            action = binding.action.split("(")[0]
            if bid.startswith("pane.") and bid != "pane.refresh":
                group = "Panes"
            elif action in PANE_ACTIONS:
                group = titles[PANE_ACTIONS[action]]
            elif binding.action in PANE_ACTIONS:
                group = titles[PANE_ACTIONS[binding.action]]
            else:
                group = "Everywhere"
            key = keymap.get(bid, binding.key_display or binding.key)
            rows.append((group, key, binding.description or binding.action, binding.tooltip, bid))
        rows.append(
            ("Everywhere", "ctrl+p", "Palette", "The command palette: every action by name", "")
        )
        rows.append(("Everywhere", "tab", "Next", "Focus the next panel (shift+tab: back)", ""))
        rows.sort(key=lambda r: order.index(r[0]) if r[0] in order else len(order))
        return rows

    def action_show_keys(self) -> None:
        from fibtui.ui.screens.help import HelpKeysScreen

        self.push_screen(HelpKeysScreen(self.key_rows()))

    async def action_quit(self) -> None:
        """Quit; with a run in flight, ask first (over SSH one stray key must not end a sweep)."""
        runs = self._runs_pane
        if runs is not None and runs.busy:
            from fibtui.ui.screens.confirm import ChoiceScreen

            def answered(choice: str | None) -> None:
                if choice == "cancel":
                    # the app stays up until the run's thread has stopped its workers (a few
                    # seconds at most), then ends: the terminal is given back clean, with no
                    # thread left that the process would wait for after it
                    self._interrupt_run("the app was closed")
                    if runs.busy:
                        self._quit_after_cancel = True
                        self.notify("stopping the run's workers, then quitting…")
                        self.set_timer(QUIT_WAIT_S, lambda: self.exit(0))
                    else:
                        self.exit(0)
                elif choice == "after":
                    self.quit_when_run_ends = True
                    self._set_titles()
                    self.notify("fibtui quits when the run ends (q again asks again)")

            self.push_screen(
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
            return
        self._interrupt_run("the app was closed")
        self.exit(0)

    def run_ended(self) -> None:
        """The Runs pane says the run in flight has ended (finished, failed or cancelled)."""
        if self.quit_when_run_ends:
            self.exit(0)

    def _interrupt_run(self, reason: str) -> None:
        """Stop the run in flight because the app ends (quit, SIGHUP, SIGTERM): its cancel event
        is set first, as an interrupt, and the runner's own thread then stops its workers, so the
        jobs in flight stay pending (never a kernel's failure) and the run reads ``interrupted``
        (``c``, the user's cancel, reads ``cancelled``). The process waits for that thread before it
        exits (asyncio.run waits for the executor's threads)."""
        import threading

        from fibtui.runners.journaling import interrupt

        # the pane's own event (RunsPane.cancel() sets it too, but cannot say why)
        cancel = getattr(self._runs_pane, "_cancel", None)
        if isinstance(cancel, threading.Event) and not cancel.is_set():
            interrupt(cancel, reason)

    def _catch_hangups(self) -> None:
        """SIGHUP (an SSH drop) and SIGTERM interrupt the run in flight first, then end the app."""
        import asyncio
        import signal

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig in (signal.SIGHUP, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._hung_up, sig)
            except (
                NotImplementedError,
                RuntimeError,
                ValueError,
            ):  # not the main thread, or no signals
                break
            self._signals_caught[sig] = previous

    def _release_hangups(self) -> None:
        import asyncio
        import signal

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig, previous in self._signals_caught.items():
            try:
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)
            except (NotImplementedError, RuntimeError, ValueError, TypeError):
                pass
        self._signals_caught = {}

    def _hung_up(self, signum: int) -> None:
        import signal

        self._interrupt_run(f"{signal.Signals(signum).name} received")
        self.exit(return_code=128 + signum)

    def on_unmount(self) -> None:
        # however the app ends (q, ctrl+c, a signal, a test's pilot): the run in flight is
        # interrupted (cancel first; its thread stops its workers) and no warm worker outlives it
        self._interrupt_run("the app was closed")
        self._release_hangups()
        if self._warm is not None:
            self._warm.close()
        sys.setswitchinterval(getattr(self, "_switch_interval", sys.getswitchinterval()))

    def action_open_demo(self) -> None:
        self._open_demo()

    def action_refresh(self) -> None:
        if self.workspace is None:
            return
        pane = self.active_pane
        if pane == "recon":
            self._on_pane("recon", "refresh_repos")
            self.notify("refreshing the reference repos…")
        elif pane == "regimes":
            self._on_pane("regimes", "analyze")
        elif pane == "runs":
            # r on a cancelled or interrupted run resumes it; else it refreshes the list
            if self.pane("runs").can_resume:
                self.action_resume_run()
            else:
                self._on_pane("runs", "refresh_list")
        elif pane == "ncu":
            self._on_pane("ncu", "refresh_reports")
        elif pane == "history":
            self._on_pane("history", "load")
        elif pane == "promotion":
            self._on_pane("promotion", "evaluate")

    def action_pin(self) -> None:
        if self.active_pane == "regimes":
            self._on_pane("regimes", "toggle_pin")

    def action_search(self) -> None:
        if self.active_pane == "recon":
            self._on_pane("recon", "focus_search")

    def action_add_hit(self) -> None:
        if self.active_pane == "recon":
            self._on_pane("recon", "add_selected_hit")

    def action_delete_note_row(self) -> None:
        if self.active_pane == "recon":
            self._on_pane("recon", "delete_note_row")

    def action_write_note(self) -> None:
        if self.active_pane == "recon":
            self._on_pane("recon", "write_note")

    def action_decide(self, action: str) -> None:
        if self.active_pane == "promotion":
            self._on_pane("promotion", "decide", action)

    def action_mark_baseline(self) -> None:
        if self.active_pane == "ncu":
            self._on_pane("ncu", "mark_baseline")

    def action_next_theme(self) -> None:

        names = [t.name for t in self._themes] or list(self.available_themes)
        current = names.index(self.theme) if self.theme in names else -1
        self._theme_switching = True
        self.theme = names[(current + 1) % len(names)]
        self._remember_theme(self.theme)
        self.notify(f"theme: {self.theme}")

    def set_theme_by_name(self, name: str) -> None:

        self._theme_switching = True
        self.theme = name
        self._remember_theme(name)

    @work(thread=True, exclusive=True, group="theme-save", exit_on_error=False)
    def _remember_theme(self, name: str) -> None:
        """settings.toml is written (parsed, rewritten, fsync'd) in a thread: on the event loop
        it held the theme's repaint back."""
        from fibtui.ui.user_config import save_setting

        save_setting("theme", name)

    # -- runs -----------------------------------------------------------------------------------

    def _backend(self) -> str:
        """The backend g, s and watch mode run on: the shared default of the CLI and the TUI
        (runners.registry.default_backend), decided once in a worker. The actions that need it
        wait for it (_with_backend); a thread that asks before it is known decides it there."""
        if self._backend_name is None:
            from fibtui.runners.registry import default_backend

            self._backend_name = default_backend()
        return self._backend_name

    def _ask_backend(self) -> None:
        if not self._backend_asked and self._backend_name is None:
            self._backend_asked = True
            self._choose_backend()

    @work(thread=True, group="backend", exit_on_error=False)
    def _choose_backend(self) -> None:
        """Detecting the backends runs nvidia-smi (up to 5 s): never on the event loop."""
        from fibtui.runners.registry import default_backend

        self.post_message(self.BackendChosen(default_backend()))

    @on(BackendChosen)
    def _backend_chosen(self, message: BackendChosen) -> None:
        if self._backend_name is None:
            self._backend_name = message.name
        waiting, self._backend_waiters = self._backend_waiters, []
        for callback in waiting:
            callback()

    def _with_backend(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` now when the backend is known, else once the worker has chosen it
        (a key typed in the first moments of the app)."""
        if self._backend_name is not None:
            callback()
            return
        self._backend_waiters.append(callback)
        self._ask_backend()

    def _baseline_dir(self) -> Path | None:
        """The promoted best solution, when there is one: gates are paired against it."""
        from fibtui.services.archive import best_solution_path

        ws = self.workspace
        if ws is None or ws.active is None:
            return None
        return best_solution_path(ws.archive_root, ws.active.language)

    def _gate_options(self, workloads: str, repeats: int = 1, quick: bool = True):
        """``quick``: on the CPU interpreter a gate takes the smallest workload of each band."""
        from fibtui.core import regimes
        from fibtui.services.runs import RunOptions

        if self.base_choice is None:
            best = self._baseline_dir()
            baseline = str(best) if best else None
        else:
            baseline = str(self.base_choice.path) if self.base_choice.path is not None else None
        solutions = (
            [str(self.gate_choice.path)]
            if self.gate_choice is not None and self.gate_choice.path
            else []
        )
        backend = self._backend()
        reps = None
        self.quick_gate = None
        if workloads == "rep":
            pane = self.pane("regimes")
            if self._quick_gate(backend, workloads, quick):
                from fibtui.core import quick as quick_gate

                self.quick_gate = quick_gate.choose(
                    pane.report,
                    self._quick_history,
                    budget_s=self._quick_budget(),
                    solutions=2 if baseline else 1,
                )
                reps = self.quick_gate.workloads or regimes.smallest_per_band(pane.report)
            else:
                reps = pane.representatives()
        return RunOptions(
            backend=backend,
            workloads=workloads,
            repeats=repeats,
            solutions=solutions,
            baseline=baseline,
            representatives=reps or None,
            warm=self._warm_workers(),
        )

    def _quick_budget(self) -> float:
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

    @work(thread=True, exclusive=True, group="quick-history", exit_on_error=False)
    def _read_quick_history(self) -> None:
        """Past interpreter job times of the definition (core.quick), for the quick gate's
        estimates: read in a thread at start and after each run's verdict."""
        from fibtui.core import quick

        ws = self.workspace
        report = self.pane("regimes").report
        if ws is None or ws.active is None:
            return
        sizes = {u: size for u, (_, size, _) in quick._sizes(report).items()} if report else None
        history = quick.read_history(ws.archive_root, ws.active.definition, sizes)
        self.call_from_thread(setattr, self, "_quick_history", history)

    def _quick_gate(self, backend: str, workloads: str, quick: bool = True) -> bool:
        """Does a gate take the smallest workload of each band? On the CPU interpreter, for the
        representative selection, once the Regimes pane has its bands."""
        return (
            quick
            and workloads == "rep"
            and backend == "interpreter"
            and self.pane("regimes").report is not None
        )

    def _choices(self):
        """(gates, baselines) for the picker: the workspace's solution, then its candidates newest
        first; the promoted best, the solution, the candidates, or no baseline."""
        from fibtui.ui.screens.candidate import Choice

        ws = self.workspace
        active = ws.active

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

        def note(c) -> str:
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
        best = self._baseline_dir()
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

    def action_pick_candidate(self) -> None:
        from fibtui.ui.screens.candidate import CandidateScreen

        if self.workspace is None or self.workspace.active is None:
            return
        gates, baselines = self._choices()
        gate_key = self.gate_choice.key if self.gate_choice is not None else "solution"
        base_key = (
            self.base_choice.key
            if self.base_choice is not None
            else ("best" if baselines[0].key == "best" else "none")
        )

        def picked(answer) -> None:
            if not answer:
                return
            gate, base = answer
            if gate.key == base.key and gate.key != "none":
                self.notify(
                    "the gate and its baseline are the same solution: pick another baseline",
                    severity="warning",
                )
                return
            self.gate_choice = None if gate.key == "solution" else gate
            self.base_choice = base
            self._set_titles()
            if self.watch_mode:  # watch the sources of what is gated now
                self.workers.cancel_group(self, "watch")
                self._watch(self._watch_folder())
            self.notify(f"g, s and watch mode: {gate.label} against {base.label}")

        self.push_screen(CandidateScreen(gates, baselines, gate_key, base_key), picked)

    def _watch_folder(self) -> Path:
        if self.gate_choice is not None and self.gate_choice.watch is not None:
            return self.gate_choice.watch
        return self.workspace.active.source_dir

    def action_gate(self) -> None:
        """The paired gate on the representatives; on the CPU interpreter, the quick correctness
        gate (the smallest workload of each band: seconds, where the representatives take
        minutes, and interpreter wall times give no speed verdict anyway). G runs the full one."""
        if self.workspace is None:
            return
        self._with_backend(self._gate)

    def _gate(self) -> None:
        options = self._gate_options("rep")
        label = self._gate_label()
        self._with_note_check(lambda: self._start(options, label))

    def _gate_label(self) -> str:
        """What a gate is, shown with its run: the quick gate says what it left out."""
        if self.quick_gate is None:
            return "representative gate"
        return f"CPU quick gate: {self.quick_gate.summary()} (G: the representatives)"

    def action_gate_full(self) -> None:
        if self.workspace is None:
            return
        self._with_backend(
            lambda: self._with_note_check(
                lambda: self._start(self._gate_options("rep", quick=False), "representative gate")
            )
        )

    def action_sweep(self) -> None:
        if self.workspace is None:
            return
        self._with_backend(self._sweep)

    def _sweep(self) -> None:
        options = self._gate_options("all")
        self._with_note_check(lambda: self._plan_sweep(options))

    def action_modal_sweep(self) -> None:
        """A full paired sweep fanned out over Modal containers: always asks first, with the plan."""
        if self.workspace is None:
            return
        self._with_backend(lambda: self._plan_modal(self._gate_options("all")))

    @work(thread=True, exclusive=True, group="modal-plan", exit_on_error=False)
    def _plan_modal(self, options) -> None:
        from fibtui.runners.modal_runner import plan_modal

        options.backend = "modal"
        options.warm = None
        plan = plan_modal(self.workspace, options)
        self.call_from_thread(self._confirm_modal, options, plan)

    def _confirm_modal(self, options, plan) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        lines = plan.lines()
        facts = [("", line.strip()) for line in lines[1:]]
        head = lines[0]
        self.push_screen(
            ConfirmScreen(
                "Modal fan-out: " + head, facts, "Start these containers? (GPU time is billed)"
            ),
            lambda ok: self._start(options, "Modal sweep") if ok else None,
        )

    @work(thread=True, exclusive=True, group="sweep-plan", exit_on_error=False)
    def _plan_sweep(self, options) -> None:
        """How many jobs a sweep runs and how long earlier runs took per job (core.plan's
        estimate, read from the files in a worker: the workloads file may be large), answered on
        the event loop."""
        from fibtui.core.plan import sweep_estimate

        try:
            est = sweep_estimate(
                self.workspace, options.backend, options.repeats, bool(options.baseline)
            )
        except FibError as exc:
            self.call_from_thread(self._sweep_refused, exc.one_line())
            return
        self.call_from_thread(self._confirm_sweep, options, est)

    def _sweep_refused(self, reason: str) -> None:
        from fibtui.ui.screens.error import ErrorScreen

        self.push_screen(ErrorScreen("cannot plan the sweep", reason))

    def _confirm_sweep(self, options, est: SweepEstimate) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        def go() -> None:
            self._start(options, "full sweep")

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
        self.push_screen(
            ConfirmScreen(f"Full sweep of {est.workloads} workloads", facts, "Start it?"),
            lambda ok: go() if ok else None,
        )

    def _with_note_check(self, go) -> None:
        from fibtui.core import recon
        from fibtui.ui.screens.confirm import ConfirmScreen

        ws = self.workspace
        repos = self.pane("recon").repo_count
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

        self.push_screen(
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

    def _start(self, options, label: str, send: Any = None) -> bool:
        """Claim the run slot now, on the UI thread (a second key or save a moment later finds
        it taken), then start the run once the Runs pane is built. False when a run holds it."""
        claimed = self.pane("runs").claim(say=True)
        if claimed is None:
            return False
        self.show_pane("runs")
        self._on_pane("runs", "start", options, label, claimed, send)
        return True

    def action_cancel_run(self) -> None:
        runs = self.pane("runs")
        run_id = runs.active_run
        if runs.cancel():
            self.notify(
                f"cancelling run {run_id}: r on the Runs pane resumes it "
                f"(or: fibtui run --resume {run_id})"
                if run_id
                else "cancelling the gate being started"
            )
        else:
            self.notify("no run in flight", severity="warning")

    def action_resume_run(self) -> None:
        runs = self.pane("runs")
        run_id = runs.shown_run
        if runs.resume():
            self.show_pane("runs")
            self.notify(f"resuming run {run_id}: its jobs left, in the same journal")
        else:
            self.notify(
                "the run shown cannot be resumed (not cancelled or interrupted, or a run is going)",
                severity="warning",
            )

    def action_retry_failed(self) -> None:
        self._on_pane("runs", "retry_failed")

    @on(RunsPane.RunEvent)
    def _run_event(self, message: RunsPane.RunEvent) -> None:
        from fibtui.runners.events import JobStarted, RunFinished

        if isinstance(message.event, JobStarted) and self._watch_detected is not None:
            self.watch_latencies_ms.append((time.monotonic() - self._watch_detected) * 1000)
            self._watch_detected = None
        if isinstance(message.event, RunFinished):
            record = message.event.record
            if record is not None and any(j.status in TOOL_STATUSES for j in record.jobs):
                self._may_send.add(message.run_id)  # a run without such rows reads nothing more
            if self._pending_watch_gate:
                # a save while the gate ran: its gate follows once this run's thread has ended
                # (LaunchEnded), and the other panes' refreshes after that gate's verdict
                self._refresh_after.discard(message.run_id)
            else:
                # the Runs pane works out the run's verdict first, alone; the other panes and the
                # next worker follow its VerdictReady (below)
                self._refresh_after.add(message.run_id)

    @on(HistoryPane.OpenVerdict)
    def _open_verdict(self, message: HistoryPane.OpenVerdict) -> None:
        """History's enter on a paired run: the Promotion pane shows that run's verdict."""
        self.show_pane("promotion")
        self._on_pane("promotion", "show_run", message.run_id)

    @on(RunsPane.LaunchEnded)
    def _slot_freed(self, message: RunsPane.LaunchEnded) -> None:
        """The run slot is free: the gate of the save that replaced the one in it starts now."""
        if self._quit_after_cancel:
            self.exit(0)
            return
        if self._pending_watch_gate:
            self._pending_watch_gate = False
            if self.watch_mode:
                self._queue_watch_gate()

    @on(RunsPane.VerdictReady)
    def _after_verdict(self, message: RunsPane.VerdictReady) -> None:
        """A run's verdict is on screen: now the panes that read the archive catch up (History's
        chart, the regime analysis's latency shares, the Promotion panel, which is handed the
        comparison the verdict came from rather than working it out again) and the next gate's
        worker is made ready. Before, all of this started with the run's end, in threads beside
        the verdict's, and on the H200 a watch-mode verdict came 0.6-1.3 s after its run ended."""
        if message.run_id not in self._refresh_after:
            return  # a watch gate started at the run's end: its own verdict brings the refresh
        self._refresh_after.discard(message.run_id)
        self._on_pane("history", "load")
        if message.outcome is not None:
            self._on_pane("promotion", "evaluate", message.run_id, message.outcome)
        else:
            self._on_pane("promotion", "evaluate")
        self._on_pane("regimes", "analyze")
        self._read_quick_history()
        if self.watch_mode or self._keep_worker_warm():
            self._prewarm()
        if message.run_id in self._may_send and message.run_id not in self._send_offered:
            self._may_send.discard(message.run_id)
            self._send_offered.add(message.run_id)
            self._plan_send(message.run_id, quiet=True)

    # -- what this GPU cannot run, sent to Modal's B200 (issue 31) ------------------------------

    def action_send_unsupported(self) -> None:
        """The shown run's jobs this GPU lacks the architecture for, on Modal's B200: the plan
        and its worst-case cost first, always asked (the palette's entry; a run's end offers it
        by itself)."""
        run_id = self.pane("runs").shown_run
        if run_id is None:
            self.notify("no run selected", severity="warning")
            return
        self._plan_send(run_id, quiet=False)

    @work(thread=True, exclusive=True, group="send-plan", exit_on_error=False)
    def _plan_send(self, run_id: str, quiet: bool) -> None:
        """plan_send reads the run's journal and Modal's settings (files, no network): in a
        thread, answered on the event loop. ``quiet``: after a run, say nothing when there is
        nothing to send."""
        from fibtui.runners.split import plan_send

        try:
            send = plan_send(self.workspace, run_id)
        except FibError as exc:
            if not quiet:
                self.call_from_thread(
                    self.notify, f"cannot plan the send: {exc.one_line()}", severity="error"
                )
            return
        if send is None:
            if not quiet:
                self.call_from_thread(
                    self.notify, f"run {run_id} has no job a B200 could run that this GPU could not"
                )
            return
        self.call_from_thread(self._confirm_send, send)

    def _confirm_send(self, send) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        lines = send.lines()
        self.push_screen(
            ConfirmScreen(
                "Cannot run here: " + lines[0],
                [("", line.strip()) for line in lines[1:]],
                "Run them on Modal's B200 in the same run? (GPU time is billed)",
                yes="Send (y)",
                no="Not now (n)",
            ),
            lambda ok: self._start(None, "send to Modal's B200", send=send) if ok else None,
        )

    # -- watch mode -------------------------------------------------------------------------------

    def action_toggle_watch(self) -> None:
        if self.workspace is None or self.workspace.active is None:
            return
        if self.watch_mode:
            self.watch_mode = False
            self.workers.cancel_group(self, "watch")
            self.notify("watch mode off")
        else:
            self.watch_mode = True
            self._watch(self._watch_folder())
            self._prewarm()
            self.notify(f"watching {self._watch_folder()}: a save reruns the gate")
        self._set_titles()

    def _keep_worker_warm(self) -> bool:
        """After a run, start the next gate's worker ahead of time (torch, triton and, on a GPU,
        the first CUPTI session: about 10 s on the H200) unless ``[tui] keep_worker_warm = false``
        in fibtui.toml (it holds one idle worker process, with a CUDA context on a GPU)."""
        from fibtui.core.settings import get_setting

        try:
            return get_setting(self.workspace.root, "tui.keep_worker_warm", True) is not False
        except FibError:
            return True  # a broken fibtui.toml is reported where it is read for its own tables

    def _prewarm(self) -> None:
        """Keep one worker process started (torch and triton imported) for the next gate: its
        options are read here, on the event loop (they come from the panes), and the worker
        starts in a thread."""
        self._with_backend(lambda: self._prewarm_with(self._gate_options("rep")))

    def _warm_workers(self):
        """Where gates find a started worker: the worker service's (so the first gate of a
        session takes one a CLI run left ready), unless ``[workers] daemon = false``. Made once,
        on the event loop."""
        from fibtui.runners.service.client import warm_workers_for

        if self._warm is None and self.workspace is not None:
            ws = self.workspace
            self._warm = warm_workers_for(ws.root, ws.state_dir)
        if hasattr(self._warm, "keep_given_back"):  # its own warm workers (the service is off)
            self._warm.keep_given_back = self._keep_worker_warm()
        return self._warm

    @work(thread=True, exclusive=True, group="warm", exit_on_error=False)
    def _prewarm_with(self, options) -> None:
        from fibtui.runners.local import worker_pool
        from fibtui.services.runs import check_backend, engine_config

        ws = self.workspace
        if self._warm is None:  # made on the event loop by _gate_options; a thread only reads it
            return
        if self._warm.count():
            return
        try:
            found = check_backend(options.backend)
            definition = ws.dataset().definition(ws.active.definition)
        except FibError:
            return  # nothing to keep warm here (no torch, say): the gate itself will say why
        pool = worker_pool(
            options.backend,
            found,
            engine_config(options.backend, definition, ws.dataset_root, options),
            options,
        )
        self._warm.prewarm(pool, 0)

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def _watch(self, folder: Path) -> None:
        """Post WatchFired for the saves under ``folder``: from the file system's events, or,
        where those cannot be had (a host out of inotify instances or watches, a file system
        without them), by polling every 0.2 s, said once in a notification."""
        try:
            await self._watch_saves(folder, polling=False)
            why = "the file watcher stopped"
        except Exception as exc:  # noqa: BLE001 - whatever stops it, say so and poll
            why = f"{type(exc).__name__}: {exc}"
        if not self.watch_mode:
            return
        self.notify(
            f"watch mode: no file events here ({why}); polling for saves every 0.2 s",
            severity="warning",
            timeout=10,
        )
        await self._watch_saves(folder, polling=True)

    async def _watch_saves(self, folder: Path, polling: bool) -> None:
        from watchfiles import awatch

        async for changes in awatch(
            folder,
            debounce=40,
            step=10,
            recursive=True,
            force_polling=True if polling else None,
            poll_delay_ms=200,
        ):
            detected = time.monotonic()
            paths = [p for _, p in changes if p.endswith(WATCH_SUFFIXES) and "__pycache__" not in p]
            if paths and self.watch_mode:
                self.post_message(self.WatchFired(paths, detected))

    @on(WatchFired)
    def _watch_fired(self, message: WatchFired) -> None:
        """A save: decided here, on the UI thread, before any thread starts. One gate at a time:
        a gate queued (waiting for the backend), being started or running is replaced by this
        save's (the newest save wins: the gate reads the files when it starts)."""
        self._watch_detected = message.detected
        names = ", ".join(Path(p).name for p in message.paths[:3])
        self.watch_saves += 1
        if self._watch_queued:
            return  # the queued gate has not read the files yet: it runs this save
        runs = self.pane("runs")
        if runs.busy:
            self._pending_watch_gate = True
            runs.cancel()
            self.notify(f"saved {names}: cancelling the gate in flight, then rerunning it")
            return
        self.notify(f"saved {names}: rerunning the gate")
        self._queue_watch_gate()

    def _queue_watch_gate(self) -> None:
        self._watch_queued = True
        self._with_backend(self._watch_gate)

    def _watch_gate(self) -> None:
        self._watch_queued = False
        runs = self.pane("runs")
        if runs.busy:  # a key started a run meanwhile: the save replaces it
            self._pending_watch_gate = True
            runs.cancel()
            return
        options = self._gate_options("rep")
        label = "watch gate" if self.quick_gate is None else f"watch {self._gate_label()}"
        if self.note_acknowledged or self._has_note():
            self._start(options, label)
        else:
            self._with_note_check(lambda: self._start(options, label))

    def _has_note(self) -> bool:
        from fibtui.core import recon

        ws = self.workspace
        return ws.active is not None and recon.note_exists_for_round(ws.root, ws.active.definition)

    # -- palette ----------------------------------------------------------------------------------

    def palette_commands(self) -> list[tuple[str, Any, str]]:
        out: list[tuple[str, Any, str]] = [
            (f"Show {p.title} pane", partial(self.show_pane, p.id), p.about) for p in PANES
        ]
        if self.workspace is None:
            out.append(
                (
                    "Open the bundled demo workspace",
                    self.action_open_demo,
                    "copy it once and open it",
                )
            )
            return out
        runs = self.pane("runs")
        if not runs.busy:
            out.append(
                (
                    "Start a representative gate",
                    self.action_gate,
                    "paired against the best snapshot when there is one",
                )
            )
            out.append(
                ("Start a full sweep", self.action_sweep, "every workload; asks first when large")
            )
            out.append(
                (
                    "Start a full sweep on Modal (B200 containers)",
                    self.action_modal_sweep,
                    "shows the plan and its cost first; never exercised against Modal's servers here",
                )
            )
            if runs.can_resume:
                out.append(
                    (
                        f"Resume run {runs.shown_run}",
                        self.action_resume_run,
                        "its jobs left, in the same journal (r on the Runs pane)",
                    )
                )
            if runs.shown_run:
                out.append(
                    (
                        f"Retry the failed jobs of {runs.shown_run}",
                        self.action_retry_failed,
                        "merged back into the run",
                    )
                )
                out.append(
                    (
                        f"Send what this GPU cannot run of {runs.shown_run} to Modal's B200",
                        self.action_send_unsupported,
                        "the jobs that need another architecture; plan and cost first",
                    )
                )
        else:
            out.append(
                (f"Cancel run {runs.active_run}", self.action_cancel_run, "it stays resumable")
            )
        out.append(
            (
                "Stop watching the kernel files" if self.watch_mode else "Watch the kernel files",
                self.action_toggle_watch,
                "a save reruns the paired gate",
            )
        )
        out.extend(self.pane("promotion").palette_commands())
        for theme in self._themes:
            out.append(
                (f"Theme: {theme.name}", partial(self.set_theme_by_name, theme.name), "remembered")
            )
        return out

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
                self._backend_asked = False
                self._backend_waiters = []
            self.report_worker_failure(event.worker)

    def report_worker_failure(self, worker: Worker) -> None:
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
        self.push_screen(
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
