"""``fibtui results show FILE``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.results.table import AxesLookup, ResultRow, RunTable
    from fibtui.verbs._common import Common, SafeConsole, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("results", help="read result files")
    rsub = p.add_subparsers(
        dest="results_verb", metavar="ACTION", required=True, parser_class=type(p)
    )
    rp = rsub.add_parser("show", help="normalize any result file into one run table")
    common(rp)
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--solution", metavar="NAME")
    rp.add_argument("--json", action="store_true")
    rp.set_defaults(func=results)


def _axes_lookup(args: argparse.Namespace) -> AxesLookup | None:
    """Join axes from the workspace's dataset when the result file has none."""
    from fibtui.services.decide import axes_lookup
    from fibtui.verbs._common import workspace_from

    return axes_lookup(workspace_from(args, required=False))


def results(args: argparse.Namespace) -> int:
    from fibtui.core.errors import InputError
    from fibtui.core.results import load_results, table_to_json
    from fibtui.verbs._common import emit_json

    table = load_results(args.file, axes_lookup=_axes_lookup(args))
    if args.solution is not None and args.solution not in table.solutions:
        raise InputError(
            args.file,
            f"no rows for solution {args.solution!r}; solutions here: {', '.join(table.solutions) or 'none'}",
            field="--solution",
        )
    if args.json:
        emit_json(table_to_json(table, args.solution))
        return 0
    _print_table(table, args.solution)
    return 0


def _print_table(table: RunTable, solution: str | None) -> None:
    from rich.markup import escape

    from fibtui.core.results import summarize
    from fibtui.verbs._common import console, fmt_ms

    con = console()
    rows = table.for_solution(solution)
    names = sorted({r.solution for r in rows if r.solution})
    only = names[0] if len(names) == 1 and all(r.solution for r in rows) else None
    con.print(
        f"[bold]{escape(str(table.path))}[/]  [dim]{table.source_format}[/]  definition: {escape(table.definition or '?')}"
        + (f"  solution: {escape(only)}" if only else "")
    )
    for key in ("runs", "sizes"):
        if key in table.extra:
            _print_extra(con, key, table.extra[key])
    if "tables" in table.extra:
        if con.wide:  # the file's own Markdown, lines whole
            con.print(
                table.extra["markdown"],
                markup=False,
                end="" if table.extra["markdown"].endswith("\n") else "\n",
            )
        else:
            from rich.markdown import Markdown

            con.print(Markdown(table.extra["markdown"]))
    if rows:
        axes_names = sorted({a for r in rows for a in r.axes})
        numbered = list(enumerate(rows))
        if con.wide or len({r.solution for r in rows}) == 1:
            tables: list[tuple[str | None, list[tuple[int, ResultRow]]]] = [(None, numbered)]
        else:  # a terminal: one table per solution, in the order they come (no solution column to fit)
            tables = [
                (name, [(i, r) for i, r in numbered if r.solution == name])
                for name in dict.fromkeys(r.solution for r in rows)
            ]
        for name, group in tables:
            # on a terminal the heading (one solution) or the table's title (several) names the solution
            _rows_table(
                con,
                group,
                axes_names,
                solution_column=con.wide or (len(tables) == 1 and not only),
                title=None
                if len(tables) == 1
                else f"[bold]{escape(name or '-')}[/] ({len(group)} rows)",
            )
    groups = [solution] if solution or len(table.solutions) <= 1 else table.solutions
    for name in groups:
        s = summarize(table.for_solution(name))
        if not s["total"]:
            continue
        label = f"{escape(name)}: " if name else ""
        con.print(
            f"[bold]{label}{s['passed']}/{s['total']} PASSED[/]"
            + (
                f" ({s['failed']} failed: {', '.join(f'{k} {v}' for k, v in s['by_status'].items() if k != 'PASSED')})"
                if s["failed"]
                else ""
            )
            + f"  mean {fmt_ms(s['mean_latency_ms'])} ms  median {fmt_ms(s['median_latency_ms'])} ms"
            + f"  p95 {fmt_ms(s['p95_latency_ms'])} ms  (latency over PASSED rows; p95 by linear interpolation)"
        )
    for note in table.notes:
        con.print(f"[yellow]note[/] {escape(note)}")


#: a table of more rows than this is printed plain (one line a row, columns padded, no colour):
#: laying out 100,000 rows with Rich takes minutes, writing them takes a second
PLAIN_ROWS = 1000


