"""JSON lines on a private copy of stdout; everything else printed goes to stderr.

A kernel that prints (from Python or from C) can never corrupt the result stream: at start-up the
worker duplicates file descriptor 1 for its own use and points fd 1 at stderr.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
from typing import Any, TextIO

#: how often a watchdog over a job in flight looks at it (Modal's in-container per-job watchdog): a
#: hung job is ended at most this long after its timeout, which the worst-case cost includes
WATCHDOG_INTERVAL_S = 0.2
#: how long the Modal container's parent waits for a killed worker to be reaped (also in the
#: worst-case cost)
KILL_WAIT_S = 5.0

_lock = threading.Lock()
_out: TextIO | None = None


def claim_stdout() -> None:
    global _out
    if _out is not None:
        return
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    _out = os.fdopen(proto_fd, "w", buffering=1, encoding="utf-8")
    sys.stdout = sys.stderr


def _clean(obj: Any) -> Any:
    """JSON has no NaN/inf: write them as strings so a reader never chokes."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def emit(event: dict[str, Any]) -> None:
    line = json.dumps(_clean(event), separators=(",", ":"), default=str)
    with _lock:
        out = _out if _out is not None else sys.stdout
        out.write(line + "\n")
        out.flush()
