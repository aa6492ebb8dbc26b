"""Opening the TUI (the default verb)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub, common) -> None:
    p = sub.add_parser("tui", help="open the terminal UI (the default when no verb is given)")
    common(p)
    p.add_argument("--watch", action="store_true")
    p.add_argument(
        "--or-demo",
        action="store_true",
        help="open the bundled demo workspace when no workspace is found",
    )
    p.set_defaults(func=tui)


def default_demo_dir() -> Path:
    from platformdirs import user_data_path

    return user_data_path("fibtui") / "demo-workspace"


_held_thresholds: tuple[int, ...] | None = None


def hold_collector() -> None:
    """No automatic cyclic-collector passes until release_collector. A zero threshold, not
    gc.disable(): Textual enables the collector again at the end of each animation."""
    import gc

    global _held_thresholds
    if _held_thresholds is None:
        _held_thresholds = gc.get_threshold()
        gc.set_threshold(0)


def release_collector() -> None:
    import gc

    global _held_thresholds
    if _held_thresholds is not None:
        gc.set_threshold(*_held_thresholds)
        _held_thresholds = None


def open_tui(
    workspace: str | None, dataset: str | None, *, watch: bool = False, or_demo: bool = False
) -> int:
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
        app.run()
    finally:
        release_collector()
    return app.return_code or 0


def open_demo_workspace(dataset: str | None = None, target: str | Path | None = None):
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace

    target = Path(target) if target is not None else default_demo_dir()
    if not (target / "config.toml").is_file():
        create_demo_workspace(target)
    return open_workspace(target, dataset)


def tui(args: argparse.Namespace) -> int:
    return open_tui(
        getattr(args, "workspace", None),
        getattr(args, "dataset", None),
        watch=bool(getattr(args, "watch", False)),
        or_demo=bool(getattr(args, "or_demo", False)),
    )
