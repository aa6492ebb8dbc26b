"""``fibtui recon refresh | search | note``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.recon import ReconNote
    from fibtui.core.workspace import Workspace
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser(
        "recon", help="reference repos: refresh them, search them, keep the recon note"
    )
    rsub = p.add_subparsers(
        dest="recon_verb", metavar="ACTION", required=True, parser_class=type(p)
    )

    rp = rsub.add_parser(
        "refresh",
        help="fetch every reference repo; fast-forward the clean ones only "
        "(exit 1 when a repo could not be fetched or advanced)",
    )
    common(rp)
    rp.add_argument("--json", action="store_true")
    rp.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="per git command (default 60)"
    )
    rp.add_argument(
        "--jobs", type=int, default=4, metavar="N", help="repos refreshed at once (default 4)"
    )
    rp.set_defaults(func=refresh)

    sp = rsub.add_parser(
        "search", help="grep the reference repos for the definition's terms (or TERMS)"
    )
    common(sp)
    sp.add_argument(
        "terms", nargs="*", metavar="TERMS", help="search these instead of the definition's terms"
    )
    sp.add_argument(
        "--definition", metavar="NAME", help="default: the workspace's active definition"
    )
    sp.add_argument(
        "--limit", type=int, default=200, metavar="N", help="hits shown (default 200; 0: all)"
    )
    sp.add_argument(
        "--per-file", type=int, default=5, metavar="N", help="hits per file (default 5; 0: all)"
    )
    sp.add_argument("--timeout", type=float, default=60.0, metavar="S")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=search)

    np = rsub.add_parser(
        "note", help="print the latest recon note; --add appends a row to today's note"
    )
    common(np)
    np.add_argument(
        "--definition", metavar="NAME", help="default: the workspace's active definition"
    )
    np.add_argument(
        "--add", nargs=2, metavar=("REPO", "PATH"), help="append a row (PATH may end in :LINE)"
    )
    np.add_argument("--relevance", choices=("direct", "partial", "concept"), default=None)
    np.add_argument("--piece", default="", metavar="TEXT", help="the reusable piece")
    np.add_argument(
        "--next", dest="next_action", default="", metavar="TEXT", help="the next action"
    )
    np.add_argument("--commit", default=None, metavar="SHA", help="default: the repo's HEAD")
    np.add_argument("--json", action="store_true")
    np.set_defaults(func=note)


def _definition(args: argparse.Namespace, ws: Workspace) -> str:
    from fibtui.core.errors import UsageError

    if getattr(args, "definition", None):
        return args.definition
    if ws.active is None:
        raise UsageError(
            f"no valid solution config in {ws.root}; name a definition with --definition"
        )
    return ws.active.definition


def _op_type(ws: Workspace, definition: str) -> str | None:
    from fibtui.core.errors import FibError

    if ws.dataset_root is None:
        return None
    try:
        ds = ws.dataset()
        if definition not in ds.definition_paths:
            return None
        return ds.definition(definition).op_type
    except FibError:
        return None


def refresh(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core import recon
    from fibtui.verbs._common import console, emit_json, print_table, workspace_from

    ws = workspace_from(args)
    repos = recon.discover_repos(ws.root)
    results = recon.refresh_all(repos, timeout_s=args.timeout, jobs=args.jobs)
    if results:
        recon.save_refresh(ws.root, results)
    failed = 1 if any(r.state == "error" for r in results) else 0
    if args.json:
        emit_json({"workspace": str(ws.root), "repos": [r.to_json() for r in results]})
        return failed
    con = console()
    if not results:
        con.print(escape(f"no reference repos in {ws.root} (clone them into reference/)"))
        return 0
    table = Table(
        "repo",
        "branch",
        "state",
        "head",
        "upstream",
        "ahead/behind",
        "note",
        box=None,
        pad_edge=False,
    )
    for r in results:
        colour = {
            "fast-forwarded": "green",
            "up to date": "green",
            "diverged": "yellow",
            "not advanced (dirty)": "yellow",
            "error": "red",
        }.get(r.state, "")
        state = f"[{colour}]{r.state}[/]" if colour else r.state
        if r.dirty and r.state != "not advanced (dirty)":
            state += " [yellow](dirty)[/]"
        ab = "-" if r.ahead is None else f"+{r.ahead}/-{r.behind}"
        table.add_row(
            escape(r.name),
            escape(r.branch or "(detached)"),
            state,
            (r.head or "-")[:12],
            (r.upstream_head or "-")[:12],
            ab,
            escape(r.error or (f"untracked files: {r.untracked}" if r.untracked else "")),
        )
    print_table(con, table, ids=["repo", "branch", "head"], drop=["upstream", "ahead/behind"])
    return failed


def search(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.core import recon
    from fibtui.verbs._common import console, emit_json, workspace_from

    ws = workspace_from(args)
    definition = _definition(args, ws)
    if args.terms:
        terms = [
            recon.SearchTerm(t, "user") for t in dict.fromkeys(args.terms) if len(t.strip()) >= 1
        ]
    else:
        terms = recon.search_terms(
            definition, _op_type(ws, definition), recon.keyword_table(ws.root)
        )
    repos = recon.discover_repos(ws.root)
    result = recon.search_repos(
        repos,
        terms,
        limit=args.limit or None,
        per_file=args.per_file or None,
        timeout_s=args.timeout,
    )
    if args.json:
        out: dict[str, Any] = {"workspace": str(ws.root), "definition": definition}
        out.update(result.to_json())
        emit_json(out)
        return 0
    con = console()
    con.print(f"[bold]terms[/] {escape(', '.join(t.text for t in result.terms))}")
    for r in result.repos:
        status = f"[red]{escape(r['error'])}[/]" if r["error"] else f"{r['matches']} matching lines"
        con.print(f"[bold]{escape(r['name'])}[/] {(r['commit'] or '-')[:12]}  {status}")
    if not repos:
        con.print(escape(f"no reference repos in {ws.root} (clone them into reference/)"))
    for h in result.hits:
        con.print(f"[bold]{escape(h.repo)}[/] {escape(h.path)}:{h.line}  [cyan]{escape(h.term)}[/]")
        con.print(f"    [dim]{escape(h.text[:200])}[/]", no_wrap=True, overflow="ellipsis")
    if result.truncated:
        con.print(f"[dim]{len(result.hits)} of {result.total_matches} hits shown (--limit)[/]")
    return 0


def note(args: argparse.Namespace) -> int:
    from rich.markup import escape
    from rich.table import Table

    from fibtui.core import recon
    from fibtui.core.errors import UsageError
    from fibtui.verbs._common import console, emit_json, print_table, workspace_from

    ws = workspace_from(args)
    definition = _definition(args, ws)
    if args.add:
        repo_name, path = args.add
        commit = (
            args.commit
            if args.commit is not None
            else (recon.repo_commit(ws.root, repo_name) or "")
        )
        row = recon.NoteRow(
            repo=repo_name,
            commit=commit[:12] if args.commit is None else commit,
            path=path,
            relevance=args.relevance or "concept",
            piece=args.piece,
            next_action=args.next_action,
        )
        current: ReconNote | None = recon.add_note_row(ws.root, definition, row)
    else:
        if args.relevance or args.piece or args.next_action or args.commit:
            raise UsageError("--relevance, --piece, --next and --commit go with --add REPO PATH")
        current = recon.latest_note(ws.root, definition)
    if args.json:
        emit_json(
            {
                "workspace": str(ws.root),
                "definition": definition,
                "note": current.to_json() if current else None,
            }
        )
        return 0
    con = console()
    if current is None:
        con.print(
            f"no recon note for {definition} yet (add a row: fibtui recon note --add REPO PATH "
            "--relevance direct --piece TEXT --next TEXT)"
        )
        return 0
    con.print(f"[bold]{escape(str(current.path))}[/]  ({current.date}, {len(current.rows)} rows)")
    table = Table(
        "repo",
        "commit",
        "path",
        "relevance",
        "reusable piece",
        "next action",
        box=None,
        pad_edge=False,
    )
    for r in current.rows:
        table.add_row(
            *(
                escape(c)
                for c in (r.repo, r.commit[:12] or "-", r.path, r.relevance, r.piece, r.next_action)
            )
        )
    print_table(con, table, ids=["repo", "path"], drop=["commit", "relevance"])
    return 0
