"""Helpers shared by the verb handlers: opening the workspace, printing JSON and tables."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.segment import Segment

from fibtui.core.text import has_control, printable
from fibtui.core.workspace import Workspace, open_workspace


class SafeConsole(Console):
    """A console that never lets a control character from a file reach the terminal: strings are
    made printable before their markup is read (so tables measure what they show), and every
    segment of text is checked again as it is rendered (a ``Text`` built elsewhere). The escape
    sequences Rich writes for its own styles are not text segments and stay as they are."""

    def render_str(self, text: str, **kwargs: Any):  # type: ignore[override]
        return super().render_str(printable(text), **kwargs)

    def render(self, renderable, options=None):  # type: ignore[override]
        for segment in super().render(renderable, options):
            if segment.control is None and has_control(segment.text):
                segment = Segment(printable(segment.text), segment.style)
            yield segment


def console() -> Console:
    return SafeConsole(highlight=False, soft_wrap=False)


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float value (NaN, Infinity) turned into None and tuples into
    lists: what RFC 8259 JSON can hold. Anything else json cannot write (a path, a key that is not
    a string or number) becomes its ``str``. Iterative, so a deeply nested document a reader
    accepted (a hand summary's free-form fields) costs no recursion."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(obj, root, 0)]
    while stack:
        value, parent, slot = stack.pop()
        if isinstance(value, float):
            parent[slot] = value if math.isfinite(value) else None
        elif value is None or isinstance(value, (str, int)):
            parent[slot] = value
        elif isinstance(value, dict):
            new: dict[Any, Any] = {}
            for k, v in value.items():
                key = _key(k)
                new[key] = None  # keeps the order of the keys
                stack.append((v, new, key))
            parent[slot] = new
        elif isinstance(value, (list, tuple)):
            items: list[Any] = [None] * len(value)
            stack.extend((v, items, i) for i, v in enumerate(value))
            parent[slot] = items
        else:
            parent[slot] = str(value)
    return root[0]


def _key(k: Any) -> Any:
    if isinstance(k, float) and not math.isfinite(k):
        return str(k)
    return k if k is None or isinstance(k, (str, int, float)) else str(k)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON (RFC 8259): never a bare NaN or Infinity, which JSON has not."""
    sys.stdout.write(json.dumps(strict_json(obj), indent=1, allow_nan=False) + "\n")


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


class CancelOnSignals:
    """While a long verb goes (``fibtui parity``): SIGINT, SIGTERM and SIGHUP set ``cancel``
    instead of killing this process, so the verb stops what it started (flashinfer-bench runs in a
    process group of its own: a killed fibtui would leave it running on the GPU), archives what it
    has and returns 128 + the signal. A second signal raises KeyboardInterrupt.

    The handler only sets flags and writes one line with ``os.write`` (it may run while the main
    thread is inside a print)."""

    def __init__(self, cancel, what: str) -> None:
        import signal

        self.cancel = cancel
        self.what = what
        self.received: int | None = None
        self._signals = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> CancelOnSignals:
        import signal

        for sig in self._signals:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    @property
    def name(self) -> str | None:
        import signal

        return None if self.received is None else signal.Signals(self.received).name

    def _handle(self, signum: int, _frame: Any) -> None:
        import os
        import signal

        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signum
        self.cancel.set()
        try:
            os.write(2, f"\n{signal.Signals(signum).name}: stopping {self.what}\n".encode())
        except OSError:
            pass
