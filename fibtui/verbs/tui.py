"""Opening the TUI (the default verb)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fibtui.verbs._common import Common, Subparsers


def register(sub: Subparsers, common: Common) -> None:
    p = sub.add_parser("tui", help="open the terminal UI (the default when no verb is given)")
    common(p)
    p.add_argument("--watch", action="store_true")
    p.add_argument(
        "--or-demo",
        action="store_true",
        help="open the bundled demo workspace when no workspace is found",
    )
    p.set_defaults(func=tui)


def open_tui(
    workspace: str | None, dataset: str | None, *, watch: bool = False, or_demo: bool = False
) -> int:
    from fibtui.ui.startup import check_terminal, hold_collector, open_demo_workspace

    check_terminal()
    # No collector passes until the pane in view shows its data (FibApp releases it): importing
    # Textual, the first frame and the first data made ~200 collections here (one full pass),
    # ~150 ms of a start of ~1.5 s, for ~5,000 unreachable objects.
    hold_collector()
    try:
        from fibtui.core.errors import UsageError
        from fibtui.core.workspace import open_workspace
        from fibtui.ui.app import make_app

        ws = None
        try:
            ws = open_workspace(workspace, dataset)
        except UsageError:
            if workspace is not None:
                raise
            if or_demo:
                ws = open_demo_workspace(dataset)
        app = make_app(ws, watch=watch, cwd=os.getcwd())
        try:
            app.run()
        except KeyboardInterrupt:
            # a ctrl+c once the terminal is back (Textual reads ctrl+c as a key while it runs):
            # the run in flight was interrupted when the app ended (its journal says so and it
            # resumes); what is left are threads stopping workers, which must not make this
            # process wait or print a traceback on a second ctrl+c
            sys.stderr.write("fibtui: interrupted (a run in flight stays resumable)\n")
            sys.stderr.flush()
            os._exit(130)
    finally:
        from fibtui.ui.startup import release_collector

        release_collector()
    return app.return_code or 0


def tui(args: argparse.Namespace) -> int:
    return open_tui(
        getattr(args, "workspace", None),
        getattr(args, "dataset", None),
        watch=bool(getattr(args, "watch", False)),
        or_demo=bool(getattr(args, "or_demo", False)),
    )
