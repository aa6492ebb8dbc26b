"""NCU pane: the Nsight Compute reports archived in this workspace, the compact table and the
findings of the selected one, and the baseline-vs-candidate diff (b marks the selected report as
the baseline; selecting another shows the diff, changed classifications highlighted).

Reports are the details pages fibtui (or the hand workflow) exported under optimize_ops/; reading
them needs no ncu. Profiling needs ncu and a GPU: `fibtui ncu profile --workload UUID`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, RichLog, Static

from fibtui.ui.panes.base import Pane

PATTERNS = ("*_details.csv", "*_details.txt")

ROWS = (
    ("duration_us", "duration us"), ("compute_throughput_pct", "compute %"), ("memory_throughput_pct", "memory %"),
    ("dram_throughput_pct", "DRAM %"), ("l2_hit_rate_pct", "L2 hit %"), ("registers_per_thread", "regs/thread"),
    ("theoretical_occupancy_pct", "theor. occ %"), ("achieved_occupancy_pct", "achieved occ %"),
    ("waves_per_sm", "waves/SM"), ("grid_blocks", "grid blocks"), ("block_threads", "block threads"),
)


def find_reports(root: Path) -> list[Path]:
    base = root / "optimize_ops"
    found: set[Path] = set()
    if base.is_dir():
        for pattern in PATTERNS:
            found.update(base.rglob(pattern))
    # newest first; equal times fall back to the path so the list never reorders between runs
    return sorted(found, key=lambda p: (-p.stat().st_mtime, str(p)))


class NcuPane(Pane):
    DEFAULT_CSS = """
    NcuPane #ncu-status { height: auto; padding: 0 1; }
    NcuPane #ncu-body { height: 1fr; }
    NcuPane #ncu-reports { width: 40; min-width: 24; }
    NcuPane #ncu-table { width: 1fr; }
    NcuPane #ncu-findings { height: 9; border-top: solid $panel; }
    """

    @dataclass
    class Listed(Message):
        reports: list[Path]

    @dataclass
    class Loaded(Message):
        path: Path
        summaries: list[Any]
        diff: Any | None
        baseline: Path | None

    @dataclass
    class Failed(Message):
        reason: str
        path: Path | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace = None
        self.reports: list[Path] = []
        self.baseline: Path | None = None
        self.selected: Path | None = None

    def compose(self) -> ComposeResult:
        yield Static("Nsight Compute reports in optimize_ops/ · b marks the baseline · selecting another shows the diff", id="ncu-status")
        with Horizontal(id="ncu-body"):
            yield DataTable(id="ncu-reports", cursor_type="row")
            yield DataTable(id="ncu-table", cursor_type="row", zebra_stripes=True)
        yield RichLog(id="ncu-findings", wrap=True, markup=True)

    def on_mount(self) -> None:
        self.query_one("#ncu-reports", DataTable).add_columns("report", "base")

    def set_workspace(self, workspace) -> None:
        self.workspace = workspace
        self.refresh_reports()

    @work(thread=True, exclusive=True, group="ncu-list", exit_on_error=False)
    def refresh_reports(self) -> None:
        if self.workspace is not None:
            self.post_message(self.Listed(find_reports(self.workspace.root)))

    @on(Listed)
    def _listed(self, message: Listed) -> None:
        self.reports = message.reports
        table = self.query_one("#ncu-reports", DataTable)
        table.clear()
        for p in self.reports:
            table.add_row(p.name.replace("_details", ""), "◆" if p == self.baseline else "", key=str(p))
        if not self.reports:
            self.query_one("#ncu-status", Static).update(
                "no NCU reports yet: `fibtui ncu profile --workload UUID` (needs ncu and a GPU) or `fibtui ncu import FILE`")

    @on(DataTable.RowHighlighted, "#ncu-reports")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value:
            self.selected = Path(str(event.row_key.value))
            self.load(self.selected, self.baseline)

    def mark_baseline(self) -> None:
        if self.selected is None:
            return
        self.baseline = None if self.baseline == self.selected else self.selected
        self.post_message(self.Listed(self.reports))
        self.notify(f"baseline: {self.baseline.name if self.baseline else 'none'}")

    @work(thread=True, exclusive=True, group="ncu-load", exit_on_error=False)
    def load(self, path: Path, baseline: Path | None) -> None:
        from fibtui.core.errors import FibError
        from fibtui.core.ncu import attach_request, diff_reports, load_report, summarize

        try:
            report = attach_request(load_report(path), path)
            summaries = summarize(report)
            diff = None
            if baseline is not None and baseline != path:
                diff = diff_reports(attach_request(load_report(baseline), baseline), report)
        except FibError as exc:
            self.post_message(self.Failed(exc.one_line(), path))
            return
        self.post_message(self.Loaded(path, summaries, diff, baseline))

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        if message.path != self.selected:
            return
        self.query_one("#ncu-status", Static).update(Text(message.reason, style="red"))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        # a thread worker cannot be stopped, only told it was replaced: an older load that finishes
        # after a newer one (moving fast through the list on a busy machine) must not overwrite it
        def against(baseline: Path | None, path: Path) -> Path | None:
            return baseline if baseline != path else None

        if message.path != self.selected or against(message.baseline, message.path) != against(self.baseline, message.path):
            return
        table = self.query_one("#ncu-table", DataTable)
        table.clear(columns=True)
        log = self.query_one("#ncu-findings", RichLog)
        log.clear()
        if message.diff is not None:
            self._show_diff(table, log, message)
            return
        summaries = message.summaries
        table.add_column("metric", key="metric")
        for i, s in enumerate(summaries):
            table.add_column(f"{s.name[:20]} {s.band or ''}".strip(), key=str(i))
        for key, label in ROWS:
            table.add_row(label, *[_fmt(s.get(key)) for s in summaries])
        table.add_row("bottleneck", *[Text(s.bottleneck or "?", style="bold") for s in summaries])
        table.add_row("limiter", *[s.limiter or "-" for s in summaries])
        table.add_row("instances", *[str(s.instances) for s in summaries])
        for s in summaries:
            log.write(f"[b]{s.name}[/b] {s.band or ''}")
            for f in s.classification.findings:
                log.write(f"  [yellow]{f.kind}[/]: {f.summary}")
                for t in f.tactics[:3]:
                    log.write(f"    try: {t}")
        self.query_one("#ncu-status", Static).update(f"{message.path.name} · {len(summaries)} kernel/band(s)")

    def _show_diff(self, table: DataTable, log: RichLog, message: Loaded) -> None:
        diff = message.diff
        table.add_columns("kernel [band]", "metric", "before", "after", "delta %")
        for pair in diff.pairs:
            label = f"{pair.kernel[:18]} {pair.band or ''}".strip()
            changed = pair.classification_changed
            for m in pair.metrics:
                if m.metric not in dict(ROWS):
                    continue
                pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
                style = ""
                if m.metric == "duration_us" and m.delta:
                    style = "green" if m.delta < 0 else "red"
                table.add_row(label, dict(ROWS)[m.metric], _fmt(m.before), _fmt(m.after), Text(pct, style=style))
            b, c = pair.baseline.classification, pair.candidate.classification
            table.add_row(Text(label, style="bold red" if changed else ""), "classification",
                          f"{b.bottleneck}/{b.limiter}", f"{c.bottleneck}/{c.limiter}",
                          Text("changed" if changed else "same", style="bold red" if changed else "dim"))
            if changed:
                log.write(f"[bold red]{label}: classification changed[/] — {'; '.join(pair.changes)}")
        for band, kernel in diff.only_in_baseline:
            log.write(f"[yellow]only in the baseline:[/] {kernel} {band or ''}")
        for band, kernel in diff.only_in_candidate:
            log.write(f"[yellow]only in the candidate:[/] {kernel} {band or ''}")
        self.query_one("#ncu-status", Static).update(
            f"diff: {message.baseline.name if message.baseline else '?'} -> {message.path.name}")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)
