"""The one place worker failures are shown: what failed, the one-line reason, details below."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class ErrorScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ErrorScreen { align: center middle; }
    #error-box { width: 90%; max-width: 100; height: auto; max-height: 80%; padding: 1 2;
                 border: thick $error; background: $panel; }
    #error-details { height: auto; max-height: 16; margin-top: 1; color: $text-muted; }
    """
    BINDINGS = [
        Binding(
            "escape,enter,q", "dismiss", "Close", id="error.close", tooltip="Close this message"
        )
    ]

    def __init__(self, title: str, reason: str, details: str = "") -> None:
        super().__init__()
        self._title, self._reason, self._details = title, reason, details

    def compose(self) -> ComposeResult:
        with Vertical(id="error-box"):
            yield Static(f"[b]{self._title}[/b]", markup=True)
            yield Static(self._reason, markup=False)
            if self._details:
                with VerticalScroll(id="error-details"):
                    yield Static(self._details, markup=False)
            yield Static("[dim]escape closes[/dim]", markup=True)

    def action_dismiss(self) -> None:  # type: ignore[override]
        _ = self.dismiss(None)
