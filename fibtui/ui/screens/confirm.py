"""Typed confirmation dialogs: dismiss(True) to go on, dismiss(False) to back out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

if TYPE_CHECKING:
    from textual.widgets.button import ButtonVariant


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

    def __init__(
        self,
        title: str,
        facts: list[tuple[str, str]] | None = None,
        question: str = "Go ahead?",
        yes: str = "Yes (y)",
        no: str = "No (n)",
    ) -> None:
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
        _ = self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        _ = self.dismiss(yes)


class ChoiceScreen(ModalScreen[str]):
    """A question with several answers, each a button with its own key; Escape is the last
    answer (the one that changes nothing). Dismisses with the chosen answer's value."""

    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    #choice-box { width: 90%; max-width: 90; height: auto; max-height: 90%; padding: 1 2;
                  border: thick $warning; background: $panel; }
    #choice-facts { height: auto; margin: 1 0; }
    #choice-buttons { height: auto; align: center middle; }
    #choice-buttons Button { margin: 0 1; }
    """
    BINDINGS = [Binding("escape", "choose(-1)", "Back", id="choice.back", tooltip="Change nothing")]

    def __init__(self, title: str, facts: str, choices: list[tuple[str, str, str]]) -> None:
        """``choices``: (key, label, value), the last one being the answer that changes nothing."""
        super().__init__()
        self._title = title
        self._facts = facts
        self._choices = choices
        for i, (key, label, _value) in enumerate(choices):
            self._bindings.bind(key, f"choose({i})", label, show=False)

    def compose(self) -> ComposeResult:
        with Vertical(id="choice-box"):
            yield Static(f"[b]{self._title}[/b]", markup=True)
            yield Static(self._facts, id="choice-facts", markup=False)
            with Horizontal(id="choice-buttons"):
                for i, (key, label, _value) in enumerate(self._choices):
                    variant: ButtonVariant = "warning" if i == 0 else "default"
                    yield Button(f"{label} ({key})", id=f"choice-{i}", variant=variant)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_choose(int(str(event.button.id).rsplit("-", 1)[1]))

    def action_choose(self, index: int) -> None:
        _ = self.dismiss(self._choices[index][2])
