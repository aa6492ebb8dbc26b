"""Opening the TUI (the default verb)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub, common) -> None:
    p = sub.add_parser("tui", help="open the terminal UI (the default when no verb is given)")
    common(p)
    p.add_argument("--watch", action="store_true")
    p.add_argument("--or-demo", action="store_true", help="open the bundled demo workspace when no workspace is found")
    p.set_defaults(func=tui)


def default_demo_dir() -> Path:
    from platformdirs import user_data_path

    return user_data_path("fibtui") / "demo-workspace"


def open_tui(workspace: str | None, dataset: str | None, *, watch: bool = False, or_demo: bool = False) -> int:
    import gc

    # No cyclic collector passes until the first frame is on screen (FibApp.on_ready enables it
    # again): importing Textual and building the first frame made ~150 collections here, ~80 ms
    # of a start of ~900 ms, for ~5,000 unreachable objects.
    gc.disable()
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
        app.run()
    finally:
        gc.enable()
    return app.return_code or 0


def open_demo_workspace(dataset: str | None = None, target: str | Path | None = None):
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace

    target = Path(target) if target is not None else default_demo_dir()
    if not (target / "config.toml").is_file():
        create_demo_workspace(target)
    return open_workspace(target, dataset)


def tui(args: argparse.Namespace) -> int:
    return open_tui(getattr(args, "workspace", None), getattr(args, "dataset", None),
                    watch=bool(getattr(args, "watch", False)), or_demo=bool(getattr(args, "or_demo", False)))
