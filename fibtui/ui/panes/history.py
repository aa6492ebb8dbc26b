"""History pane: past rounds (their summaries rendered as Markdown) and a chart of mean latency
per candidate over time, all read from optimize_ops/ (the demo ships real ones)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from fibtui.core.numbers import count
from fibtui.ui.messages import DocLoaded, HistoryLoaded, OpenVerdict
from fibtui.ui.panes.base import Pane, series_markers

if TYPE_CHECKING:
    from textual.widgets import Markdown

    from fibtui.core.workspace import Workspace


class HistoryPane(Pane):
    DEFAULT_CSS = """
    HistoryPane #history-status { height: auto; padding: 0 1; }
    HistoryPane #history-body { height: 1fr; }
    HistoryPane #history-rounds { width: 44; min-width: 24; }
    HistoryPane #history-doc { width: 1fr; }
    HistoryPane #history-chart { height: 12; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rounds: list[Path] = []

    def compose_body(self) -> ComposeResult:
        yield Static("rounds and runs from optimize_ops/", id="history-status")
        with Horizontal(id="history-body"):
            yield DataTable(id="history-rounds", cursor_type="row")
            # the Markdown widget (markdown-it, ~40 ms of imports) is mounted when the pane loads,
            # after the first frame
            yield VerticalScroll(id="history-doc")
        yield Vertical(id="history-chart")

    def built_hook(self) -> None:
        self.query_one("#history-rounds", DataTable).add_columns(
            "round summaries · paired runs (enter: verdict)"
        )

    def reload(self) -> None:
        self.load()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._markdown()
        self.load()

    def _markdown(self) -> Markdown:
        from textual.widgets import Markdown

        found = self.query("#history-markdown").results(Markdown)
        first = next(found, None)
        if first is not None:
            return first
        widget = Markdown("", id="history-markdown")
        _ = self.query_one("#history-doc", VerticalScroll).mount(widget)
        return widget

    @work(thread=True, exclusive=True, group="history", exit_on_error=False)
    def load(self) -> None:
        import json

        from fibtui.core.runs import list_runs

        ws = self.workspace
        if ws is None:
            return
        docs = ws.archive_root / "docs"
        rounds = sorted(docs.glob("round_*.md"), reverse=True) if docs.is_dir() else []
        series: dict[str, list[tuple[str, float]]] = {}
        runs = list_runs(ws.archive_root)
        for r in runs:
            try:
                record = json.loads((r.path / "run.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if record.get("timing_kind") != "cupti":
                continue  # interpreter timings say nothing about GPU speed
            for info in (record.get("summary") or {}).get("per_solution", {}).values():
                if info.get("mean_latency_ms") is not None and info.get("passed") == info.get(
                    "jobs"
                ):
                    series.setdefault(info["name"], []).append((r.started, info["mean_latency_ms"]))
        from fibtui.core.past_verdicts import paired_runs

        self.post_message(HistoryLoaded(rounds, series, len(runs), paired_runs(ws)))

    @on(HistoryLoaded)
    def _loaded(self, message: HistoryLoaded) -> None:
        self.rounds = message.rounds
        table = self.query_one("#history-rounds", DataTable)
        table.clear()
        for p in self.rounds:
            table.add_row(p.stem, key=str(p))
        for r in message.paired or []:
            table.add_row(f"run {r.run_id} · {r.device_short} · {r.scope}", key=f"run:{r.run_id}")
        self.query_one("#history-status", Static).update(
            f"{count(len(self.rounds), 'round summary', 'round summaries')} · {count(message.runs, 'run')} · chart: mean latency of complete GPU runs per candidate"
        )
        if not self.rounds:
            _ = self._markdown().update(
                "*No round summary yet.* `fibtui round summary` writes one from the run records."
            )
        self._chart(message.series)

    @on(DataTable.RowHighlighted, "#history-rounds")
    def _round(self, event: DataTable.RowHighlighted) -> None:
        key = str(event.row_key.value) if event.row_key is not None else ""
        if key.startswith("run:"):
            _ = self._markdown().update(
                f"Paired run `{key[4:]}`: **enter** shows its verdict, per-band table and parity "
                "in the Promotion pane."
            )
        elif key:
            self.read_doc(Path(key))

    @on(DataTable.RowSelected, "#history-rounds")
    def _open_run(self, event: DataTable.RowSelected) -> None:
        key = str(event.row_key.value) if event.row_key is not None else ""
        if key.startswith("run:"):
            self.post_message(OpenVerdict(key[4:]))

    @work(thread=True, exclusive=True, group="history-doc", exit_on_error=False)
    def read_doc(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            text = f"cannot read {path}: {exc.strerror}"
        self.post_message(DocLoaded(path, text))

    @on(DocLoaded)
    def _doc(self, message: DocLoaded) -> None:
        _ = self._markdown().update(message.text)

    def _chart(self, series: dict[str, list[tuple[str, float]]]) -> None:
        holder = self.query_one("#history-chart", Vertical)
        if not holder.is_attached:  # the app is closing (q right after start): nothing to draw into
            return
        _ = holder.remove_children()
        if not series:
            _ = holder.mount(
                Static(
                    "[dim]no complete GPU runs yet: the chart fills as rounds are measured[/dim]"
                )
            )
            return
        from textual_plotext import PlotextPlot

        plot = PlotextPlot()
        _ = holder.mount(plot)
        plt = plot.plt
        stamps = sorted({t for points in series.values() for t, _ in points})
        index = {t: i for i, t in enumerate(stamps)}
        # under NO_COLOR the series differ by marker, not only by shade
        markers = series_markers(len(series))
        for (name, points), marker in zip(sorted(series.items()), markers, strict=True):
            by_run = dict(
                sorted(points)
            )  # one point per run: an A/A run names the same solution twice
            plt.plot(
                [index[t] for t in by_run],
                [v * 1000 for v in by_run.values()],
                label=name[:24],
                marker=marker,
            )
        # runs are counted, not measured: integer ticks 1..n (at most 8 labelled), and room either side
        step = max(1, -(-len(stamps) // 8))
        ticks = list(range(0, len(stamps), step))
        plt.xticks(list[float](ticks), [str(i + 1) for i in ticks])
        plt.xlim(-0.5, len(stamps) - 0.5)
        plt.title("mean latency (us) per candidate, run by run")
        plt.xlabel(f"run number (1 = oldest of {len(stamps)})")
