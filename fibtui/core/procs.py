"""Whether a process is alive: one answer for the run lock (fibtui.core.runs), the stale scratch
sweep (fibtui.runners.local), the worker's orphan watch and the worker service's client.

Standard library only: the worker imports it too.
"""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Is process ``pid`` alive? Someone else's process is; a zombie (ended, not yet reaped) is
    not, nor is a pid of 0 or less (``kill(0, ...)`` would name a process group)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (or it went just now): kill's answer stands
