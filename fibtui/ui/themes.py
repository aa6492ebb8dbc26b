"""Themes: Textual Theme objects built from themes/themes.toml, registered when the app is made, with a
fallback when the remembered name is unknown."""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.theme import Theme

from fibtui.resources import bundled

DEFAULT_THEME = "fibtui-dark"
_KEYS = (
    "primary",
    "secondary",
    "accent",
    "warning",
    "error",
    "success",
    "foreground",
    "background",
    "surface",
    "panel",
)


def load_themes(path: Path | None = None) -> list[Theme]:
    path = path or bundled("themes") / "themes.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    out = []
    for name, table in data.items():
        if not isinstance(table, dict) or not isinstance(table.get("primary"), str):
            continue
        out.append(
            Theme(
                name=name,
                dark=bool(table.get("dark", True)),
                **{k: table[k] for k in _KEYS if isinstance(table.get(k), str)},
            )
        )
    return out
