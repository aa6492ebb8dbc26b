"""What every pane shares: worker failures go to the app's one error dialog."""

from __future__ import annotations

from textual import on
from textual.containers import Vertical
from textual.worker import Worker, WorkerState


class Pane(Vertical):
    """A pane of the main screen. Worker.StateChanged does not bubble, so each pane hands its
    failed workers to the app, which shows them in one place (the error dialog)."""

    @on(Worker.StateChanged)
    def _forward_failure(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_worker_failure(event.worker)
