"""Promotion pane: the verdict for the newest paired run (PROMOTE / REJECT / INCONCLUSIVE /
BLOCKED / INCOMPLETE with the geometric-mean ratio G, its interval, tau and where tau came from),
the per-band breakdown, what blocked a promotion, and the decisions: A archive, P promote,
R reject-and-restore (each confirmed first). All statistics come from fibtui.core.stats through
fibtui.services.decide."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from fibtui.core.names import short_band_name
from fibtui.core.numbers import count
from fibtui.ui.messages import Decided, Evaluated, PairedListed, RowVerdict
from fibtui.ui.panes.base import Pane
from fibtui.verdict_colours import colour_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from fibtui.core.past_verdicts import PairedRun
    from fibtui.core.stats import CompareOutcome
    from fibtui.core.workspace import Workspace
    from fibtui.runners.parity import ParityStatus


class PromotionPane(Pane):
    DEFAULT_CSS = """
    PromotionPane #paired-runs { height: auto; max-height: 7; }
    PromotionPane #verdict-box { height: auto; max-height: 60%; border: round $primary; }
    PromotionPane #verdict { height: auto; padding: 0 1; }
    PromotionPane #bands { height: 1fr; min-height: 5; }
    PromotionPane #decision-log { height: 6; border-top: solid $panel; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_id: str | None = None
        self.outcome: CompareOutcome | None = None
        #: the paired runs listed, newest first, and each one's verdict word once worked out
        self.paired: list[PairedRun] = []
        self._words: dict[tuple[str, str], str] = {}

    def compose_body(self) -> ComposeResult:
        yield DataTable(id="paired-runs", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(
            id="verdict-box"
        ):  # long at 80 columns: it scrolls, the per-band table stays
            yield Static(
                "no paired run yet: a gate (g) against a promoted best solution, or `fibtui run --baseline DIR`",
                id="verdict",
            )
        yield DataTable(id="bands", cursor_type="row", zebra_stripes=True)
        from textual.widgets import RichLog  # rich.pretty and attrs: ~30 ms, after the first frame

        yield RichLog(id="decision-log", wrap=True, markup=True)

    def built_hook(self) -> None:
        runs = self.query_one("#paired-runs", DataTable)
        for column in ("run", "device", "timing", "scope", "verdict"):
            runs.add_column(column, key=column)
        self.query_one("#bands", DataTable).add_columns(
            "band", "n", "base us", "cand us", "change", "ratio", "interval", "W/T/L", ""
        )

    def reload(self) -> None:
        self.evaluate()

    def set_workspace(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.evaluate()

    @work(thread=True, exclusive=True, group="promotion", exit_on_error=False)
    def evaluate(
        self,
        run_id: str | None = None,
        outcome: CompareOutcome | None = None,
        picked: bool = False,
    ) -> None:
        """List the paired runs and show one: ``picked`` (the user chose it in the list or from
        History) shows ``run_id``; else the default of core.past_verdicts (the newest GPU
        verdict: a CPU gate never hides it). ``outcome``: ``run_id``'s comparison when the
        caller already has it (the Runs pane's, at a run's end)."""
        from fibtui.core import past_verdicts
        from fibtui.core.errors import FibError
        from fibtui.runners.parity import parity_status
        from fibtui.services import decide

        ws = self.workspace
        if ws is None:
            return
        parity = parity_status(ws, ws.active.definition) if ws.active is not None else None
        runs = past_verdicts.paired_runs(ws)
        self.post_message(PairedListed(runs))
        chosen: str | None
        if picked and run_id is not None:
            chosen, why = run_id, "picked in the list"
        else:
            shown = past_verdicts.default_shown(runs)
            chosen, why = (shown.run.run_id if shown.run else None), shown.why
        if chosen != run_id:
            outcome = None
        if chosen is None:
            self.post_message(
                Evaluated(
                    None,
                    None,
                    "no paired run yet: a gate (g) against a promoted best solution, "
                    "or `fibtui run --baseline DIR`",
                    parity,
                )
            )
            return
        if outcome is None:
            try:
                outcome = decide.compare(ws, chosen)
            except FibError as exc:
                self.post_message(Evaluated(chosen, None, exc.one_line(), parity, why))
                return
        self.post_message(Evaluated(chosen, outcome, "", parity, why))
        # keyed by the listing this thread read (self.paired is the UI thread's, and may not
        # hold it yet), so the list's words never compare the shown run a second time
        key = (chosen, next((r.state for r in runs if r.run_id == chosen), ""))
        self._words[key] = past_verdicts.verdict_word(outcome)
        self.post_message(RowVerdict(chosen, self._words[key]))
        self._fill_words(runs)

    def _fill_words(self, runs: list[PairedRun], most: int = 12) -> None:
        """The verdict word of the newest listed runs not worked out yet (in this thread)."""
        from textual.worker import get_current_worker

        from fibtui.core import past_verdicts
        from fibtui.core.errors import FibError
        from fibtui.services import decide

        for r in runs[:most]:
            if get_current_worker().is_cancelled:  # a newer evaluate took over
                return
            key = (r.run_id, r.state)
            if key not in self._words:
                try:
                    word = past_verdicts.verdict_word(decide.compare(self.workspace, r.run_id))
                except FibError:
                    word = "cannot compare"
                self._words[key] = word
            self.post_message(RowVerdict(r.run_id, self._words[key]))

    @on(PairedListed)
    def _listed(self, message: PairedListed) -> None:
        self.paired = message.runs
        table = self.query_one("#paired-runs", DataTable)
        keep = self.run_id
        table.clear()
        for r in message.runs:
            kind = "CPU interp" if r.timing_kind == "cpu-interpreter" else r.timing_kind
            table.add_row(
                r.run_id,
                r.device_short,
                kind,
                r.scope,
                self._words.get((r.run_id, r.state), "…"),
                key=r.run_id,
            )
        if keep is not None and keep in {r.run_id for r in message.runs}:
            table.move_cursor(row=table.get_row_index(keep), scroll=True)

    @on(RowVerdict)
    def _row_verdict(self, message: RowVerdict) -> None:
        table = self.query_one("#paired-runs", DataTable)
        try:
            table.update_cell(message.run_id, "verdict", message.word, update_width=True)
        except Exception:  # noqa: BLE001 - a row no longer listed
            pass

    @on(DataTable.RowSelected, "#paired-runs")
    def _picked(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.show_run(str(event.row_key.value))

    def show_run(self, run_id: str) -> None:
        """Show one paired run's verdict, per-band table and parity (the list's enter, History)."""
        self.evaluate(run_id, picked=True)

    @on(Evaluated)
    def _evaluated(self, message: Evaluated) -> None:
        self.run_id, self.outcome = message.run_id, message.outcome
        if message.run_id is not None:
            table = self.query_one("#paired-runs", DataTable)
            try:
                table.move_cursor(row=table.get_row_index(message.run_id), scroll=True)
            except Exception:  # noqa: BLE001 - not listed (yet)
                pass
        box = self.query_one("#verdict", Static)
        bands = self.query_one("#bands", DataTable)
        bands.clear()
        if message.outcome is None:
            if message.run_id is None:
                box.update(f"{message.reason}\n{_parity_line(message.parity)}")
            else:
                box.update(Text(f"{message.run_id}: {message.reason}", style="red"))
            return
        c = message.outcome.single or (
            message.outcome.entries[0].comparison if message.outcome.entries else None
        )
        if c is None:
            box.update(f"{message.run_id}: nothing to compare")
            return
        iv = c.interval.method if c.interval else "none"
        wins, ties, losses = c.wins
        head = (
            f"[bold {colour_of(c.verdict, 'white')}]verdict {c.verdict}[/]  {escape(c.candidate.name)} vs "
            f"{escape(c.baseline.name)}  (run {message.run_id}, scope {c.scope}, {c.workloads} paired workloads)"
        )
        if c.no_speed_reason is not None:
            # the recommendation names the reason, the correctness counts and what to do
            lines = [head, f"[yellow]{escape(c.recommendation())}[/]"]
        else:
            measured = []
            if c.scope == "sample" and c.measured is not None:
                # a sample says what it measured, band by band; PROMOTE is the full sweep's
                measured = [
                    f"[bold {colour_of(c.measured.word, 'white')}]measured "
                    f"{c.measured.word.upper()}[/]  {escape(c.measured.text)}",
                    "[dim]across these workloads (a sample: the full sweep decides promotion):[/]",
                ]
            # avg and p95 latency first, speedup as context, the worst workloads, the
            # disagreement: the words are core's (Comparison.verdict_lines)
            lines = [
                head,
                *measured,
                *(
                    f"[yellow]{escape(x)}[/]"
                    if x.startswith("the measures disagree")
                    else escape(x)
                    for x in c.verdict_lines()
                ),
                f"[dim]G's interval: {escape(iv)}[/]",
                f"tau {c.tau.tau * 100:.2f}% ({escape(c.tau.source)})  ·  threshold: the baseline's mean across repeats "
                f"{(c.baseline.mean_latency_ms or 0) * 1000:.3f} us",
                f"wins/ties/losses {wins}/{ties}/{losses}  ·  {escape(c.recommendation())}",
            ]
            if c.noise is not None and not c.noise.estimated:
                lines.append(
                    "[yellow]guard not judged: no noise estimate for these rows (repeats, or A/A history of "
                    "this definition, device and timing)[/]"
                )
        if c.blocked_by:
            lines.append("[red]blocked by: " + escape("; ".join(c.blocked_by)) + "[/]")
        if c.failures:
            lines.append("[red]failures: " + escape("; ".join(c.failures[:4])) + "[/]")
        if len(message.outcome.entries) > 1:
            board = " > ".join(
                f"{e.arm.name} {((e.arm.mean_latency_ms or 0) * 1000):.3f} us"
                for e in message.outcome.entries
            )
            lines.append(f"leaderboard: {board}")
        lines += [f"[cyan]{escape(x)}[/]" for x in message.outcome.official_lines()]
        if message.why:  # after the verdict's own lines: at 80x24 those are what is in sight
            lines.append(
                f"[dim]showing {escape(message.why)} · enter on a listed run shows it[/dim]"
            )
        lines.append(_parity_line(message.parity))
        lines.append("[dim]A archive · P promote · R reject and restore the previous best[/dim]")
        box.update("\n".join(lines))
        words = {w.band: w.word for w in c.measured.bands} if c.measured else {}
        for b in c.per_band:
            tag = (
                "regression"
                if b.regression
                else ("dispatch candidate" if b.dispatch_candidate else "")
            )
            if words.get(b.band):
                tag = words[b.band] + (f", {tag}" if tag else "")
            style = "green" if b.change_pct < -0.5 else ("red" if b.change_pct > 0.5 else "")
            bands.add_row(
                short_band_name(b.band),
                str(b.workloads),
                _us(b.base_mean_ms),
                _us(b.cand_mean_ms),
                Text(f"{b.change_pct:+.2f}%", style=style),
                f"{b.geomean_ratio:.4f}",
                f"[{b.ci_low:.4f}, {b.ci_high:.4f}]",
                f"{b.wins}/{b.ties}/{b.losses}",
                Text(tag, style="bold red" if b.regression else "cyan"),
            )

    # ---------------------------------------------------------------- decisions

    def decide(self, action: str) -> None:
        from fibtui.ui.screens.confirm import ConfirmScreen

        if self.workspace is None or self.outcome is None or self.run_id is None:
            self.notify("no verdict to act on yet", severity="warning")
            return
        c = self.outcome.single or self.outcome.entries[0].comparison
        if c is None:  # no entry of the outcome was compared
            self.notify("no verdict to act on yet", severity="warning")
            return
        facts = [
            ("run", self.run_id),
            ("candidate", c.candidate.name),
            ("verdict", c.verdict),
            ("G", f"{c.geomean_ratio:.4f}" if c.geomean_ratio else "-"),
        ]
        what = {
            "archive": ("Archive this round", "Archive the candidate and write the round summary?"),
            "promote": (
                "Promote the candidate",
                "Install it as the solution, make it the best snapshot and commit?",
            ),
            "reject": (
                "Reject and restore",
                "Archive the candidate, then restore the checked-in kernel to the previous best?",
            ),
        }[action]
        if action == "promote" and c.verdict != "PROMOTE":
            from fibtui.ui.screens.confirm import ChoiceScreen

            # nothing to confirm: say why and offer the way back only
            lines = "\n".join(f"{k}: {v}" for k, v in facts)
            _ = self.app.push_screen(
                ChoiceScreen(
                    "Promotion needs a PROMOTE verdict",
                    f"{lines}\n\nThe verdict is {c.verdict}, so the candidate cannot be promoted from here. "
                    "`fibtui promote --force` overrides it from the CLI.",
                    [("b", "Back", "back")],
                )
            )
            return

        def answered(ok: bool | None) -> None:
            if ok:
                self._decide(action)

        _ = self.app.push_screen(ConfirmScreen(what[0], facts, what[1]), answered)

    @work(thread=True, exclusive=True, group="promotion-decide", exit_on_error=False)
    def _decide(self, action: str) -> None:
        from fibtui.services import decide

        ws, run_id = self.workspace, self.run_id
        if ws is None or run_id is None:  # decide() asked only with both
            return
        if action == "promote":
            result = decide.promote(ws, [run_id])
        elif action == "reject":
            result = decide.reject(ws, [run_id])
        else:
            result = decide.archive_round(ws, [run_id])
        self.post_message(Decided(action, result))

    @on(Decided)
    def _decided(self, message: Decided) -> None:
        from textual.widgets import RichLog

        log = self.query_one("#decision-log", RichLog)
        rec = message.result.record
        log.write(
            f"[b]{message.action}[/b]: {rec.decision} {rec.candidate.get('name', '')} (round {rec.round or '-'})"
        )
        for path in message.result.written:
            log.write(f"  wrote {path}")
        if message.result.commit:
            log.write(f"  committed {message.result.commit[:12]}")
        for w in message.result.warnings:
            log.write(f"  [yellow]{w}[/]")
        self.notify(f"{message.action}: done")

    def palette_commands(self) -> list[tuple[str, Callable[[], object], str]]:
        if self.outcome is None:
            return []
        out: list[tuple[str, Callable[[], object], str]] = [
            (
                "Archive this round",
                lambda: self.decide("archive"),
                "candidate snapshot + round summary",
            ),
            (
                "Reject the candidate and restore the previous best",
                lambda: self.decide("reject"),
                "archives it first",
            ),
        ]
        c = self.outcome.single
        if c is not None and c.verdict == "PROMOTE":
            out.insert(
                0,
                (
                    "Promote the candidate",
                    lambda: self.decide("promote"),
                    "the verdict says PROMOTE",
                ),
            )
        return out


def _parity_line(parity: ParityStatus | None) -> str:
    """Submission-ready needs one official-parity run (fibtui parity)."""
    if parity is None:
        return "[yellow]official parity: none yet[/] (`fibtui parity` runs flashinfer-bench in the official shape; submission-ready needs one)"
    colour = "green" if parity.complete else "red"
    return (
        f"[{colour}]official parity {parity.id}: {parity.passed}/{parity.total} PASSED[/] ({parity.solution}, {parity.source}"
        + (f", {count(parity.warnings, 'warning')}" if parity.warnings else "")
        + ")"
    )


def _us(ms: float | None) -> str:
    return f"{ms * 1000:.3f}" if ms is not None else "-"
