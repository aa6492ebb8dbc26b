"""Typed confirmation dialogs: dismiss(True) to go on, dismiss(False) to back out."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """A question, the facts it rests on (a plan: workloads, repeats, GPU time, cost...), yes/no."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    #confirm-box { width: 90%; max-width: 90; height: auto; max-height: 90%; padding: 1 2;
                   border: thick $warning; background: $panel; }
    #confirm-body { height: auto; max-height: 40vh; margin: 1 0; }
    #confirm-buttons { height: auto; align: center middle; }
    #confirm-buttons Button { margin: 0 1; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes", tooltip="Go ahead"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no", tooltip="Back out"),
    ]

    def __init__(self, title: str, facts: list[tuple[str, str]] | None = None, question: str = "Go ahead?",
                 yes: str = "Yes (y)", no: str = "No (n)") -> None:
        super().__init__()
        self._title = title
        self._facts = facts or []
        self._question = question
        self._yes = yes
        self._no = no

    def compose(self) -> ComposeResult:
        width = max((len(k) for k, _ in self._facts), default=0)
        facts = "\n".join(f"{k.ljust(width)}  {v}" for k, v in self._facts)
        with Vertical(id="confirm-box"):
            yield Static(f"[b]{self._title}[/b]", markup=True)
            if facts:  # a long plan scrolls; the question and the buttons stay in sight (80x24)
                with VerticalScroll(id="confirm-body"):
                    yield Static(facts, id="confirm-facts", markup=False)
            yield Static(self._question)
            with Horizontal(id="confirm-buttons"):
                yield Button(self._yes, id="yes", variant="warning")
                yield Button(self._no, id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
