"""NCU pane: the Nsight Compute reports archived in this workspace, the compact table and the
findings of the selected one, and the baseline-vs-candidate diff (b marks the selected report as
the baseline; selecting another shows the diff, changed classifications highlighted).

Reports are the details pages fibtui (or the hand workflow) exported under optimize_ops/; reading
them needs no ncu. Profiling needs ncu and a GPU: `fibtui ncu profile --workload UUID`.

Layout: the report list beside the table when the pane is at least NARROW columns wide, above it
otherwise; the findings log shrinks when the pane is under SHORT rows. Report labels come from
fibtui.core.ncu.report_labels (whole names where they fit, never two alike); the diff reads metric,
change %, before, after, one block per kernel and band, the classifications in the findings log.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from fibtui.ui.messages import NcuFailed, NcuListed, NcuLoaded
from fibtui.ui.panes.base import Pane

if TYPE_CHECKING:
    from textual.widgets import RichLog

    from fibtui.core.ncu import ReportDiff
    from fibtui.core.workspace import Workspace

PATTERNS = ("*_details.csv", "*_details.txt")

ROWS = (
    ("duration_us", "duration us"),
    ("compute_throughput_pct", "compute %"),
    ("memory_throughput_pct", "memory %"),
    ("dram_throughput_pct", "DRAM %"),
    ("l2_hit_rate_pct", "L2 hit %"),
    ("registers_per_thread", "regs/thread"),
    ("theoretical_occupancy_pct", "theor. occ %"),
    ("achieved_occupancy_pct", "achieved occ %"),
    ("waves_per_sm", "waves/SM"),
    ("grid_blocks", "grid blocks"),
    ("block_threads", "block threads"),
)
LABELS = dict(ROWS)

NARROW = 100  # pane columns under which the report list goes above the table
SHORT = 28  # pane rows under which the findings log shrinks
LIST_MAX = 48  # widest report list beside the table (columns of label)
KERNEL_MAX = 28  # widest kernel name in a column header or a diff heading


def find_reports(base: Path) -> list[Path]:
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
    NcuPane #ncu-reports { width: 40; }
    NcuPane #ncu-table { width: 1fr; }
    NcuPane #ncu-findings { height: 9; border-top: solid $panel; }
    NcuPane.-narrow #ncu-body { layout: vertical; }
    NcuPane.-narrow #ncu-reports { width: 1fr; height: auto; max-height: 5; }
    NcuPane.-narrow #ncu-table { width: 1fr; height: 1fr; }
    NcuPane.-short #ncu-findings { height: 5; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reports: list[Path] = []
        self.labels: list[str] = []
        self.baseline: Path | None = None
        self.selected: Path | None = None
        self._label_width: int | None = None

    def compose_body(self) -> ComposeResult:
        yield Static(
            "Nsight Compute reports in optimize_ops/ · b marks the baseline · selecting another shows the diff",
            id="ncu-status",
        )
        with Horizontal(id="ncu-body"):
            yield DataTable(id="ncu-reports", cursor_type="row")
            yield DataTable(id="ncu-table", cursor_type="row", zebra_stripes=True)
        from textual.widgets import RichLog  # rich.pretty and attrs: ~30 ms, after the first frame

        # the findings open at their top (auto_scroll off): at 80x24 only a few rows show
        yield RichLog(id="ncu-findings", wrap=True, markup=True, auto_scroll=False)

    def built_hook(self) -> None:
        table = self.query_one("#ncu-reports", DataTable)
        table.add_column("report", key="report")
        table.add_column("base", key="base")

    def reload(self) -> None:
        self.refresh_reports()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.refresh_reports()

    @work(thread=True, exclusive=True, group="ncu-list", exit_on_error=False)
    def refresh_reports(self) -> None:
        if self.workspace is not None:
            self.post_message(NcuListed(find_reports(self.workspace.archive_root)))

    # ---------------------------------------------------------------- layout and the report list

    def _pane_width(self) -> int:
        return self.size.width or self.app.size.width

    def _label_budget(self) -> int:
        width = self._pane_width()
        if width < NARROW:
            return max(12, width - 12)
        return max(24, min(LIST_MAX, width * 2 // 5))

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")
        self.set_class(event.size.height < SHORT, "-short")
        if not self.built:  # mounted after the first frame (Pane.build): no list to size yet
            return
        if self.reports and self._label_budget() != self._label_width:
            self._fill_reports()
        self._size_list()

    def _size_list(self) -> None:
        table = self.query_one("#ncu-reports", DataTable)
        if self._pane_width() < NARROW:
            table.styles.width = None  # the stylesheet's: the whole width, above the table
        else:
            # the label column, the base column, their padding and a scrollbar
            table.styles.width = max((len(label) for label in self.labels), default=6) + 10

    @on(NcuListed)
    def _listed(self, message: NcuListed) -> None:
        self.reports = message.reports
        self._fill_reports()
        if not self.reports:
            self.query_one("#ncu-status", Static).update(
                "no NCU reports yet: `fibtui ncu profile --workload UUID` (needs ncu and a GPU) or `fibtui ncu import FILE`"
            )

    def _fill_reports(self) -> None:
        from fibtui.core.ncu import report_labels

        self._label_width = budget = self._label_budget()
        self.labels = report_labels(self.reports, budget)
        table = self.query_one("#ncu-reports", DataTable)
        table.clear()
        for p, label in zip(self.reports, self.labels, strict=True):
            table.add_row(label, "◆" if p == self.baseline else "", key=str(p))
        self._size_list()
        if self.selected in self.reports:
            table.move_cursor(row=self.reports.index(self.selected))

    @on(DataTable.RowHighlighted, "#ncu-reports")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None and event.row_key.value:
            self.selected = Path(str(event.row_key.value))
            self.load(self.selected, self.baseline)

    def mark_baseline(self) -> None:
        if self.selected is None:
            return
        self.baseline = None if self.baseline == self.selected else self.selected
        table = self.query_one("#ncu-reports", DataTable)
        for p in self.reports:
            table.update_cell(str(p), "base", "◆" if p == self.baseline else "")
        self.load(self.selected, self.baseline)
        self.notify(f"baseline: {self.baseline.name if self.baseline else 'none'}")

    # ---------------------------------------------------------------- one report, or a diff

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
            self.post_message(NcuFailed(exc.one_line(), path))
            return
        self.post_message(NcuLoaded(path, summaries, diff, baseline))

    @on(NcuFailed)
    def _failed(self, message: NcuFailed) -> None:
        if message.path != self.selected:
            return
        self.query_one("#ncu-status", Static).update(Text(message.reason, style="red"))

    @on(NcuLoaded)
    def _loaded(self, message: NcuLoaded) -> None:
        from fibtui.core.ncu import format_metric

        # a thread worker cannot be stopped, only told it was replaced: an older load that finishes
        # after a newer one (moving fast through the list on a busy machine) must not overwrite it
        def against(baseline: Path | None, path: Path) -> Path | None:
            return baseline if baseline != path else None

        if message.path != self.selected or against(message.baseline, message.path) != against(
            self.baseline, message.path
        ):
            return
        table = self.query_one("#ncu-table", DataTable)
        table.clear(columns=True)
        from textual.widgets import RichLog

        log = self.query_one("#ncu-findings", RichLog)
        log.clear()
        if message.diff is not None:
            self._show_diff(table, log, message.diff, message)
            return
        summaries = message.summaries
        shared = _shared_kernel([s.name for s in summaries])
        table.add_column("metric", key="metric")
        for i, s in enumerate(summaries):
            table.add_column(_heading(s.name, s.band, shared), key=str(i))
        for key, label in ROWS:
            table.add_row(label, *[format_metric(s.get(key), key) for s in summaries])
        table.add_row("bottleneck", *[Text(s.bottleneck or "?", style="bold") for s in summaries])
        table.add_row("limiter", *[s.limiter or "-" for s in summaries])
        table.add_row("instances", *[str(s.instances) for s in summaries])
        for s in summaries:
            log.write(
                f"[b]{escape(s.name)}[/b] {escape(s.band or '')}: {_classification(s.classification)}",
                expand=True,
            )
            for f in s.classification.findings:
                log.write(f"  [yellow]{escape(f.kind)}[/]: {escape(f.summary)}", expand=True)
                for t in f.tactics[:3]:
                    log.write(f"    try: {escape(t)}", expand=True)
        kernel = f" · kernel {shared}" if shared and len(summaries) > 1 else ""
        self.query_one("#ncu-status", Static).update(
            Text(f"{message.path.name} · {len(summaries)} kernel/band(s){kernel}")
        )

    def _show_diff(
        self, table: DataTable[Any], log: RichLog, diff: ReportDiff, message: NcuLoaded
    ) -> None:
        from fibtui.core.ncu import format_metric

        shared = _shared_kernel([p.kernel for p in diff.pairs])
        # the change first: it stays in view however narrow the table gets
        table.add_column("metric", key="metric")
        table.add_column("Δ %", key="pct")
        table.add_column("before", key="before")
        table.add_column("after", key="after")
        for pair in diff.pairs:
            heading = _heading(pair.kernel, pair.band, shared)
            changed = pair.classification_changed
            table.add_row(Text(heading, style="bold red" if changed else "bold"), "", "", "")
            for m in pair.metrics:
                if m.metric not in LABELS:
                    continue
                pct = "-" if m.pct is None else f"{m.pct:+.1f}%"
                style = ""
                if m.metric == "duration_us" and m.delta:
                    style = "green" if m.delta < 0 else "red"
                table.add_row(
                    LABELS[m.metric],
                    Text(pct, style=style),
                    format_metric(m.before, m.metric),
                    format_metric(m.after, m.metric),
                )
            b, c = pair.baseline.classification, pair.candidate.classification
            for row, before, after in (
                ("bottleneck", b.bottleneck or "?", c.bottleneck or "?"),
                ("limiter", b.limiter or "-", c.limiter or "-"),
            ):
                moved = before != after
                table.add_row(
                    row,
                    Text("changed" if moved else "same", style="bold red" if moved else "dim"),
                    before,
                    after,
                )
            where = escape(f"{pair.kernel} {pair.band or ''}".strip())
            line = f"{_classification(b)} -> {_classification(c)}"
            if changed:
                log.write(
                    f"[bold red]{where}: classification changed[/]: {line}; {escape('; '.join(pair.changes))}",
                    expand=True,
                )
            else:
                log.write(
                    f"[b]{where}[/b]: classification the same: {_classification(c)}"
                    + (f"; {escape('; '.join(pair.changes))}" if pair.changes else ""),
                    expand=True,
                )
        for band, kernel in diff.only_in_baseline:
            log.write(
                f"[yellow]only in the baseline:[/] {escape(kernel)} {escape(band or '')}",
                expand=True,
            )
        for band, kernel in diff.only_in_candidate:
            log.write(
                f"[yellow]only in the candidate:[/] {escape(kernel)} {escape(band or '')}",
                expand=True,
            )
        kernel = f" · kernel {shared}" if shared and len(diff.pairs) > 1 else ""
        self.query_one("#ncu-status", Static).update(
            Text(
                f"diff: {message.baseline.name if message.baseline else '?'} -> {message.path.name}{kernel}"
            )
        )


def _shared_kernel(names: list[str]) -> str | None:
    """The one kernel name every row has, else None (then each heading names its kernel)."""
    return names[0] if names and len(set(names)) == 1 else None


def _heading(kernel: str, band: str | None, shared: str | None) -> str:
    """A column header or diff heading: the band alone when every row has one kernel, else the
    kernel name (cut in the middle past KERNEL_MAX) and the band."""
    from fibtui.core.ncu import abbreviate_middle

    if shared is not None and band:
        return band
    return f"{abbreviate_middle(kernel, KERNEL_MAX)} {band or ''}".strip()


def _classification(c: Any) -> str:
    """A classification in words, whole: bottleneck, limiter, grid too small."""
    parts = [f"bottleneck {c.bottleneck or '?'}", f"limiter {c.limiter or 'none'}"]
    if c.grid_too_small:
        parts.append("grid too small")
    return escape(", ".join(parts))
