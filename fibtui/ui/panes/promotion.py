"""Promotion pane: the verdict for the latest paired run (PROMOTE / REJECT / INCONCLUSIVE with the
geometric-mean ratio, its interval, tau and where tau came from), the per-band breakdown, what
blocked a promotion, and the decisions: archive, promote, reject-and-restore."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult

from fibtui.ui.panes.base import Pane
from fibtui.ui.panes.missing import MissingCore


class PromotionPane(Pane):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace = None

    def compose(self) -> ComposeResult:
        yield MissingCore("Promotion is not built yet.",
                          "It needs fibtui/core/stats.py (paired verdict) and fibtui/core/archive.py.")

    def set_workspace(self, workspace) -> None:
        self.workspace = workspace

    def evaluate(self) -> None:
        return None

    def palette_commands(self) -> list[tuple[str, Any, str]]:
        return []
