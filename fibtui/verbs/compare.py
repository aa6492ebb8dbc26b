"""``fibtui compare BASE [CAND]``: is the candidate faster than the baseline?

    fibtui compare BASE [CAND] [--solution-base NAME] [--solution-cand NAME] [--aa]
                   [--timing fibtui|official] [--json]

BASE and CAND: any result file ``fibtui results show`` reads (flashinfer-bench traces, the hand
workflow's retained_run.json, fibtui's run.json...), a run folder, or a run id under the
workspace's ``optimize_ops/runs``. With BASE alone it must be a paired run: its baseline role
against its candidate role(s). From BASE the baseline is ``--solution-base``, else its baseline
role, else its only solution; from CAND the candidates are ``--solution-cand``, else its
candidate role, else every solution it holds (several candidates make a leaderboard, ranked by
mean latency, then p95, then run-to-run variance, each with its own verdict).

``--aa`` records the comparison as an A/A session (two runs of the same code) in
``optimize_ops/benchmarks/aa.jsonl``; A/A sessions set the noise floor tau and calibrate the
interval (see fibtui.core.stats).

Speed verdicts come only from GPU timings of one kind on one device: CPU-interpreter runs, or
arms timed differently (fibtui's CUPTI vs a flashinfer-bench file) or on different GPUs, give
NO_SPEED_VERDICT with their correctness counts. Without a noise estimate for the rows (repeats in
the run, or A/A history of the same definition, device and timing kind) the regression guard and
the per-band intervals are not judged, and PROMOTE needs them.

``--json`` (one candidate) prints ``verdict`` (PROMOTE | REJECT | INCONCLUSIVE | BLOCKED |
INCOMPLETE | NOT_JUDGED | NO_SPEED_VERDICT), ``no_speed_reason``, ``guard_judged``, ``interval_verdict``, ``recommendation``, ``baseline``, ``candidate``,
``geomean_ratio`` (G, candidate / baseline), ``log_g``, ``ci_low``, ``ci_high`` (the interval of G),
``interval_method``, ``confidence``, ``error_rate``, ``tau``, ``tau_source``, ``noise_floor``,
``pair_noise``, ``workloads`` (paired), ``unpaired``, ``wins``/``ties``/``losses``, ``tie_band``,
``scope`` (full | sample), ``per_band`` (band, workloads, base_mean_ms, cand_mean_ms, change_pct,
geomean_ratio, ci_low, ci_high, wins, ties, losses, regression, dispatch_candidate),
``dispatch_bands``, ``measured`` (per band what the interval says against tau, and the overall
word: ``word`` faster | slower | unchanged | mixed | undecided, ``text``, ``bands``: band, word,
workloads, ratio, ci_low, ci_high, share of the definition's latency; ``share``, ``share_source``;
null when the band intervals are not judged), ``look`` (an adaptive run: look, cap, critical,
spending, nominal_confidence; else null), ``blocked_by`` (strings naming each workload or band the guard stopped on),
``guard``, ``guard_margin``, ``complete``, ``failures``, ``threshold``, ``arms`` (mean, p95,
median, best single repeat, run-to-run CV per arm), ``per_workload``, ``notes``, ``base``, ``cand``.
With several candidates: ``baseline``, ``leaderboard`` (rank, name, mean_latency_ms,
p95_latency_ms, run_to_run_cv, complete, verdict, geomean_ratio, ci_low, ci_high, blocked_by,
dispatch_bands) and ``comparisons`` (one object as above per candidate).

A sample (a representative gate, a selection: ``scope`` sample) never says PROMOTE: its headline is
what it measured, per band (``measured``): "mixed: faster at batch_size=1 by 24% (4.9% of
latency); unchanged at batch_size=48 (20% of latency) and batch_size=64 (25% of latency)". The
full sweep decides promotion. An adaptive run (``fibtui run --adaptive``) is compared at the look
where it stopped, with its repeated intervals.

The three measures (docs/measurement.md, "Three measures"): ``mean_latency_change`` (a fraction,
candidate over baseline minus 1) with ``mean_latency_interval`` ([low, high], from the same paired
noise as the guard) and ``mean_latency_verdict`` (what that interval says against tau: it decides
PROMOTE and REJECT), ``p95_latency_change``, the projected contest score (``score``,
``score_baseline``, ``score_delta``, ``score_interval``, ``score_denominator``: the mean of the
per-workload speedups against the definition's reference; ``scores`` holds one object per
denominator, a named baseline solution's (``[score] baseline`` in fibtui.toml) after the
reference's), ``words`` (what G, the mean latency and the score say against tau), ``worst_workloads``
(the three largest slowdowns: uuid, axes, band, ratio, change, ci_low, ci_high, pairs), and
``disagreement`` (one line when the measures do not say the same, else null); ``verdict_lines``:
what the CLI, the Promotion pane and the round summary print.

``--timing official`` decides on the official-equivalent latencies of runs timed with ``fibtui run
--timing official`` (timing kind ``official-equivalent``); without it, such runs also carry
``official`` (the same comparison on those latencies, deciding nothing).

Two files of different definitions (each file's own, else the definitions its rows name) are
refused in one line, exit 2: a workload id shared by two definitions does not name the same
workload. ``--allow-definitions`` compares them all the same.

Exit codes, as ``fibtui run``'s for the same rows: 0 a verdict was reached (whatever it is:
PROMOTE, REJECT, INCONCLUSIVE, BLOCKED, NO_SPEED_VERDICT); 1 a job failed or is missing
(INCOMPLETE, INCORRECT); 3 nothing failed, but some rows could not be judged on that machine
(UNSUPPORTED_HERE: NOT_JUDGED); 2 bad input.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fibtui.verdict_colours import colour_of

if TYPE_CHECKING:
    from rich.console import Console

    from fibtui.core.stats import CompareOutcome, Comparison
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("compare", help="paired verdict: is the candidate faster than the baseline?")
    common(p)
    p.add_argument(
        "base", metavar="BASE", help="result file, run folder or run id (alone: a paired run)"
    )
    p.add_argument("cand", metavar="CAND", nargs="?", help="result file, run folder or run id")
    p.add_argument("--solution-base", metavar="NAME", help="the baseline solution inside BASE")
    p.add_argument("--solution-cand", metavar="NAME", help="the candidate solution inside CAND")
    p.add_argument(
        "--aa",
        action="store_true",
        help="record this comparison of the same code with itself as an A/A session",
    )
    p.add_argument(
        "--timing",
        choices=("fibtui", "official"),
        default="fibtui",
        help="official: decide on the official-equivalent latencies of runs timed with "
        "`fibtui run --timing official` (default: fibtui's own timing decides)",
    )
    p.add_argument(
        "--allow-definitions",
        action="store_true",
        help="compare two files of different definitions (refused by default: their workload "
        "ids do not name the same workloads)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the verdict as JSON (keys: see the module docstring)",
    )
    p.set_defaults(func=compare)


def compare(args: argparse.Namespace) -> int:
    from fibtui.core import stats
    from fibtui.core.errors import UsageError
    from fibtui.services import decide
    from fibtui.verbs._common import emit_json, workspace_from

    ws = workspace_from(args, required=False)
    archive_root = ws.archive_root if ws is not None else None
    outcome = decide.compare(
        ws,
        args.base,
        args.cand,
        solution_base=args.solution_base,
        solution_cand=args.solution_cand,
        timing=args.timing,
        allow_definitions=args.allow_definitions,
    )
    base = outcome.base
    definition = base.table.definition
    if args.aa:
        if archive_root is None:
            raise UsageError(
                "--aa stores the session in the workspace's optimize_ops/: run it inside a workspace (or pass --workspace)"
            )
        single = outcome.single
        if single is None:
            raise UsageError("--aa needs exactly one candidate (name it with --solution-cand)")
        key_b, key_c = stats.timing_key_of_source(base), stats.timing_key_of_source(outcome.cand)
        blocker = stats.speed_blocker(key_b, key_c)
        if blocker is not None:
            raise UsageError(
                f"--aa records nothing: {blocker}; an A/A session needs two GPU runs of the same "
                "code timed the same way on one device"
            )
        hb, hc = single.baseline.source_hash, single.candidate.source_hash
        if hb and hc and hb != hc:
            outcome.notes.append(
                f"warning: the two arms have different source hashes ({hb} vs {hc}): is this really the same code?"
            )
        source = f"{base.label} vs {outcome.cand.label}"
        session = stats.aa_session_from(
            single, source, "compare --aa", definition, key_b.device, key_b.kind
        )
        path = stats.record_aa_session(archive_root, session)
        outcome.notes.append(f"A/A session recorded in {path} (log G {session.log_g:+.5f})")
    if args.json:
        emit_json(outcome.to_json())
        return compare_exit_code(outcome)
    _print(outcome)
    return compare_exit_code(outcome)


def compare_exit_code(outcome: CompareOutcome) -> int:
    """The exit code ``fibtui run`` gives the same rows (fibtui.verbs.run.run_exit_code): 1 when
    a job failed or is missing (a verdict of INCOMPLETE, or a row neither PASSED nor a tool
    limit), 3 when the only rows not PASSED are tool limits (UNSUPPORTED_HERE: NOT_JUDGED),
    0 otherwise: a verdict was reached, whatever it is (PROMOTE, REJECT, INCONCLUSIVE...)."""
    from fibtui.core import stats
    from fibtui.core.status import is_tool_limit

    code = 0
    for entry in outcome.entries:
        c = entry.comparison
        if c is None:
            continue
        failures = list(c.baseline.failures) + list(c.candidate.failures)
        if c.verdict == stats.INCOMPLETE or any(not is_tool_limit(f.status) for f in failures):
            return 1
        if failures or c.verdict == stats.NOT_JUDGED:
            code = 3
    return code


# --------------------------------------------------------------------------------------------
# Human output
# --------------------------------------------------------------------------------------------


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1000:.3f}"


def measured_line(c: Comparison) -> str | None:
    """A sample's headline (rich markup): what it measured, band by band, against tau."""
    from rich.markup import escape

    m = c.measured
    if m is None:
        return None
    colour = colour_of(m.word, "white")
    share = f"; the bands measured hold {m.share * 100:.0f}% of the latency" if m.share else ""
    rest = m.text
    for lead in (f"{m.word}: ", f"{m.word} "):
        if rest.startswith(lead):
            rest = rest[len(lead) :]
            break
    return f"[bold {colour}]{m.word.upper()}[/]  {escape(rest)}[dim]{escape(share)}[/]"


