"""What opening the TUI needs before and around the app: a terminal to draw on, the cyclic
collector held until the first data, and the bundled demo workspace. Shared by the ``tui`` verb
(fibtui.verbs.tui, which makes and runs the app) and the app itself, which imports nothing of the
verbs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from fibtui.core.errors import UsageError

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace


def check_terminal() -> None:
    """The TUI reads keys from stdin and draws on stderr (Textual's terminal driver): both must
    be a terminal. Without one Textual's input thread reads end-of-file in a loop (100% of a
    core, forever) and the frames go to a file or nowhere."""
    missing = [
        name
        for name, stream in (("standard input", sys.__stdin__), ("standard error", sys.__stderr__))
        if not _is_terminal(stream)
    ]
    if missing:
        raise UsageError(
            f"the TUI needs a terminal, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not one here; "
            "run it in a terminal, or use a verb for scripts (fibtui --help)"
        )
    warning = terminal_warning()
    if warning is not None:
        sys.stderr.write(warning + "\n")
        sys.stderr.flush()


def terminal_warning(term: str | None = None) -> str | None:
    """A line to print before the TUI starts on a terminal that cannot draw it (TERM=dumb or
    unset: no cursor movement, no colours), or None."""
    import os

    term = os.environ.get("TERM", "") if term is None else term
    if term in ("", "dumb"):
        return (
            f"fibtui: warning: TERM={term or '(unset)'}: this terminal may not draw the TUI "
            "(no cursor movement or colours); set TERM=xterm-256color, or use the verbs "
            "(fibtui --help)"
        )
    return None


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


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


def default_demo_dir() -> Path:
    from fibtui.core.locations import demo_workspace_dir

    return demo_workspace_dir()


def open_demo_workspace(dataset: str | None = None, target: str | Path | None = None) -> Workspace:
    """The bundled demo workspace at ``target`` (default: the user's data folder), created the
    first time."""
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace

    target = Path(target) if target is not None else default_demo_dir()
    if not (target / "config.toml").is_file():
        create_demo_workspace(target)
    return open_workspace(target, dataset)


#: The interpreter lock's switch interval while the app runs (Python's default: 5 ms). The app's
#: threads (a verdict, a pane's loading) make many short blocking calls (stat, open, read) beside
#: the event loop's CPU work, and each call gives up the lock and may wait a whole interval to get
#: it back. Measured (2-core CPU): a run's verdict worked out in a thread took 30-40 ms alone,
#: 380-480 ms beside one busy thread at 5 ms, 120-190 ms at 1 ms.
SWITCH_INTERVAL_S = 0.001


def tune_collector() -> None:
    """Keep the cyclic collector's full passes off the key path. Start-up (modules, panes, the
    loaded workspace) is frozen, so a full pass scans only what came after; full passes run a
    tenth as often (young passes are untouched, so short-lived cycles still go at once).
    Measured by scripts/bench_load.py: under a 4,000-job stream the default collector made 33
    full passes of ~110-370 ms each, which were the key-to-repaint tail."""
    import gc

    release_collector()
    gc.freeze()
    young, middle, full = gc.get_threshold()
    gc.set_threshold(young, middle, max(full, 100))
