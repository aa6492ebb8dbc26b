"""The command palette (ctrl+p): the panes, the themes, and what makes sense right now."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.command import DiscoveryHit, Hit, Hits, Provider

from fibtui.ui.keys import PANES

if TYPE_CHECKING:
    from fibtui.ui.app import FibApp

#: one entry of the palette: (text, what it does, its help line)
Command = tuple[str, Callable[[], object], str]


def palette_commands(app: FibApp) -> list[Command]:
    """The palette's entries, state-dependent: a run in flight offers its cancel, a run shown its
    resume, retry and send, the Promotion pane its decisions."""
    control = app.run_control
    out: list[Command] = [
        (f"Show {p.title} pane", partial(app.show_pane, p.id), p.about) for p in PANES
    ]
    if app.workspace is None:
        out.append(
            (
                "Open the bundled demo workspace",
                app.action_open_demo,
                "copy it once and open it",
            )
        )
        return out
    runs = app.runs_pane
    if not runs.busy:
        out.append(
            (
                "Start a representative gate",
                app.action_gate,
                "paired against the best snapshot when there is one",
            )
        )
        out.append(
            ("Start a full sweep", app.action_sweep, "every workload; asks first when large")
        )
        out.append(
            (
                "Start a full sweep on Modal (B200 containers)",
                app.action_modal_sweep,
                "shows the plan and its cost first; never exercised against Modal's servers here",
            )
        )
        if runs.can_resume:
            out.append(
                (
                    f"Resume run {runs.shown_run}",
                    app.action_resume_run,
                    "its jobs left, in the same journal (r on the Runs pane)",
                )
            )
        if runs.shown_run:
            out.append(
                (
                    f"Retry the failed jobs of {runs.shown_run}",
                    app.action_retry_failed,
                    "merged back into the run",
                )
            )
            out.append(
                (
                    f"Send what this GPU cannot run of {runs.shown_run} to Modal's B200",
                    app.action_send_unsupported,
                    "the jobs that need another architecture; plan and cost first",
                )
            )
    else:
        out.append((f"Cancel run {runs.active_run}", app.action_cancel_run, "it stays resumable"))
    out.append(
        (
            "Stop watching the kernel files" if control.watch.on else "Watch the kernel files",
            app.action_toggle_watch,
            "a save reruns the paired gate",
        )
    )
    out.extend(app.promotion_pane.palette_commands())
    for theme in app.fib_themes:
        out.append(
            (f"Theme: {theme.name}", partial(app.set_theme_by_name, theme.name), "remembered")
        )
    return out


@runtime_checkable
class PaletteHost(Protocol):
    """The app the palette lists the commands of (fibtui.ui.app.FibApp)."""

    def palette_commands(self) -> list[Command]:
        """The palette's entries now (palette_commands)."""
        ...


class FibCommands(Provider):
    """Command palette: panes, themes, and what makes sense right now (state-dependent). The
    empty palette lists them all (``discover``); typing narrows them (``search``)."""

    def _commands(self) -> list[Command]:
        app = self.app
        assert isinstance(app, PaletteHost)
        return app.palette_commands()

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, help=help_text)