def measure_lines(con: Console, c: Comparison, indent: str = "") -> None:
    """The three measures (core's ``Comparison.verdict_lines``): avg and p95 latency first, then
    speedup as context (G, the projected score), the worst workloads and, when the measures
    disagree, the line that says why."""
    from rich.markup import escape

    lead = c.latency_line()
    if lead:
        con.print(f"{indent}{escape(lead)}")
    for line in c.verdict_lines():
        if line == lead:
            continue
        if line.startswith("the measures disagree"):
            con.print(f"{indent}[yellow]{escape(line)}[/]")
        elif line.startswith("worst:"):
            con.print(f"{indent}{escape(line)}")
        else:
            con.print(f"{indent}[dim]{escape(line)}[/]")


def _undecided_hint(c: Comparison) -> str:
    """What decides a sample's undecided bands: more repeats, as many as they need."""
    m = c.measured
    if m is None or not any(b.word == "undecided" for b in m.bands) or c.look is not None:
        return ""
    return (
        "undecided bands need more repeats: fibtui run --adaptive repeats each workload until "
        "its band is decided (docs/measurement.md, Adaptive repeats)"
    )


def print_verdict(con: Console, outcome: CompareOutcome) -> None:
    """The verdict of a paired run, in a few lines (``fibtui run``): a sample (a representative
    gate, a selection) says what it measured per band; the full set says its verdict."""
    from rich.markup import escape

    for entry in outcome.entries:
        c = entry.comparison
        if c is None:
            continue
        con.print(
            f"[bold]{escape(c.candidate.name)}[/] vs [bold]{escape(c.baseline.name)}[/]  "
            f"(scope {c.scope}, {c.workloads} paired workloads)"
        )
        colour = colour_of(c.verdict, "white")
        if c.no_speed_reason is not None or c.geomean_ratio is None:
            con.print(f"  [bold {colour}]{c.verdict}[/]  -> {escape(c.recommendation())}")
            continue
        tau = f"tau {c.tau.tau * 100:.2f}% [dim]({escape(c.tau.source)})[/]"
        line = measured_line(c)
        if c.scope == "sample" and line is not None and c.measured is not None:
            con.print(f"  {line}")
            for b in c.measured.bands:
                con.print(
                    f"    {escape(b.band)}: ratio {b.ratio:.4f} [{b.ci_low:.4f}, {b.ci_high:.4f}] "
                    f"{b.word}" + (f", {b.share * 100:.1f}% of latency" if b.share else "")
                )
            con.print(
                f"  [dim]across the {c.workloads} workloads: {c.verdict}; "
                "PROMOTE is the full sweep's (--workloads all)[/]"
            )
            measure_lines(con, c, "  ")
            hint = _undecided_hint(c)
            if hint:
                con.print(f"  [dim]{hint}[/]")
        else:
            con.print(f"  [bold {colour}]{c.verdict}[/]")
            measure_lines(con, c, "  ")
            if line is not None:
                con.print(f"  by band: {line}")
        noise = (
            f"; noise of one paired ratio {c.noise.sigma * 100:.2f}% ({escape(c.noise.source)})"
            if c.noise
            else ""
        )
        con.print(f"  {tau}{noise}")
        con.print(f"  -> {escape(c.recommendation())}")
    for line in outcome.official_lines():
        con.print(f"  [cyan]{escape(line)}[/]")
    for note in outcome.notes:
        con.print(f"  [yellow]note[/] {escape(note)}")


