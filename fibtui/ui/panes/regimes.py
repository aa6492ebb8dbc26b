"""Regimes pane: the active definition's axes and workloads (bands arrive with regimes.py)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from fibtui.core.dataset import Definition, WorkloadSet
from fibtui.ui.panes.workloads import WorkloadsTable


class RegimesPane(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("loading the active definition…", id="regimes-summary", classes="pane-title")
        yield WorkloadsTable(id="workloads-table", zebra_stripes=True, cursor_type="row")

    def show(self, definition: Definition, workloads: WorkloadSet) -> None:
        const = ", ".join(f"{k}={v}" for k, v in definition.const_axes.items())
        self.query_one("#regimes-summary", Static).update(
            f"[b]{definition.name}[/b] · {definition.op_type} · {len(workloads)} workloads · "
            f"varying: {', '.join(definition.var_axes) or 'none'} · const: {const or 'none'}"
        )
        self.query_one(WorkloadsTable).show(definition, workloads)

    def show_error(self, reason: str) -> None:
        self.query_one("#regimes-summary", Static).update(f"[red]{reason}[/red]")
