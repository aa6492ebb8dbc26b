"""What every pane shares: worker failures go to the app's one error dialog, and panes that are
not in view at start are built (their widgets mounted) after the first frame."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input
from textual.worker import Worker, WorkerState

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace

#: chart markers, one per series, when colours cannot tell series apart (NO_COLOR)
NO_COLOR_MARKERS = ("•", "x", "+", "o", "*", "#", "@", "%")


def series_markers(n: int, default: str | None = "dot") -> list[str | None]:
    """Each chart series' marker: ``default``, or under NO_COLOR a different character each
    (the series then differ by marker, not only by shade)."""
    import os

    if os.environ.get("NO_COLOR"):
        return [NO_COLOR_MARKERS[i % len(NO_COLOR_MARKERS)] for i in range(n)]
    return [default] * n


def elide_middle(text: str, width: int) -> str:
    """``text`` in ``width`` cells at most, its middle replaced by "…" (both ends kept: a
    header's solution name and its workspace)."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    if width == 1:
        return "…"
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


@runtime_checkable
class PaneHost(Protocol):
    """What a pane asks of the app it is in (fibtui.ui.app.FibApp)."""

    def is_shown(self, pane_id: str) -> bool:
        """Is this pane the one in view?"""
        ...

    def report_worker_failure(self, worker: Worker[Any]) -> None:
        """Show a failed worker in the app's one error dialog."""
        ...


class Pane(Vertical):
    """A pane of the main screen. Worker.StateChanged does not bubble, so each pane hands its
    failed workers to the app, which shows them in one place (the error dialog).

    A pane made with ``deferred=True`` is in the DOM at once (empty) and mounts its widgets
    (``compose_body``) when ``build`` is awaited: the first frame then styles, lays out and
    starts only the widgets of the pane in view. ``built_hook`` runs once the widgets exist
    (columns, timers); ``when_built`` runs a callback now or once the pane is built."""

    def __init__(self, *, deferred: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: the workspace the pane shows (the app sets it at once; set_workspace starts loading)
        self.workspace: Workspace | None = None
        self.built = not deferred
        self._building: asyncio.Event | None = None
        self._after_build: list[Callable[[], object]] = []

    def set_workspace(self, workspace: Workspace) -> None:
        """The workspace is open: the pane starts loading its data (in its workers)."""
        self.workspace = workspace
        self.reload()

    def reload(self) -> None:
        """Load the pane's data again (``r``, and after a run's verdict where it reads the
        archive)."""

    def compose(self) -> ComposeResult:
        if self.built:
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        """The pane's widgets."""
        yield from ()

    def built_hook(self) -> None:
        """Called once the widgets of compose_body are mounted."""

    def on_mount(self) -> None:
        if self.built:
            self.built_hook()

    async def build(self) -> None:
        """Mount the widgets of a deferred pane (once; a second caller waits for the first)."""
        if self.built:
            return
        if self._building is not None:
            await self._building.wait()
            return
        self._building = asyncio.Event()
        try:
            await self.mount_compose(self.compose_body())
            self.built = True
            self.built_hook()
        finally:
            self._building.set()
        pending, self._after_build = self._after_build, []
        for callback in pending:
            callback()

    def when_built(self, callback: Callable[[], object]) -> None:
        if self.built:
            callback()
        else:
            self._after_build.append(callback)

    @on(Worker.StateChanged)
    def _forward_failure(self, event: Worker.StateChanged) -> None:
        host = self.app
        if event.state == WorkerState.ERROR and isinstance(host, PaneHost):
            host.report_worker_failure(event.worker)

    def focus_target(self) -> Widget | None:
        """Where focus goes when the pane is shown: its first focusable table or list (an input
        only when the pane has nothing else), so that a pane key typed next is a key, not text."""
        chain = [w for w in self.screen.focus_chain if self in w.ancestors]
        return next((w for w in chain if not isinstance(w, Input)), chain[0] if chain else None)
