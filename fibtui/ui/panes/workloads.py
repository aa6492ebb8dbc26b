"""The workloads of the active definition, one row each."""

from __future__ import annotations

from textual.widgets import DataTable

from fibtui.core.dataset import Definition, WorkloadSet


class WorkloadsTable(DataTable):
    """uuid, every varying axis, and the line in the workloads file."""

    def show(self, definition: Definition, workloads: WorkloadSet) -> None:
        self.clear(columns=True)
        axes = workloads.axis_names
        self.add_columns("#", "uuid", *axes, "line")
        frame = workloads.frame
        columns = [frame.get_column(c).to_list() for c in ("uuid", *axes, "line")]
        rows = [(str(i),) + tuple(str(v) for v in values) for i, values in enumerate(zip(*columns, strict=True))]
        self.add_rows(rows)
