"""The app's run keys and the run messages it hears, handed to the run controller
(fibtui.ui.controller): the app binds the keys, the controller does the work."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on

from fibtui.ui.messages import BackendChosen, LaunchEnded, RunEvent, VerdictReady, WatchFired
from fibtui.ui.theming import ThemedApp

if TYPE_CHECKING:
    from fibtui.ui.controller import RunControl


class RunKeys(ThemedApp):
    """g, G, s, o, c, w, t, r's resume, the palette's Modal sweep and B200 send."""

    run_control: RunControl

    # -- runs ------------------------------------------------------------

    def action_pick_candidate(self) -> None:
        self.run_control.pick_candidate()

    def action_gate(self) -> None:
        self.run_control.gate()

    def action_gate_full(self) -> None:
        self.run_control.gate_full()

    def action_sweep(self) -> None:
        self.run_control.sweep()

    def action_modal_sweep(self) -> None:
        self.run_control.modal_sweep()

    def action_cancel_run(self) -> None:
        self.run_control.cancel_run()

    def action_resume_run(self) -> None:
        self.run_control.resume_run()

    def action_retry_failed(self) -> None:
        self.run_control.retry_failed()

    def action_send_unsupported(self) -> None:
        self.run_control.send_unsupported()

    def action_toggle_watch(self) -> None:
        self.run_control.watch.toggle()

    @on(BackendChosen)
    def _backend_chosen(self, message: BackendChosen) -> None:
        self.run_control.gates.backend_chosen(message.name)

    @on(RunEvent)
    def _run_event(self, message: RunEvent) -> None:
        self.run_control.run_event(message)

    @on(LaunchEnded)
    def _slot_freed(self, message: LaunchEnded) -> None:
        self.run_control.slot_freed()

    @on(VerdictReady)
    def _after_verdict(self, message: VerdictReady) -> None:
        self.run_control.after_verdict(message)

    @on(WatchFired)
    def _watch_fired(self, message: WatchFired) -> None:
        self.run_control.watch.fired(message)
