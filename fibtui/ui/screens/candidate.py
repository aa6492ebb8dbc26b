"""``o``: pick what the gate (``g``), the sweep (``s``) and watch mode run, and against what.

Two lists: the solution to gate (the workspace's own solution, then its candidates, newest first)
and the baseline (the promoted best, when there is one, the workspace's solution, the other
candidates, or none). Enter on the first list moves to the second; Enter there confirms. The
choices come from the app (fibtui.core.workspace lists the candidates); this screen only shows
them and says which were picked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from rich.text import Text


@dataclass(frozen=True)
class Choice:
    """One entry of either list: ``path`` None is the workspace's solution (as a gate) or no
    baseline (as a baseline); ``label`` is shown as text, never as markup."""

    key: str
    label: str
    path: Path | None
    note: str = ""
    #: the folder watch mode watches when this is the gate (its sources)
    watch: Path | None = None


class CandidateScreen(ModalScreen["tuple[Choice, Choice] | None"]):
    DEFAULT_CSS = """
    CandidateScreen { align: center middle; }
    #pick-box { width: 95%; max-width: 120; height: auto; max-height: 90%; padding: 0 1;
                border: thick $primary; background: $panel; }
    #pick-lists { height: auto; max-height: 20; }
    #pick-lists Vertical { width: 1fr; height: auto; }
    #pick-gate, #pick-base { height: auto; max-height: 16; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Back", id="pick.back", tooltip="Keep the current choice")
    ]

    def __init__(
        self, gates: list[Choice], baselines: list[Choice], gate_key: str, base_key: str
    ) -> None:
        super().__init__()
        self._gates = gates
        self._baselines = baselines
        self._gate_key = gate_key
        self._base_key = base_key

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-box"):
            yield Static(
                "[b]What g, s and watch mode run[/b]  ·  Enter picks, then the baseline; Escape keeps the current choice"
            )
            with Horizontal(id="pick-lists"):
                with Vertical():
                    yield Static("gate")
                    yield OptionList(
                        *[Option(self._text(c), id=c.key) for c in self._gates], id="pick-gate"
                    )
                with Vertical():
                    yield Static("against")
                    yield OptionList(
                        *[Option(self._text(c), id=c.key) for c in self._baselines], id="pick-base"
                    )

    @staticmethod
    def _text(choice: Choice) -> Text:
        from rich.text import Text

        text = Text(choice.label)
        if choice.note:
            text.append(f"  {choice.note}", style="dim")
        return text

    def on_mount(self) -> None:
        for list_id, items, key in (
            ("#pick-gate", self._gates, self._gate_key),
            ("#pick-base", self._baselines, self._base_key),
        ):
            options = self.query_one(list_id, OptionList)
            index = next((i for i, c in enumerate(items) if c.key == key), 0)
            if options.option_count:
                options.highlighted = index
        self.query_one("#pick-gate", OptionList).focus()

    @on(OptionList.OptionSelected, "#pick-gate")
    def _gate_picked(self) -> None:
        self.query_one("#pick-base", OptionList).focus()

    @on(OptionList.OptionSelected, "#pick-base")
    def _base_picked(self) -> None:
        gate = self.query_one("#pick-gate", OptionList).highlighted
        base = self.query_one("#pick-base", OptionList).highlighted
        if gate is None or base is None:
            return
        _ = self.dismiss((self._gates[gate], self._baselines[base]))

    def action_cancel(self) -> None:
        _ = self.dismiss(None)