def _print(outcome: CompareOutcome) -> None:
    from fibtui.verbs._common import console

    con = console()
    if outcome.single is None:
        _print_leaderboard(con, outcome)
    else:
        _print_one(con, outcome.single, outcome)
    from rich.markup import escape

    for line in outcome.official_lines():
        con.print(f"[cyan]{escape(line)}[/]")
    for note in outcome.notes:
        con.print(f"[yellow]note[/] {escape(note)}")


def _print_one(con: Console, c: Comparison, outcome: CompareOutcome) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.verbs._common import print_table

    b, k = c.baseline, c.candidate
    con.print(
        f"[bold]{escape(k.name)}[/] vs [bold]{escape(b.name)}[/]  ({escape(outcome.base.label)}"
        + (f" / {escape(outcome.cand.label)}" if outcome.cand is not outcome.base else "")
        + f"; {c.workloads} paired workloads, scope {c.scope})"
    )
    colour = colour_of(c.verdict, "white")
    if c.scope == "sample" and c.no_speed_reason is None and measured_line(c) is not None:
        con.print(measured_line(c))
        if _undecided_hint(c):
            con.print(f"[dim]{_undecided_hint(c)}[/]")
        con.print("[dim]across these workloads (PROMOTE is the full sweep's):[/]")
    if c.no_speed_reason is not None:
        con.print(f"[bold {colour}]{c.verdict}[/]  {escape(c.no_speed_reason)}")
        con.print(
            f"correctness: baseline {b.passed}/{b.rows} PASSED, candidate {k.passed}/{k.rows} PASSED"
        )
        _print_failures(con, c)
        con.print(f"-> {escape(c.recommendation())}")
        return
    if c.geomean_ratio is not None:
        con.print(
            f"[bold {colour}]{c.verdict}[/]  tau {c.tau.tau * 100:.2f}% "
            f"[dim]({escape(c.tau.source)})[/]"
        )
        measure_lines(con, c)
    else:
        con.print(f"[bold {colour}]{c.verdict}[/]  no paired workloads")
    if c.interval is not None:
        con.print(
            f"[dim]G's interval: {c.interval.method}"
            + (
                f"; noise of one paired ratio {c.noise.sigma * 100:.2f}% ({c.noise.source})"
                if c.noise
                else ""
            )
            + "[/]"
        )
    con.print(
        f"threshold: the baseline's mean across repeats, {_us(b.mean_latency_ms)} us "
        f"[dim](its best single repeat, {_us(b.best_repeat_mean_ms)} us, is context only)[/]"
    )
    t = Table(
        box=None, pad_edge=False, header_style="bold", title="latency (us)", title_justify="left"
    )
    t.add_column("")  # role and solution name: never cut (print_table)
    for col in ("mean", "p95", "median", "best repeat", "run-to-run", "passed"):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for a in (b, k):
        cv = "-" if a.run_to_run_cv is None else f"{a.run_to_run_cv * 100:.2f}%"
        t.add_row(
            f"{a.role} {escape(a.name)}",
            _us(a.mean_latency_ms),
            _us(a.p95_latency_ms),
            _us(a.median_latency_ms),
            _us(a.best_repeat_mean_ms),
            cv,
            f"{a.passed}/{a.rows}",
        )
    print_table(con, t, ids=[0], drop=["best repeat", "median", "p95", "run-to-run"])
    wins, ties, losses = c.wins
    con.print(
        f"per workload: {wins} wins, {ties} ties, {losses} losses (tie band +-{c.tie_band * 100:.1f}%)"
    )
    words = {b.band: b.word for b in c.measured.bands} if c.measured else {}
    if len(c.per_band) > 1 or (c.scope == "sample" and c.per_band):
        bt = Table(
            box=None,
            pad_edge=False,
            header_style="bold",
            title_justify="left",
            title="bands: mean latency (us) before and after, geomean ratio interval",
        )
        bt.add_column("band")
        for col in ("n", "before", "after", "change", "ratio interval", "W/T/L"):
            bt.add_column(
                col,
                justify="right",
                no_wrap=True,
                min_width=len(col) if col != "ratio interval" else 11,
            )
        bt.add_column("", no_wrap=True, min_width=8)
        for band in c.per_band:
            flag = (
                "[red]slower[/]"
                if band.regression
                else ("[cyan]dispatch[/]" if band.dispatch_candidate else "")
            )
            word = words.get(band.band)
            if word:
                flag = f"[{colour_of(word, 'white')}]{word}[/]" + (f" {flag}" if flag else "")
            bt.add_row(
                escape(band.band),
                str(band.workloads),
                _us(band.base_mean_ms),
                _us(band.cand_mean_ms),
                f"{band.change_pct:+.2f}%",
                f"{band.ci_low:.3f}-{band.ci_high:.3f}",
                f"{band.wins}/{band.ties}/{band.losses}",
                flag,
            )
        print_table(con, bt, ids=["band"], drop=["W/T/L", "n", "before", "after"])
    if c.guard:
        con.print("[bold red]blocked by[/]:")
        for line in c.blocked_by:
            con.print(f"  {escape(line)}")
    elif c.noise is not None and c.noise.estimated:
        con.print(
            f"[dim]guard: no workload or band slower beyond +{c.guard_margin:.0%} with confidence (Holm)[/]"
        )
    else:
        con.print(
            "[yellow]guard: not judged[/] (no noise estimate for these rows: see the note below)"
        )
    _print_failures(con, c)
    con.print(f"-> {escape(c.recommendation())}")
    for note in c.notes:
        con.print(f"[yellow]note[/] {escape(note)}")


