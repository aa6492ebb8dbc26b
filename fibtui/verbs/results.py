"""``fibtui results show FILE``."""

from __future__ import annotations

import argparse


def register(sub, common) -> None:
    p = sub.add_parser("results", help="read result files")
    rsub = p.add_subparsers(dest="results_verb", metavar="ACTION", required=True, parser_class=type(p))
    rp = rsub.add_parser("show", help="normalize any result file into one run table")
    common(rp)
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--solution", metavar="NAME")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(func=results)


def _axes_lookup(args: argparse.Namespace):
    """Join axes from the workspace's dataset when the result file has none."""
    from fibtui.core.decisions import axes_lookup
    from fibtui.verbs._common import workspace_from

    return axes_lookup(workspace_from(args, required=False))


def results(args: argparse.Namespace) -> int:
    from fibtui.core.errors import InputError
    from fibtui.core.results import load_results, table_to_json
    from fibtui.verbs._common import emit_json

    table = load_results(args.file, axes_lookup=_axes_lookup(args))
    if args.solution is not None and args.solution not in table.solutions:
        raise InputError(args.file, f"no rows for solution {args.solution!r}; solutions here: {', '.join(table.solutions) or 'none'}",
                         field="--solution")
    if args.json:
        emit_json(table_to_json(table, args.solution))
        return 0
    _print_table(table, args.solution)
    return 0


def _print_table(table, solution: str | None) -> None:
    from rich.table import Table

    from fibtui.core.results import summarize
    from fibtui.verbs._common import console, fmt_ms

    con = console()
    con.print(f"[bold]{table.path}[/]  [dim]{table.source_format}[/]  definition: {table.definition or '?'}")
    for key in ("runs", "sizes"):
        if key in table.extra:
            _print_extra(con, key, table.extra[key])
    if "tables" in table.extra:
        from rich.markdown import Markdown

        con.print(Markdown(table.extra["markdown"]))
    rows = table.for_solution(solution)
    if rows:
        axes_names = sorted({a for r in rows for a in r.axes})
        t = Table("#", "solution", "uuid", *axes_names, "status", "latency ms", "ref ms", "speedup", "abs err", "rel err",
                  box=None, pad_edge=False, header_style="bold")
        for i, r in enumerate(rows):
            colour = "green" if r.passed else "red"
            t.add_row(str(i), r.solution or "-", r.uuid, *[str(r.axes.get(a, "")) for a in axes_names],
                      f"[{colour}]{r.status}[/]", fmt_ms(r.latency_ms), fmt_ms(r.reference_latency_ms, 3),
                      f"{r.speedup:.2f}x" if r.speedup is not None else "-",
                      f"{r.max_abs_error:.2e}" if r.max_abs_error is not None else "-",
                      f"{r.max_rel_error:.2e}" if r.max_rel_error is not None else (r.error or "-"))
        con.print(t)
    groups = [solution] if solution or len(table.solutions) <= 1 else table.solutions
    for name in groups:
        s = summarize(table.for_solution(name))
        if not s["total"]:
            continue
        label = f"{name}: " if name else ""
        con.print(
            f"[bold]{label}{s['passed']}/{s['total']} PASSED[/]"
            + (f" ({s['failed']} failed: {', '.join(f'{k} {v}' for k, v in s['by_status'].items() if k != 'PASSED')})" if s["failed"] else "")
            + f"  mean {fmt_ms(s['mean_latency_ms'])} ms  median {fmt_ms(s['median_latency_ms'])} ms"
            + f"  p95 {fmt_ms(s['p95_latency_ms'])} ms  (latency over PASSED rows; p95 by linear interpolation)"
        )
    for note in table.notes:
        con.print(f"[yellow]note[/] {note}")


def _print_extra(con, key: str, items: list[dict]) -> None:
    from rich.table import Table

    if not items:
        return
    cols = list(dict.fromkeys(k for item in items for k in item))
    cols = [c for c in cols if c not in ("note", "env")][:10]
    t = Table(*cols, box=None, pad_edge=False, header_style="bold", title=key)
    for item in items:
        t.add_row(*[f"{item.get(c):.6g}" if isinstance(item.get(c), float) else str(item.get(c, "")) for c in cols])
    con.print(t)
