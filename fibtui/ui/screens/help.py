"""``?``: every key binding with its id and what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static


class HelpKeysScreen(ModalScreen[None]):
    BINDINGS = [
        Binding(
            "escape,q,question_mark", "dismiss", "Close", id="help.close", tooltip="Close this list"
        ),
    ]

    def __init__(self, rows: list[tuple[str, str, str, str]]) -> None:
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(
                "[b]Keys[/b]  (remap any of them by id in keymap.toml in the config folder)"
            )
            table = DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            # the id is what keymap.toml names: it comes second, whole; the description wraps last
            table.add_column("key")
            table.add_column("id")
            table.add_column("action")
            table.add_column("what it does")
            table.add_rows([(key, bid, action, about) for key, action, about, bid in self._rows])
            yield table
            yield Static("[dim]ctrl+p opens the command palette · escape closes[/dim]")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
