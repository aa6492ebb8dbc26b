"""What every pane shares: worker failures go to the app's one error dialog."""

from __future__ import annotations

from textual import on
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input
from textual.worker import Worker, WorkerState


class Pane(Vertical):
    """A pane of the main screen. Worker.StateChanged does not bubble, so each pane hands its
    failed workers to the app, which shows them in one place (the error dialog)."""

    @on(Worker.StateChanged)
    def _forward_failure(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_worker_failure(event.worker)

    def focus_target(self) -> Widget | None:
        """Where focus goes when the pane is shown: its first focusable table or list (an input
        only when the pane has nothing else), so that a pane key typed next is a key, not text."""
        chain = [w for w in self.screen.focus_chain if self in w.ancestors]
        return next((w for w in chain if not isinstance(w, Input)), chain[0] if chain else None)
