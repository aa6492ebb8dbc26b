"""Regimes pane: the bands of the active definition's real workloads (shares, counts, floors), the
representatives with their reasons (p pins or unpins the selected workload), outliers
highlighted, a chart of latency against the dominant axis, and every workload. SoL % is the
speed of light reached: 100 x floor / latency (100 = at the floor).

Latency comes from the newest GPU run of fibtui in this workspace; without one the pane says
"counts only". All numbers come from fibtui.core.regimes / roofline (a thread worker)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from fibtui.core.names import short_band_name
from fibtui.ui.messages import Analyzed, RegimesFailed
from fibtui.ui.panes.base import Pane

if TYPE_CHECKING:
    from fibtui.core.regimes import RegimeReport
    from fibtui.core.workspace import Workspace

    pass


class RegimesPane(Pane):
    DEFAULT_CSS = """
    RegimesPane #regimes-summary { height: auto; padding: 0 1; }
    RegimesPane #regimes-top { height: 1fr; min-height: 5; max-height: 14; }
    RegimesPane #bands-table { width: 1fr; }
    RegimesPane #regimes-chart { width: 1fr; min-width: 30; }
    RegimesPane #reps-table { height: auto; max-height: 5; }
    RegimesPane #workloads-table { height: 1fr; min-height: 5; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.report: RegimeReport | None = None

    def compose_body(self) -> ComposeResult:
        yield Static("loading the active definition…", id="regimes-summary")
        with Horizontal(id="regimes-top"):
            yield DataTable(id="bands-table", cursor_type="row", zebra_stripes=True)
            yield Vertical(id="regimes-chart")
        yield DataTable(id="reps-table", cursor_type="row")
        yield DataTable(id="workloads-table", cursor_type="row", zebra_stripes=True)

    def built_hook(self) -> None:
        self.query_one("#bands-table", DataTable).add_columns(
            "band", "wl", "passed", "mean", "share", "floor us", "SoL %"
        )
        self.query_one("#reps-table", DataTable).add_columns(
            "representative", "band", "latency", "reason"
        )

    def reload(self) -> None:
        self.analyze()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.analyze()

    @work(thread=True, exclusive=True, group="regimes", exit_on_error=False)
    def analyze(self) -> None:
        from fibtui.core.errors import FibError
        from fibtui.core.plan import workspace_regimes

        ws = self.workspace
        if ws is None or ws.active is None:
            self.post_message(
                RegimesFailed("no valid solution config in this workspace (run: fibtui check)")
            )
            return
        try:
            # the same analysis `fibtui run --workloads rep` gates on (core.plan)
            found = workspace_regimes(ws)
        except FibError as exc:
            self.post_message(RegimesFailed(exc.one_line()))
            return
        self.post_message(Analyzed(found.report, found.definition, found.workloads))

    @on(RegimesFailed)
    def _failed(self, message: RegimesFailed) -> None:
        self.query_one("#regimes-summary", Static).update(Text(message.reason, style="red"))

    @on(Analyzed)
    def _analyzed(self, message: Analyzed) -> None:
        from fibtui.core.roofline import format_speed_of_light

        report, definition = message.report, message.definition
        self.report = report
        const = ", ".join(f"{k}={v}" for k, v in definition.const_axes.items())
        source = report.latency_source if report.has_latency else "counts only (no GPU run yet)"
        dev = report.device or {}
        self.query_one("#regimes-summary", Static).update(
            f"[b]{definition.name}[/b] · {definition.op_type} · {report.workload_count} workloads · "
            f"varying: {', '.join(report.varying_axes) or 'none'}"
            + "".join(f" · {a} = {e}" for a, e in report.derived_axes.items())
            + f" · const: {const or 'none'}\n"
            f"latency: {source} · floors on {dev.get('name', '?')} ({dev.get('bandwidth_tbs', '?')} TB/s)"
        )
        bands = self.query_one("#bands-table", DataTable)
        bands.clear()
        outliers = set(report.outliers)
        for b in report.bands:
            j = b.to_json()
            style = "bold yellow" if b.name in outliers or b.outlier else ""
            share = (
                f"{j['latency_share'] * 100:.1f}%" if j.get("latency_share") is not None else "-"
            )
            mean = (
                f"{j['mean_latency_ms'] * 1000:.2f}"
                if j.get("mean_latency_ms") is not None
                else "-"
            )
            floor = j.get("mean_floor_us") or j.get("floor_us")
            sol = j.get("mean_speed_of_light_pct")
            passed = f"{b.passed}/{b.workloads}" if b.passed is not None else "-"
            bands.add_row(
                Text(short_band_name(b.name) + (" ◆" if style else ""), style=style),
                str(b.workloads),
                passed,
                mean,
                share,
                f"{floor:.3g}" if isinstance(floor, (int, float)) else "-",
                format_speed_of_light(sol),
                key=b.name,
            )
        reps = self.query_one("#reps-table", DataTable)
        reps.clear()
        for r in report.representatives:
            lat = r.latency_ms
            pin = " (pinned)" if r.pinned else ""
            reps.add_row(
                r.uuid[:13] + "…",
                r.band,
                f"{lat * 1000:.2f} us" if lat else "-",
                r.reason + pin,
                key=r.uuid,
            )
        self._fill_workloads(report)
        # the chart after the tables' frame: plotext's import and its drawing (tens of ms here)
        # would otherwise hold back the first frame that shows the workloads
        self.call_after_refresh(self._draw_chart, report)

    def _fill_workloads(self, report: RegimeReport) -> None:
        from fibtui.core.roofline import format_speed_of_light

        table = self.query_one("#workloads-table", DataTable)
        table.clear(columns=True)
        frame = report.table
        axes = list(report.varying_axes)
        table.add_columns("#", "uuid", *axes, "band", "latency us", "floor us", "SoL %", "rep")
        reps = {r.uuid for r in report.representatives}
        cols = {c: frame.get_column(c).to_list() for c in frame.columns}
        n = frame.height
        rows = []
        for i in range(n):
            uuid = cols["uuid"][i]
            lat = cols.get("latency_ms", [None] * n)[i]
            floor = cols.get("floor_us", [None] * n)[i]
            sol = cols.get("speed_of_light_pct", [None] * n)[i]
            rows.append(
                (
                    str(i),
                    uuid,
                    *[str(cols[a][i]) for a in axes],
                    cols.get("band", [""] * n)[i],
                    f"{lat * 1000:.2f}" if lat else "-",
                    f"{floor:.3g}" if floor else "-",
                    format_speed_of_light(sol),
                    "★" if uuid in reps else "",
                )
            )
        table.add_rows(rows)

    def _draw_chart(self, report: RegimeReport) -> None:
        if report is not self.report:  # a newer analysis came in before this one was drawn
            return
        holder = self.query_one("#regimes-chart", Vertical)
        if not holder.is_attached:  # the app is closing (q right after start): nothing to draw into
            return
        _ = holder.remove_children()
        axis = report.dominant_axis
        frame = report.table
        if not report.has_latency or axis is None or "latency_ms" not in frame.columns:
            _ = holder.mount(Static("[dim]chart: no GPU latency yet[/dim]"))
            return
        from textual_plotext import (
            PlotextPlot,  # plotext loads only when there is something to draw
        )

        data = frame.select([axis, "latency_ms", "floor_us"]).drop_nulls("latency_ms").sort(axis)
        plot = PlotextPlot()
        _ = holder.mount(plot)
        plt = plot.plt
        xs = [float(v) for v in data.get_column(axis).to_list()]
        from fibtui.ui.panes.base import series_markers

        # under NO_COLOR the two series differ by marker, not only by shade
        lat_marker, floor_marker = series_markers(2, default=None)  # None: plotext's own
        plt.scatter(
            xs,
            [v * 1000 for v in data.get_column("latency_ms").to_list()],
            label="latency us",
            marker=lat_marker,
        )
        if "floor_us" in data.columns:
            plt.plot(
                xs,
                [v or 0 for v in data.get_column("floor_us").to_list()],
                label="floor us",
                marker=floor_marker,
            )
        plt.xlabel(axis)
        plt.title("latency vs " + axis)

    # ---------------------------------------------------------------- pins

    def toggle_pin(self) -> None:
        from fibtui.core import regimes

        if self.report is None or self.workspace is None:
            return
        table = self.query_one("#workloads-table", DataTable)
        if table.row_count == 0:
            return
        uuid = str(table.get_row_at(table.cursor_row)[1])
        pinned, unpinned = regimes.load_pins(self.workspace.root)
        # p cycles: automatic -> pinned -> kept out -> automatic
        if uuid in pinned:
            regimes.unpin(self.workspace.root, uuid)
            self.notify(f"{uuid[:8]} kept out of the representatives (p again: automatic)")
        elif uuid in unpinned:
            regimes.automatic(self.workspace.root, uuid)
            self.notify(f"{uuid[:8]} back to the automatic choice")
        else:
            regimes.pin(self.workspace.root, uuid)
            self.notify(f"pinned {uuid[:8]} as a representative (p again: keep it out)")
        self.analyze()

    def representatives(self) -> list[str]:
        return [r.uuid for r in self.report.representatives] if self.report is not None else []
