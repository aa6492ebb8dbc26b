"""The thread of a run started in the Runs pane's slot: prepare it (a new run, a resume, a retry
or a send to Modal's B200), run it, and say so in messages posted to the pane; and the interrupt
that stops it when the app ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fibtui.ui.messages import LaunchEnded, RunEvent, RunFailed, RunStartedHere

if TYPE_CHECKING:
    from textual.message import Message

    from fibtui.core.workspace import Workspace
    from fibtui.runners.split import Send
    from fibtui.services.runs import RunOptions


def run_in_slot(
    ws: Workspace | None,
    options: RunOptions | None,
    label: str,
    cancel: threading.Event,
    post: Callable[[Message], object],
    labels: dict[str, str],
    retry_of: str | None = None,
    resume_of: str | None = None,
    send: Send | None = None,
) -> None:
    """Run in the slot whose cancel event is ``cancel`` (call it from the slot's thread worker):
    RunFailed when it cannot start, RunStartedHere and each RunEvent while it runs, LaunchEnded
    always, once the thread is done (``labels`` learns what the run is)."""
    from fibtui.core.errors import FibError
    from fibtui.runners import split
    from fibtui.services.runs import prepare_resume, prepare_retry, prepare_run

    run_id = None
    try:
        if cancel.is_set():  # replaced (a newer save) before it began: nothing to prepare
            return
        assert ws is not None, "runs start only once a workspace is open"
        try:
            if send is not None:
                prepared = split.prepare_send(ws, send)
            elif resume_of:
                prepared = prepare_resume(ws, resume_of, options)
            elif retry_of:
                prepared = prepare_retry(ws, retry_of, options)
            else:
                assert options is not None, "a new run is started with its options"
                prepared = prepare_run(ws, options)
        except FibError as exc:
            post(RunFailed(f"could not start the {label}", exc.one_line()))
            return
        run_id = prepared.run_id
        labels[run_id] = label
        post(RunStartedHere(run_id, time.monotonic()))
        prepared.runner.run(lambda event: post(RunEvent(run_id, event)), cancel)
    finally:
        post(LaunchEnded(cancel, run_id))


def interrupt_slot(cancel: threading.Event | None, reason: str) -> None:
    """Stop the run in flight because the app ends (quit, SIGHUP, SIGTERM): its cancel event
    is set first, as an interrupt, and the runner's own thread then stops its workers, so the
    jobs in flight stay pending (never a kernel's failure) and the run reads ``interrupted``
    (``c``, the user's cancel, reads ``cancelled``). The process waits for that thread before
    it exits (asyncio.run waits for the executor's threads)."""
    from fibtui.runners.journaling import interrupt

    if cancel is not None and not cancel.is_set():
        interrupt(cancel, reason)
