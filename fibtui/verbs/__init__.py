"""CLI verb handlers. Each takes the parsed arguments, prints, and returns an exit code.

Handlers import their modules lazily so ``fibtui --version`` and the TUI start stay fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _lazy(module: str, func: str) -> Callable[[argparse.Namespace], int]:
    def call(args: argparse.Namespace) -> int:
        import importlib

        return getattr(importlib.import_module(f"fibtui.verbs.{module}"), func)(args)

    return call


HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "status": _lazy("info", "status"),
    "check": _lazy("info", "check"),
    "results": _lazy("results", "results"),
    "demo": _lazy("demo", "demo"),
    "tui": _lazy("tui", "tui"),
}
