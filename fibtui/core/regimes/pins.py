"""Pins: the workspace's fibtui.toml, ``[regimes] pinned / unpinned``."""

from __future__ import annotations

from pathlib import Path

from fibtui.core.errors import InputError


def _uuid_list(root: str | Path, key: str) -> list[str]:
    from fibtui.core.settings import get_setting, settings_path

    value = get_setting(root, f"regimes.{key}", [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(
            settings_path(root),
            "expected a list of workload uuids (strings)",
            field=f"regimes.{key}",
        )
    return list(dict.fromkeys(value))


def load_pins(root: str | Path) -> tuple[list[str], list[str]]:
    """(pinned, unpinned) from the workspace's fibtui.toml."""
    return _uuid_list(root, "pinned"), _uuid_list(root, "unpinned")


def _check_uuid(uuid: str) -> str:
    if not isinstance(uuid, str) or not uuid.strip() or any(c.isspace() for c in uuid.strip()):
        raise InputError(None, f"not a workload uuid: {uuid!r}", field="--pin/--unpin")
    return uuid.strip()


def pin(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Pin a workload as a representative (and forget an earlier unpin of it)."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    if uuid not in pinned:
        pinned.append(uuid)
    unpinned = [u for u in unpinned if u != uuid]
    set_setting(root, "regimes.pinned", pinned)
    set_setting(root, "regimes.unpinned", unpinned)
    return pinned, unpinned


def unpin(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Unpin a workload: drop its pin, and keep automatic picks from choosing it."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    pinned = [u for u in pinned if u != uuid]
    if uuid not in unpinned:
        unpinned.append(uuid)
    set_setting(root, "regimes.pinned", pinned)
    set_setting(root, "regimes.unpinned", unpinned)
    return pinned, unpinned


def automatic(root: str | Path, uuid: str) -> tuple[list[str], list[str]]:
    """Give a workload back to the automatic choice: neither pinned nor kept out."""
    from fibtui.core.settings import set_setting

    uuid = _check_uuid(uuid)
    pinned, unpinned = load_pins(root)
    set_setting(root, "regimes.pinned", [u for u in pinned if u != uuid])
    set_setting(root, "regimes.unpinned", [u for u in unpinned if u != uuid])
    return load_pins(root)
