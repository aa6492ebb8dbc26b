"""Opening the TUI (the default verb)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from platformdirs import user_data_path

from fibtui.core.errors import UsageError
from fibtui.core.workspace import open_workspace


def default_demo_dir():
    return user_data_path("fibtui") / "demo-workspace"


def open_tui(workspace: str | None, dataset: str | None, *, watch: bool = False, or_demo: bool = False) -> int:
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
    return app.return_code or 0


def open_demo_workspace(dataset: str | None = None, target: str | Path | None = None):
    from fibtui.core.demo import create_demo_workspace

    target = Path(target) if target is not None else default_demo_dir()
    if not (target / "config.toml").is_file():
        create_demo_workspace(target)
    return open_workspace(target, dataset)


def tui(args: argparse.Namespace) -> int:
    return open_tui(getattr(args, "workspace", None), getattr(args, "dataset", None),
                    watch=bool(getattr(args, "watch", False)), or_demo=bool(getattr(args, "or_demo", False)))
