"""Decisions and rounds: ``fibtui promote``, ``fibtui reject``, ``fibtui archive``,
``fibtui round summary`` and ``fibtui round list``.

    fibtui promote [RUN_ID ...] [--candidate NAME] [--topic T] [--name SOLUTION_NAME] [--force]
                   [--no-commit] [--json]
    fibtui reject  [RUN_ID ...] [--candidate NAME] [--topic T] [--reason TEXT] [--json]
    fibtui archive [RUN_ID ...] [--candidate NAME] [--topic T] [--reason TEXT]
                   [--ncu FILE] [--file FILE] [--run-folder DIR] [--parallel-runs DIR] [--json]
    fibtui round summary [ROUND] [--runs RUN_ID ...] [--write] [--json]
    fibtui round list [--json]

A round is the paired runs of one baseline and one candidate: the named RUN_IDs, else the newest
paired run (of ``--candidate`` when given) and every run of the same baseline and candidate sources
(gate and full sweep). Its verdict comes from the newest full sweep (fibtui.core.stats).

- ``promote``: refused (exit 1) unless the verdict is PROMOTE on a full sweep (``--force``
  overrides). Archives the candidate's run snapshot under optimize_ops/v<major>/ (or kernels/),
  writes the best snapshot under optimize_ops/best_solution_<language>/ named latency-first,
  installs the snapshot as the checked-in kernel (solution/<language>/), sets config.toml
  ``[solution] name`` (``--name``, default ``<definition>_<candidate>``; comments kept), records
  the round in optimize_ops/docs/rounds.jsonl, writes the round summary, and commits those paths
  when the workspace is a git repository (``--no-commit`` to leave that to you).
- ``reject``: archives the rejected candidate first (its run snapshot, and the workspace's kernel
  when it differs from the last commit), then restores solution/<language>/ from the last commit
  (else from the best snapshot), records the round and writes its summary.
- ``archive``: keeps the candidate without promoting it (a local win, a dispatch candidate for a
  band); ``--ncu``, ``--file``, ``--run-folder`` and ``--parallel-runs`` archive those as well (alone,
  they archive only those).
- ``round summary``: prints the Markdown summary of a recorded round (default: the latest),
  regenerated from the records; ``--write`` rewrites docs/round_<date>_<topic>.md and .json;
  ``--runs`` summarizes runs that have no decision yet (nothing written); ``--json`` prints the
  JSON twin.

Each decision prints what it wrote; ``--json`` prints ``round``, ``decision``, ``verdict``,
``summary``, ``written`` (paths relative to the workspace), ``warnings``, ``commit``, ``restored``
and ``comparison`` (as ``fibtui compare --json``).

Exit codes: 0 done; 1 promotion refused by the verdict; 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from fibtui.core.text import printable

#: a verb's handler
Verb = Callable[[argparse.Namespace], int]


def _round_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN_ID",
        help="the round's runs (default: the newest paired run and its siblings)",
    )
    p.add_argument("--candidate", metavar="NAME", help="the candidate (when a run holds several)")
    p.add_argument(
        "--topic",
        metavar="TOPIC",
        help="round topic for the summary's name (default: the candidate id)",
    )
    p.add_argument("--json", action="store_true")


if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace
    from fibtui.services.archive import DecisionResult
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "promote",
        help="make a faster candidate the checked-in kernel (archived, summarized, committed)",
    )
    common(p)
    _round_args(p)
    p.add_argument("--name", metavar="SOLUTION_NAME", help="new config.toml [solution] name")
    p.add_argument("--force", action="store_true", help="promote whatever the verdict says")
    p.add_argument("--no-commit", action="store_true", help="do not commit the changed paths")
    p.set_defaults(func=promote)

    p = sub.add_parser(
        "reject", help="archive the candidate, restore the checked-in kernel to the previous best"
    )
    common(p)
    _round_args(p)
    p.add_argument("--reason", metavar="TEXT")
    p.set_defaults(func=reject)

    p = sub.add_parser(
        "archive", help="keep a candidate (or files) in optimize_ops/ without promoting it"
    )
    common(p)
    _round_args(p)
    p.add_argument("--reason", metavar="TEXT")
    p.add_argument(
        "--ncu",
        action="append",
        default=[],
        metavar="FILE",
        help="an Nsight Compute report to archive",
    )
    p.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="FILE",
        help="a result file to archive under benchmarks/",
    )
    p.add_argument(
        "--run-folder",
        action="append",
        default=[],
        metavar="DIR",
        help="a fibtui run folder to copy into runs/",
    )
    p.add_argument(
        "--parallel-runs",
        action="append",
        default=[],
        metavar="DIR",
        help="another runner's result folder, to <operator>/parallel_runs/",
    )
    p.set_defaults(func=archive)

    p = sub.add_parser("round", help="round summaries")
    rsub = p.add_subparsers(
        dest="round_verb", metavar="ACTION", required=True, parser_class=type(p)
    )
    sp = rsub.add_parser("summary", help="the round summary, regenerated from the records")
    common(sp)
    sp.add_argument(
        "round",
        nargs="?",
        metavar="ROUND",
        help="a round (date_topic) from fibtui round list (default: the latest)",
    )
    sp.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN_ID",
        help="summarize these runs (no decision yet; nothing written)",
    )
    sp.add_argument("--candidate", metavar="NAME")
    sp.add_argument(
        "--write", action="store_true", help="rewrite docs/round_<date>_<topic>.md and .json"
    )
    sp.add_argument("--json", action="store_true", help="print the JSON twin")
    sp.set_defaults(func=round_summary)
    lp = rsub.add_parser("list", help="every recorded round")
    common(lp)
    lp.add_argument("--json", action="store_true")
    lp.set_defaults(func=round_list)


# --------------------------------------------------------------------------------------------


def _report(ws: Workspace, result: DecisionResult, args: argparse.Namespace) -> int:
    from fibtui.verbs._common import console, emit_json

    if args.json:
        emit_json(result.to_json(ws.root))
        return 0
    from rich.markup import escape

    con = console()
    rec = result.record
    if rec.round:
        con.print(
            f"[bold]{rec.decision}[/] {escape(str(rec.candidate.get('name', '')))}  (round {rec.round}, verdict {rec.verdict})"
        )
    elif rec.decision == "rejected":
        con.print(
            "[bold]rejected[/] the workspace's kernel (no paired run measured these sources, so no round was recorded)"
        )
    else:
        con.print(f"[bold]{rec.decision}[/] (files only, no round recorded)")
    if result.comparison is not None and result.comparison.geomean_ratio is not None:
        c = result.comparison
        for line in c.verdict_lines():  # avg and p95 latency first, speedup as context
            con.print(f"  {escape(line)}")
        con.print(f"  tau {c.tau.tau * 100:.2f}% ({escape(c.tau.source)})")
    for path in result.written:
        try:
            shown = path.resolve().relative_to(ws.root.resolve())
        except ValueError:
            shown = path
        con.print(f"  wrote {escape(str(shown))}", no_wrap=True, overflow="ignore", crop=False)
    if result.restored is not None:
        con.print(
            f"  restored {len(result.restored.restored)} file(s) from {escape(str(result.restored.source))}"
            + (
                f"; removed {escape(', '.join(result.restored.removed))}"
                if result.restored.removed
                else ""
            )
        )
    if result.commit:
        con.print(f"  committed {result.commit[:12]}")
    for w in result.warnings:
        con.print(f"  [yellow]warning[/] {escape(w)}")
    return 0


def _refused_as_json(decide: Verb) -> Verb:
    """A decision verb whose refusal (CheckFailed: the verdict does not allow it, exit 1) is also
    a JSON object on stdout under ``--json`` (``decision`` null, ``refused`` true, ``error``), so
    a script reading stdout sees why; the one line on stderr and the exit code stay."""
    import functools

    @functools.wraps(decide)
    def verb(args: argparse.Namespace) -> int:
        from fibtui.core.errors import CheckFailed

        try:
            return decide(args)
        except CheckFailed as exc:
            if not getattr(args, "json", False):
                raise
            from fibtui.verbs._common import emit_json

            emit_json(
                {
                    "decision": None,
                    "refused": True,
                    "verb": args.verb,
                    "error": exc.one_line(),
                    "exit_code": exc.exit_code,
                }
            )
            sys.stderr.write(f"fibtui: error: {printable(exc.one_line(), one_line=True)}\n")
            return exc.exit_code

    return verb


@_refused_as_json
def promote(args: argparse.Namespace) -> int:
    from fibtui.services import decide
    from fibtui.verbs._common import workspace_from

    ws = workspace_from(args)
    assert ws is not None
    result = decide.promote(
        ws,
        args.runs,
        args.candidate,
        topic=args.topic,
        force=args.force,
        new_name=args.name,
        commit=not args.no_commit,
    )
    return _report(ws, result, args)


@_refused_as_json
def reject(args: argparse.Namespace) -> int:
    from fibtui.services import decide
    from fibtui.verbs._common import workspace_from

    ws = workspace_from(args)
    assert ws is not None
    result = decide.reject(ws, args.runs, args.candidate, topic=args.topic, reason=args.reason)
    return _report(ws, result, args)


@_refused_as_json
def archive(args: argparse.Namespace) -> int:
    from fibtui.core.archive import RoundRecord
    from fibtui.services import archive as arch
    from fibtui.services.archive import DecisionResult
    from fibtui.verbs._common import workspace_from

    ws = workspace_from(args)
    assert ws is not None
    root = ws.archive_root
    written = []
    for f in args.ncu:
        written.append(arch.archive_ncu_report(root, f))
    for f in args.file:
        written.append(arch.archive_file(root, f))
    for f in args.run_folder:
        written.append(arch.archive_run(root, f))
    operator = (ws.active.definition if ws.active else None) or "operator"
    for f in args.parallel_runs:
        written.append(arch.archive_parallel_runs(root, operator, f))
    files_only = bool(written) and not args.runs and not args.candidate
    if files_only:
        rec = RoundRecord(
            round="",
            date="",
            topic="",
            definition="",
            baseline={},
            candidate={},
            runs=[],
            decision="archived",
        )
        return _report(ws, DecisionResult(rec, None, written, []), args)
    from fibtui.services import decide

    result = decide.archive_round(
        ws, args.runs, args.candidate, topic=args.topic, reason=args.reason
    )
    result.written = written + result.written
    return _report(ws, result, args)


def round_summary(args: argparse.Namespace) -> int:

    from fibtui.core import archive, stats
    from fibtui.core.errors import UsageError
    from fibtui.services import decide
    from fibtui.services.archive import summary_for_runs
    from fibtui.verbs._common import emit_json, workspace_from

    ws = workspace_from(args)
    assert ws is not None
    root = ws.archive_root
    if args.runs:
        if args.round or args.write:
            raise UsageError(
                "--runs summarizes undecided runs: it takes no ROUND and writes nothing"
            )
        first = archive.load_run(root, args.runs[0])
        d, workloads = decide.dataset_for(ws, first.record.get("definition"))
        md, report = summary_for_runs(
            root,
            args.runs,
            args.candidate,
            stats.StatsSettings.from_workspace(ws.root),
            d,
            workloads,
        )
    else:
        rec = archive.find_round(root, args.round)
        d, workloads = decide.dataset_for(ws, rec.definition)
        md, report = archive.render_round(root, rec, d, workloads)
        if args.write:
            for path in archive.write_round_summary(root, rec, d, workloads):
                sys.stderr.write(f"wrote {printable(str(path), one_line=True)}\n")
    if args.json:
        emit_json(report)
    else:
        sys.stdout.write(printable(md))  # names and notes from files: shown, never obeyed
    return 0


def round_list(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core import archive
    from fibtui.verbs._common import console, emit_json, print_table, workspace_from

    ws = workspace_from(args)
    assert ws is not None
    rounds = archive.load_rounds(ws.archive_root)
    if args.json:
        emit_json([r.to_json() for r in rounds])
        return 0
    con = console()
    if not rounds:
        con.print("no round recorded yet (fibtui promote / reject / archive record one)")
        return 0
    t = Table(
        "round",
        "candidate",
        "baseline",
        "decision",
        "verdict",
        "runs",
        "summary",
        box=None,
        pad_edge=False,
        header_style="bold",
    )
    for r in rounds:
        t.add_row(
            *(
                escape(str(v))
                for v in (
                    r.round,
                    r.candidate.get("name", ""),
                    r.baseline.get("name", ""),
                    r.decision,
                    r.verdict,
                    len(r.runs),
                    f"optimize_ops/{r.summary}" if r.summary else "-",
                )
            )
        )
    print_table(
        con,
        t,
        ids=["round", "candidate", "baseline"],
        drop=["runs", "summary", "baseline", "verdict"],
    )
    return 0
