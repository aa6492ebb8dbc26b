"""Watch mode (``w``): a save of a kernel file reruns the gate. One gate at a time: a save while
a gate is queued, starting or running replaces it (the newest save wins: the gate reads the files
when it starts). The gate starts through the run controller's slot (fibtui.ui.controller)."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from fibtui.ui.messages import WatchFired

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from textual.worker import Worker

    from fibtui.ui.app import FibApp
    from fibtui.ui.controller import RunControl

WATCH_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".h", ".hpp", ".cc")
#: the most files a folder's state records (a solution folder holds a handful)
STATE_FILES = 5000

#: path -> (mtime in ns, size) of each watched file
TreeState = dict[str, tuple[int, int]]


def tree_state(folder: Path) -> TreeState:
    """The watched files under ``folder`` as they are now (symlinks and __pycache__ left out)."""
    out: TreeState = {}
    try:
        for p in folder.rglob("*"):
            if len(out) >= STATE_FILES:
                break
            if p.suffix in WATCH_SUFFIXES and "__pycache__" not in p.parts and not p.is_symlink():
                try:
                    st = p.stat()
                except OSError:
                    continue
                out[str(p)] = (st.st_mtime_ns, st.st_size)
    except OSError:
        pass
    return out


def changed_since(folder: Path, since: TreeState) -> list[str]:
    """The watched files written, made or removed since ``since`` was taken."""
    now = tree_state(folder)
    return sorted(p for p in now.keys() | since.keys() if now.get(p) != since.get(p))


class WatchMode:
    """The file watcher and the gates it starts, for one app."""

    def __init__(self, app: FibApp, control: RunControl) -> None:
        self.app = app
        self.control = control
        #: watch mode is on
        self.on = False
        #: a save came while a gate held the slot: its gate follows once the slot is free
        self.pending_gate = False
        #: a watch gate waits for the backend (with_backend): a save meanwhile joins it
        self._queued = False
        #: saves seen (each WatchFired), and the save-to-first-job latencies of their gates
        self.saves = 0
        self.latencies_ms: list[float] = []
        self._detected: float | None = None

    def toggle(self) -> None:
        ws = self.app.workspace
        if ws is None or ws.active is None:
            return
        gates = self.control.gates
        if self.on:
            self.on = False
            self.app.workers.cancel_group(self.app, "watch")
            self.app.notify("watch mode off")
        else:
            self.on = True
            folder = gates.watch_folder()
            self.watch(folder, tree_state(folder))
            gates.prewarm()
            self.app.notify(f"watching {gates.watch_folder()}: a save reruns the gate")
        self.app.set_titles()

    def watch(self, folder: Path, since: TreeState | None = None) -> None:
        """Watch ``folder`` (in place of what was watched before). ``since``: the folder's state
        when the user asked (:func:`tree_state`); a save between then and the moment the watcher
        has taken its own first look is found by comparing the two, not lost."""
        work: Callable[[], Coroutine[None, None, None]] = partial(self._watch_loop, folder, since)
        _: Worker[None] = self.app.run_worker(
            work,
            name="_watch",
            group="watch",
            exclusive=True,
            exit_on_error=False,
        )

    def restart(self) -> None:
        """The gate changed (o): watch its sources now."""
        self.app.workers.cancel_group(self.app, "watch")
        folder = self.control.gates.watch_folder()
        self.watch(folder, tree_state(folder))

    async def _watch_loop(self, folder: Path, since: TreeState | None = None) -> None:
        """Post WatchFired for the saves under ``folder``: from the file system's events, or,
        where those cannot be had (a host out of inotify instances or watches, a file system
        without them), by polling every 0.2 s, said once in a notification."""
        state = {"since": since}
        try:
            await self._watch_saves(folder, polling=False, state=state)
            why = "the file watcher stopped"
        except Exception as exc:  # noqa: BLE001 - whatever stops it, say so and poll
            why = f"{type(exc).__name__}: {exc}"
        if not self.on:
            return
        self.app.notify(
            f"watch mode: no file events here ({why}); polling for saves every 0.2 s",
            severity="warning",
            timeout=10,
        )
        await self._watch_saves(folder, polling=True, state=state)

    async def _watch_saves(
        self, folder: Path, polling: bool, state: dict[str, TreeState | None]
    ) -> None:
        """``state["since"]``: the folder's state before this watcher looked (None once it has
        been compared): at the watcher's first answer (a change, or a quiet half second) the
        files that differ from it count as saved too."""
        from watchfiles import awatch

        async for changes in awatch(
            folder,
            debounce=40,
            step=10,
            recursive=True,
            force_polling=True if polling else None,
            poll_delay_ms=200,
            rust_timeout=500,
            yield_on_timeout=True,
        ):
            detected = time.monotonic()
            paths = [p for _, p in changes if p.endswith(WATCH_SUFFIXES) and "__pycache__" not in p]
            since = state["since"]
            if since is not None:
                state["since"] = None
                paths += [p for p in changed_since(folder, since) if p not in paths]
            if paths and self.on:
                self.app.post_message(WatchFired(paths, detected))

    def job_started(self) -> None:
        """The first job of a run started: the latency since the save that asked for it."""
        if self._detected is not None:
            self.latencies_ms.append((time.monotonic() - self._detected) * 1000)
            self._detected = None

    def fired(self, message: WatchFired) -> None:
        """A save: decided here, on the UI thread, before any thread starts. One gate at a time:
        a gate queued (waiting for the backend), being started or running is replaced by this
        save's (the newest save wins: the gate reads the files when it starts)."""
        self._detected = message.detected
        names = ", ".join(Path(p).name for p in message.paths[:3])
        self.saves += 1
        if self._queued:
            return  # the queued gate has not read the files yet: it runs this save
        runs = self.app.runs_pane
        if runs.busy:
            self.pending_gate = True
            runs.cancel()
            self.app.notify(f"saved {names}: cancelling the gate in flight, then rerunning it")
            return
        self.app.notify(f"saved {names}: rerunning the gate")
        self.queue_gate()

    def queue_gate(self) -> None:
        self._queued = True
        self.control.gates.with_backend(self._gate)

    def _gate(self) -> None:
        self._queued = False
        runs = self.app.runs_pane
        if runs.busy:  # a key started a run meanwhile: the save replaces it
            self.pending_gate = True
            runs.cancel()
            return
        control, gates = self.control, self.control.gates
        options = gates.gate_options("rep")
        label = "watch gate" if gates.quick_gate is None else f"watch {gates.gate_label()}"
        if control.note_acknowledged or control.has_note():
            control.start(options, label)
        else:
            control.with_note_check(lambda: control.start(options, label))
