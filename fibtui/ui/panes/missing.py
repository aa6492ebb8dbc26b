"""What a pane shows while the core it needs does not exist yet: the truth, not a mock-up."""

from __future__ import annotations

from textual.widgets import Static


class MissingCore(Static):
    """A bordered note naming what is missing and what will fill this area."""

    DEFAULT_CSS = """
    MissingCore {
        height: auto;
        margin: 1 2;
        padding: 1 2;
        border: round $warning;
    }
    """

    def __init__(self, what: str, needs: str, *, id: str | None = None) -> None:
        super().__init__(f"[b]{what}[/b]\n\n{needs}", id=id, markup=True)
