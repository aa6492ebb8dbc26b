"""SIGHUP (an SSH drop) and SIGTERM: the run in flight is interrupted first, then the app ends."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any


class Hangups:
    """The signal handlers one app installs on its event loop, with the handlers the signals had
    before (put back when the app ends)."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        self.caught: dict[int, Any] = {}

    def catch(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig in (signal.SIGHUP, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (
                NotImplementedError,
                RuntimeError,
                ValueError,
            ):  # not the main thread, or no signals
                break
            self.caught[sig] = previous

    def release(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig, previous in self.caught.items():
            try:
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)
            except (NotImplementedError, RuntimeError, ValueError, TypeError):
                pass
        self.caught = {}
