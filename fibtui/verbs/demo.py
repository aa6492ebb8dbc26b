"""``fibtui demo DIR``."""

from __future__ import annotations

import argparse

from fibtui.core.demo import create_demo_workspace
from fibtui.verbs.common import console


def demo(args: argparse.Namespace) -> int:
    target = create_demo_workspace(args.dir, with_history=not args.no_history)
    con = console()
    con.print(f"[green]✓[/] demo workspace created in {target}")
    con.print("  config.toml, solution/triton/kernel.py, dataset/ (50 workloads), candidates/, optimize_ops/")
    if args.no_tui:
        con.print(f"  open it with: fibtui --workspace {target}")
        return 0
    from fibtui.verbs.tui import open_tui

    return open_tui(workspace=str(target), dataset=None)