def _cells(r: ResultRow, i: int, axes_names: list[str], solution_column: bool) -> list[str]:
    from fibtui.verbs._common import fmt_ms

    return [
        str(i),
        *([r.solution or "-"] if solution_column else []),
        r.uuid,
        *[str(r.axes.get(a, "")) for a in axes_names],
        r.status,
        fmt_ms(r.latency_ms),
        fmt_ms(r.reference_latency_ms, 3),
        f"{r.speedup:.2f}x" if r.speedup is not None else "-",
        f"{r.max_abs_error:.2e}" if r.max_abs_error is not None else "-",
        f"{r.max_rel_error:.2e}" if r.max_rel_error is not None else (r.error or "-"),
    ]


def _plain_rows(
    con: SafeConsole,
    group: list[tuple[int, ResultRow]],
    axes_names: list[str],
    *,
    solution_column: bool,
    title: str | None,
) -> None:
    """A large table as plain lines: every cell whole (its control characters shown, never
    obeyed), columns padded to their widest cell, written in one pass."""
    from fibtui.core.text import printable

    lead = ["#", "solution", "uuid"] if solution_column else ["#", "uuid"]
    header = [*lead, *axes_names, "status", "latency ms", "ref ms", "speedup", "abs err", "rel err"]
    rows = [
        [printable(c, one_line=True) for c in _cells(r, i, axes_names, solution_column)]
        for i, r in group
    ]
    widths = [len(h) for h in header]
    for row in rows:
        for k, cell in enumerate(row):
            if len(cell) > widths[k]:
                widths[k] = len(cell)
    last = len(header) - 1
    # numbers right-aligned, names and the last column (an error) left-aligned
    right = {
        k for k, h in enumerate(header) if h in ("#", "latency ms", "ref ms", "speedup", "abs err")
    }

    def line(cells: list[str]) -> str:
        out = [
            cells[k].rjust(widths[k])
            if k in right
            else (cells[k] if k == last else cells[k].ljust(widths[k]))
            for k in range(len(cells))
        ]
        return " ".join(out).rstrip() + "\n"

    out = con.file
    if title is not None:
        con.print(title)
    out.write(line(header))
    chunk: list[str] = []
    for row in rows:
        chunk.append(line(row))
        if len(chunk) >= 4096:
            out.write("".join(chunk))
            chunk = []
    out.write("".join(chunk))
    out.flush()


def _rows_table(
    con: SafeConsole,
    group: list[tuple[int, ResultRow]],
    axes_names: list[str],
    *,
    solution_column: bool,
    title: str | None,
) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.verbs._common import fmt_ms, print_table

    if len(group) > PLAIN_ROWS:
        _plain_rows(con, group, axes_names, solution_column=solution_column, title=title)
        return
    lead = ["#", "solution", "uuid"] if solution_column else ["#", "uuid"]
    t = Table(
        *lead,
        *axes_names,
        "status",
        "latency ms",
        "ref ms",
        "speedup",
        "abs err",
        "rel err",
        box=None,
        pad_edge=False,
        header_style="bold",
        title=title,
        title_justify="left",
    )
    for i, r in group:
        colour = "green" if r.passed else "red"
        t.add_row(
            str(i),
            *([escape(r.solution or "-")] if solution_column else []),
            escape(r.uuid),
            *[escape(str(r.axes.get(a, ""))) for a in axes_names],
            f"[{colour}]{r.status}[/]",
            fmt_ms(r.latency_ms),
            fmt_ms(r.reference_latency_ms, 3),
            f"{r.speedup:.2f}x" if r.speedup is not None else "-",
            f"{r.max_abs_error:.2e}" if r.max_abs_error is not None else "-",
            f"{r.max_rel_error:.2e}" if r.max_rel_error is not None else escape(r.error or "-"),
        )
    print_table(
        con, t, ids=lead[1:], drop=["#", "abs err", "ref ms", "speedup", *reversed(axes_names)]
    )


def _print_extra(con: SafeConsole, key: str, items: list[dict[str, Any]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.verbs._common import print_table

    if not items:
        return
    cols = list(dict.fromkeys(k for item in items for k in item))
    cols = [c for c in cols if c not in ("note", "env")]
    t = Table(
        *[escape(str(c)) for c in cols], box=None, pad_edge=False, header_style="bold", title=key
    )
    for item in items:
        t.add_row(
            *[
                f"{item.get(c):.6g}"
                if isinstance(item.get(c), float)
                else escape(str(item.get(c, "")))
                for c in cols
            ]
        )
    # the first column names the row (a run, a size); the last columns go first on a narrow terminal
    print_table(con, t, ids=[0], drop=list(range(len(cols) - 1, 0, -1)))
