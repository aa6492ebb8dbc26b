"""``fibtui demo DIR``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("demo", help="copy the bundled demo operator into a new workspace DIR")
    common(p)  # accepted as after every verb (the demo opens the workspace it creates)
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--no-tui", action="store_true", help="only create it; do not open the TUI")
    p.add_argument("--no-history", action="store_true", help="leave out the archived demo rounds")
    p.add_argument(
        "--operator",
        default="gdn_decode",
        choices=["gdn_decode", "dsa_topk"],
        help="which demo: gdn_decode (Triton, archived H200 rounds; the default) or dsa_topk "
        "(a top-k indexer judged by the order-free evaluator, page tables in safetensors)",
    )
    p.set_defaults(func=demo)


def demo(args: argparse.Namespace) -> int:
    from fibtui.core.demo import create_demo_workspace
    from fibtui.verbs._common import console

    target = create_demo_workspace(
        args.dir, with_history=not args.no_history, operator=args.operator
    )
    from rich.markup import escape

    con = console()
    con.print(f"[green]✓[/] demo workspace created in {escape(str(target))}")
    if args.operator == "dsa_topk":
        con.print(
            "  config.toml, solution/python/kernel.py, dataset/ (12 workloads, page tables in safetensors), "
            "candidates/ (v2_token_order: the same set in another order; bad_repeats)"
        )
    else:
        con.print(
            "  config.toml, solution/triton/kernel.py, dataset/ (50 workloads), candidates/, optimize_ops/"
        )
    if args.no_tui:
        con.print(f"  open it with: fibtui --workspace {escape(str(target))}")
        return 0
    from fibtui.verbs.tui import open_tui

    return open_tui(workspace=str(target), dataset=None)
