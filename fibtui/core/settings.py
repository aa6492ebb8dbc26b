"""Workspace settings and state in ``<workspace>/fibtui.toml`` (kept with the solution repo).

Users may edit it by hand; fibtui writes it with tomlkit so comments and layout survive. Known
tables (each optional):

    [devices.H200]            # a measured value overrides the built-in spec table
    bandwidth_tbs = 4.3
    [regimes]
    pinned = ["uuid", ...]    # representatives the user pinned
    unpinned = ["uuid", ...]  # automatic picks the user removed
    [stats]
    min_gain = 0.01           # the smallest gain worth having (tau's floor)
    [score]
    baseline = "NAME"         # a solution the projected contest score is also measured against
    [modal]
    gpu = "B200"
    price_per_gpu_hour_usd = 6.25
    [tui]
    keep_worker_warm = false  # do not keep the next gate's worker started between runs
    [workers]
    daemon = false            # runs start their own workers, not the worker service's
    idle_timeout_s = 600      # how long an idle worker service lives
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fibtui.core.errors import InputError
from fibtui.core.fsio import atomic_write_text
from fibtui.core.locations import SETTINGS_NAME as SETTINGS_NAME
from fibtui.core.locations import settings_path as settings_path
from fibtui.core.workspace import read_toml

_LOCK = threading.Lock()


def load_settings(root: str | Path) -> dict[str, Any]:
    """The settings as plain data ({} when the file does not exist)."""
    path = settings_path(root)
    if not path.is_file():
        return {}
    return read_toml(path)


def get_setting(root: str | Path, dotted: str, default: Any = None) -> Any:
    node: Any = load_settings(root)
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def set_setting(root: str | Path, dotted: str, value: Any) -> Path:
    """Set ``a.b.c = value`` keeping every comment and the rest of the file as it was."""
    # only to write: reading uses tomllib (a command that only reads needs no tomlkit)
    import tomlkit

    path = settings_path(root)
    with _LOCK:
        if path.is_file():
            read_toml(path)  # a clear error (file, line) when the file is broken
            doc = tomlkit.parse(path.read_text(encoding="utf-8"))
        else:
            doc = tomlkit.document()
            doc.add(tomlkit.comment("fibtui settings for this workspace (see the README)"))
        parts = dotted.split(".")
        node: Any = doc
        for part in parts[:-1]:
            if part not in node:
                node[part] = tomlkit.table()
            node = node[part]
            if not isinstance(node, dict):
                raise InputError(
                    path, "expected a table", field=".".join(parts[: parts.index(part) + 1])
                )
        node[parts[-1]] = value
        return atomic_write_text(path, tomlkit.dumps(doc))
