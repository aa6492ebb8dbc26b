"""``fibtui pack`` and ``fibtui tag``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("pack", help="pack solution.json from config.toml and the source folder")
    common(p)
    p.add_argument(
        "-o", "--output", metavar="FILE", help="default: solution.json next to config.toml"
    )
    p.add_argument("--definition", metavar="NAME", help="which definition (per-definition layout)")
    p.add_argument(
        "--target-hardware",
        nargs="+",
        metavar="GPU",
        help="default: [build] target_hardware, [submission] target_hardware in fibtui.toml, or B200",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=pack)

    t = sub.add_parser(
        "tag", help="the next submission-vN tag: show it (--next) or create it (--create)"
    )
    common(t)
    mode = t.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--next", action="store_true", help="show the next tag and the checks; change nothing"
    )
    mode.add_argument("--create", action="store_true", help="create the tag on HEAD")
    t.add_argument(
        "--push", action="store_true", help="with --create: push the branch, then the tag"
    )
    t.add_argument(
        "--remote", metavar="NAME", help="default: the branch's upstream remote, else origin"
    )
    t.add_argument("--definition", metavar="NAME", help="which definition (per-definition layout)")
    t.add_argument(
        "--per-definition",
        action="store_true",
        help="name tags submission-<definition>-vN (default: [submission] tag_scheme, else plain)",
    )
    t.add_argument(
        "--no-remote-check", action="store_true", help="number from local tags only (offline)"
    )
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=tag)


def _definition(args: argparse.Namespace, ws: Workspace) -> str | None:
    if args.definition:
        return args.definition
    if len(ws.configs) > 1 and ws.active is not None:
        return ws.active.definition
    return None


def _parity(ws: Workspace, definition: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(the newest parity record as JSON, a warning when the definition is not submission-ready)."""
    from fibtui.runners.parity import parity_status

    name = definition or (ws.active.definition if ws.active else None)
    st = parity_status(ws, name) if name else None
    if st is None:
        return None, "no official-parity run yet: submission-ready needs one (fibtui parity)"
    if not st.complete:
        return (
            st.to_json(),
            f"the newest parity run {st.id} passed {st.passed}/{st.total}: not submission-ready",
        )
    return st.to_json(), None


def pack(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.core.submission import pack_solution, write_solution_json
    from fibtui.verbs._common import console, emit_json, workspace_from

    ws = workspace_from(args)
    result = pack_solution(ws.root, _definition(args, ws), target_hardware=args.target_hardware)
    out = write_solution_json(result, args.output)
    parity, parity_warning = _parity(ws, result.to_json(out)["definition"])
    if args.json:
        emit_json(
            {**result.to_json(out), "parity": parity, "submission_ready": parity_warning is None}
        )
        return 0
    con = console()
    info = result.to_json(out)
    con.print(
        f"[green]✓[/] packed {escape(info['name'])} for {escape(info['definition'])} -> {escape(str(out))}"
    )
    con.print(
        f"  entry point {escape(info['entry_point'])}, target hardware {', '.join(info['target_hardware'])}, "
        f"destination passing style {'on' if info['destination_passing_style'] else 'off'}"
    )
    con.print(f"  {len(info['files'])} file(s) packed:")
    for f in info["files"]:
        con.print(f"    {escape(f['path'])}  [dim]{f['bytes']} bytes[/]")
    if info["excluded"]:
        con.print(f"  [dim]left out: {escape(', '.join(info['excluded']))}[/]")
    con.print(
        "  flashinfer-bench: "
        + (
            f"loads it ({info['flashinfer_bench']})"
            if info["flashinfer_bench"]
            else "not installed (install the bench extra to check with it)"
        )
    )
    if parity_warning:
        con.print(f"[yellow]![/] {escape(parity_warning)}")
    else:
        assert parity is not None  # _parity warns whenever it has no record
        con.print(
            f"[green]✓[/] official parity {escape(parity['id'])}: {parity['passed']}/{parity['total']} PASSED"
        )
    return 0


def tag(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from fibtui.core.errors import UsageError
    from fibtui.core.submission import create_tag, plan_tag, push_branch, push_tag
    from fibtui.verbs._common import console, emit_json, workspace_from

    if args.push and not args.create:
        raise UsageError("--push goes with --create")
    ws = workspace_from(args)
    plan = plan_tag(
        ws.root,
        _definition(args, ws),
        remote=args.remote,
        scheme="per-definition" if args.per_definition else None,
        check_remote=not args.no_remote_check,
    )
    from fibtui.services.archive.best import installed_is_not_best

    # what a tag proposes is the promoted best: other checked-in sources are refused (--next says
    # so; --create makes no tag)
    not_best = installed_is_not_best(ws.archive_root, ws.config_for(plan.definition))
    if not_best:
        plan.problems.append(not_best)
    steps = []
    if args.create:
        steps.append(create_tag(ws.root, plan))
        if args.push:
            if plan.branch is not None:
                steps.append(push_branch(ws.root, plan))
            steps.append(push_tag(ws.root, plan))
    parity, parity_warning = _parity(ws, plan.definition)
    if parity_warning:
        plan.warnings.append(parity_warning)
    if args.json:
        out = plan.to_json()
        out["steps"] = [s.to_json() for s in steps]
        out["parity"] = parity
        out["submission_ready"] = parity_warning is None
        emit_json(out)
        return 0 if plan.ok else 1
    con = console()
    latest = f"latest {plan.latest.name}" if plan.latest else "no submission tag yet"
    con.print(
        f"[bold]{escape(plan.definition)}[/]: {latest}; next [bold]{plan.tag}[/] on "
        f"{(plan.head or '-')[:12]} ({escape(plan.branch or 'detached HEAD')}, remote {escape(plan.remote)})"
    )
    for w in plan.warnings:
        con.print(f"[yellow]![/] {escape(w)}")
    for prob in plan.problems:
        con.print(f"[red]✗[/] {escape(prob)}")
    for s in steps:
        con.print(
            f"[green]✓[/] {s.action} {s.tag} at {s.commit}"
            + (f" on {s.remote}" if s.remote else "")
        )
    if args.next and plan.ok:
        con.print("[green]✓[/] safe to tag: fibtui tag --create [--push]")
    return 0 if plan.ok else 1
