"""``?``: every key binding, grouped by the pane it acts on, with its id (what keymap.toml
names) and what it does. The list scrolls at any size and ``/`` filters it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static

#: one key of the list: (group, key, action, what it does, id)
KeyRow = tuple[str, str, str, str, str]


def matches(row: KeyRow, query: str) -> bool:
    """Does every word of ``query`` occur in the row (group, key, action, text or id)?"""
    text = " ".join(row).lower()
    return all(word in text for word in query.lower().split())


class HelpKeysScreen(ModalScreen[None]):
    #: the list has focus (its keys scroll it); / moves to the filter
    AUTO_FOCUS: ClassVar[str | None] = "#help-table"
    BINDINGS = [
        Binding(
            "escape,q,question_mark", "dismiss", "Close", id="help.close", tooltip="Close this list"
        ),
        Binding("slash", "search", "Search", id="help.search", tooltip="Filter the list"),
    ]

    def __init__(self, rows: list[KeyRow]) -> None:
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(
                "[b]Keys[/b] by pane  [dim](remap by id: keymap.toml, config folder)[/dim]"
            )
            yield Input(placeholder="/ to filter: a key, a word, a pane", id="help-search")
            table: DataTable[str] = DataTable(
                id="help-table", cursor_type="row", zebra_stripes=True
            )
            # the id is what keymap.toml names: it comes second, whole; the description wraps last
            table.add_column("key")
            table.add_column("id")
            table.add_column("action")
            table.add_column("what it does")
            yield table
            yield Static(
                "[dim]↑↓ PgUp PgDn scroll · / filter · ctrl+p palette · escape closes[/dim]",
                id="help-hint",
            )

    def on_mount(self) -> None:
        self._fill("")

    def _fill(self, query: str) -> None:
        table = self.query_one("#help-table", DataTable)
        table.clear()
        group = None
        shown = 0
        for row in self._rows:
            if query and not matches(row, query):
                continue
            if row[0] != group:
                group = row[0]
                table.add_row(Text(group, style="bold"), "", "", "")
            _, key, action, about, bid = row
            table.add_row(key, bid, action, about)
            shown += 1
        if not shown:
            table.add_row("", "", "no key matches", f"“{query}”")

    @property
    def shown_ids(self) -> list[str]:
        """The ids of the keys listed now (for tests and the filter's own check)."""
        table = self.query_one("#help-table", DataTable)
        return [
            str(table.get_row_at(i)[1]) for i in range(table.row_count) if table.get_row_at(i)[1]
        ]

    @on(Input.Changed, "#help-search")
    def _filter(self, event: Input.Changed) -> None:
        self._fill(event.value)

    @on(Input.Submitted, "#help-search")
    def _to_list(self, _event: Input.Submitted) -> None:
        self.query_one("#help-table", DataTable).focus()

    def action_search(self) -> None:
        self.query_one("#help-search", Input).focus()

    def action_dismiss(self) -> None:  # type: ignore[override]
        search = self.query_one("#help-search", Input)
        if self.focused is search and search.value:
            search.value = ""  # escape in the filter clears it first
            return
        _ = self.dismiss(None)
