"""Small answers kept in the user's cache folder so that a command need not work them out again:
the GPUs nvidia-smi lists (:mod:`fibtui.core.backends`) and what each run's journal says for a
run listing (:func:`fibtui.core.runs.list_runs`).

Each entry is stored with the key of everything its answer depends on (a file's identity, size
and times; the driver's and the GPUs' own description). A reader recomputes the answer whenever
the key it finds differs from the one it computes, so a stale entry is never used; a cache file
that is missing, unreadable or not what this module wrote counts as empty. Writing is best
effort: a cache that cannot be written (a read-only home, a full disk) only means the work is
done again next time.

The folder is ``$FIBTUI_CACHE_DIR/<name>`` when that variable is set (beside the reference and
build caches), else ``<user cache folder>/fibtui/<name>``; it is made owner-only (0700).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from fibtui.core import locations

#: a file whose status changed this recently may still be changing within its clock's
#: granularity: its answer is not stored (it is worked out again next time)
SETTLE_S = 2.0
#: the most files one cache folder keeps (the ones used longest ago are removed beyond it)
MAX_FILES = 256


def cache_folder(name: str) -> Path:
    """Where the cache ``name`` lives (not created here): :func:`fibtui.core.locations.cache_folder`."""
    return locations.cache_folder(name)


def file_key(path: Path) -> list[int] | None:
    """The identity of a file's current contents as far as its status tells: inode, size,
    modification and change times (ns). None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def settled(key: list[int] | None) -> bool:
    """Did the file of ``key`` stop changing long enough ago that a later change must give it
    another key? (A change within the same clock tick could keep the times.)"""
    if key is None:
        return False
    newest = max(key[2], key[3])
    return time.time_ns() - newest > SETTLE_S * 1e9


def read(path: Path, version: int) -> dict[str, Any] | None:
    """The cache file's entries, or None when it is missing, unreadable, not JSON, or of another
    version."""
    try:
        with open(path, "rb") as fh:
            obj = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("version") != version:
        return None
    entries = obj.get("entries")
    return entries if isinstance(entries, dict) else None


def write(path: Path, version: int, entries: dict[str, Any]) -> None:
    """Replace the cache file (fibtui.core.fsio's atomic write); failures are ignored."""
    from fibtui.core.fsio import atomic_write_text

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = json.dumps({"version": version, "entries": entries}, separators=(",", ":"))
        atomic_write_text(path, data)
    except (OSError, ValueError, TypeError):
        return
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Keep at most MAX_FILES cache files in ``folder`` (the least recently written go)."""
    try:
        files = [p for p in folder.iterdir() if p.suffix == ".json"]
        if len(files) <= MAX_FILES:
            return
        files.sort(key=lambda p: p.stat().st_mtime_ns)
        for p in files[: len(files) - MAX_FILES]:
            p.unlink()
    except OSError:
        pass