def _print_failures(con: Console, c: Comparison) -> None:
    from rich.markup import escape

    if not c.failures:
        return
    con.print(f"[bold red]incomplete[/]: {len(c.failures)} failure(s)")
    for f in c.failures[:10]:
        con.print(f"  {escape(f)}")
    if len(c.failures) > 10:
        con.print(f"  ... {len(c.failures) - 10} more")


def _print_leaderboard(con: Console, outcome: CompareOutcome) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.verbs._common import print_table

    con.print(
        f"[bold]leaderboard[/] against [bold]{outcome.baseline}[/] ({len(outcome.entries)} candidates; "
        "ranked by mean latency, then p95, then run-to-run variance)"
    )
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("candidate")
    for col in ("mean us", "p95 us", "avg change", "run-to-run", "G", "interval"):
        t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    t.add_column("verdict", no_wrap=True, min_width=12)
    for e in outcome.entries:
        c = e.comparison
        if c is None:  # the baseline's own row: a leaderboard lists candidates only
            continue
        a = c.candidate
        cv = "-" if a.run_to_run_cv is None else f"{a.run_to_run_cv * 100:.2f}%"
        g = "-" if c.geomean_ratio is None else f"{c.geomean_ratio:.4f}"
        iv = "-" if c.interval is None else f"[{c.interval.low:.3f}, {c.interval.high:.3f}]"
        change = "-" if c.mean_latency is None else f"{c.mean_latency.change * 100:+.2f}%"
        colour = colour_of(c.verdict, "white")
        t.add_row(
            str(e.rank),
            escape(e.name),
            _us(a.mean_latency_ms),
            _us(a.p95_latency_ms),
            change,
            cv,
            g,
            iv,
            f"[{colour}]{c.verdict}[/]",
        )
    print_table(
        con, t, ids=["candidate"], drop=["run-to-run", "p95 us", "interval", "G", "avg change"]
    )
    first = outcome.entries[0].comparison
    assert first is not None  # entries are candidates, each compared with the baseline
    con.print(
        f"[dim]baseline mean {_us(first.baseline.mean_latency_ms)} us; tau {first.tau.tau * 100:.2f}% ({escape(first.tau.source)})[/]"
    )
    for e in outcome.entries:
        c = e.comparison
        if c is not None and (c.blocked_by or c.dispatch_bands or c.failures):
            con.print(f"{escape(e.name)}: {escape(c.recommendation())}")
