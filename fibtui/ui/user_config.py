"""The user's own fibtui settings (not the workspace's): theme and key remapping, in the user
config folder (``~/.config/fibtui`` on Linux).

    settings.toml   theme = "fibtui-light"
    keymap.toml     "pane.runs" = "f3"        # binding id -> key(s), comma-separated
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from fibtui.core.fsio import atomic_write_text


def config_dir() -> Path:
    from fibtui.core.locations import config_dir as user_config_dir

    return user_config_dir()


def _read(name: str) -> dict[str, Any]:
    try:
        return tomllib.loads((config_dir() / name).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def load_settings() -> dict[str, Any]:
    return _read("settings.toml")


def save_setting(key: str, value: Any) -> None:
    import tomlkit  # only to write (it keeps the file's comments): reading at start uses tomllib

    path = config_dir() / "settings.toml"
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    except (OSError, Exception):  # a missing or broken file is rewritten with this key
        doc = tomlkit.document()
    doc[key] = value
    atomic_write_text(path, tomlkit.dumps(doc))


def load_keymap() -> dict[str, str]:
    """binding id -> keys; entries that are not strings are ignored."""
    return {
        k: v for k, v in _read("keymap.toml").items() if isinstance(k, str) and isinstance(v, str)
    }
