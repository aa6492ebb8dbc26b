"""Shown when fibtui starts outside any workspace: offer the bundled demo."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class NoWorkspaceScreen(ModalScreen[bool]):
    """Dismisses with True to open the demo, False to quit, None (escape) to go back to the
    empty app (the palette still offers the demo; q quits)."""

    BINDINGS = [
        Binding(
            "d",
            "choose(True)",
            "Open demo",
            id="noworkspace.demo",
            tooltip="Copy and open the bundled demo",
        ),
        Binding("q", "choose(False)", "Quit", id="noworkspace.quit", tooltip="Quit fibtui"),
        Binding(
            "escape",
            "back",
            "Back",
            id="noworkspace.back",
            tooltip="Close this dialog (ctrl+p still offers the demo; q quits)",
        ),
    ]

    def __init__(self, cwd: str, demo_dir: str) -> None:
        super().__init__()
        self._cwd = cwd
        self._demo_dir = demo_dir

    def compose(self) -> ComposeResult:
        with Vertical(id="noworkspace-box"):
            # paths and "[solution]" are text, not markup (a folder named [b] must print as itself)
            text = Text.assemble(
                ("No workspace found", "bold"),
                f" from {self._cwd} upward (a config.toml with a [solution] table).\n\n",
                f"Open the bundled demo operator? It is copied to {self._demo_dir} (once) and opened.\n",
                "Or quit and start fibtui inside your solution repo, or with --workspace DIR.\n",
                "Escape goes back to the empty app (ctrl+p offers the demo there).",
            )
            yield Static(text, id="noworkspace-text")
            with Horizontal(id="noworkspace-buttons"):
                yield Button("Open demo (d)", id="open-demo", variant="primary")
                yield Button("Quit (q)", id="quit")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        _ = self.dismiss(event.button.id == "open-demo")

    def action_choose(self, open_demo: bool) -> None:
        _ = self.dismiss(open_demo)

    def action_back(self) -> None:
        _ = self.dismiss(None)
