"""Helpers shared by the verb handlers: opening the workspace, printing JSON and tables."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from fibtui.core.workspace import Workspace, open_workspace


def console() -> Console:
    return Console(highlight=False, soft_wrap=False)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, default=str) + "\n")


def workspace_from(args: argparse.Namespace, *, required: bool = True) -> Workspace | None:
    from fibtui.core.errors import UsageError

    try:
        return open_workspace(getattr(args, "workspace", None), getattr(args, "dataset", None))
    except UsageError:
        if required:
            raise
        return None


def fmt_ms(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def fmt_us(value_ms: float | None) -> str:
    if value_ms is None:
        return "-"
    return f"{value_ms * 1000:.2f}"
