"""Short forms of names for narrow screens (80 columns), that keep what tells them apart."""

from __future__ import annotations

import re

#: a band name longer than this is shortened (its axis names, never its values)
BAND_NAME_WIDTH = 24

_PART = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$")


def axis_initials(axis: str) -> str:
    """``max_num_pages`` -> ``mnp``; a one-word axis keeps its first three letters."""
    words = [w for w in axis.split("_") if w]
    if len(words) <= 1:
        return axis[:3]
    return "".join(w[0] for w in words)


def short_band_name(name: str, width: int = BAND_NAME_WIDTH) -> str:
    """A band name that fits a narrow table and keeps every value that tells bands apart:
    ``batch_size=16, max_num_pages=8, num_pages=128`` -> ``bs=16 mnp=8 np=128``. Names of
    ``width`` characters or fewer, and names not made of ``axis=value`` parts, are kept."""
    if len(name) <= width:
        return name
    parts = [p for p in name.split(",")]
    matched = [_PART.match(p) for p in parts]
    if not all(matched):
        return name
    short = [f"{axis_initials(m.group(1))}={m.group(2)}" for m in matched if m]
    return " ".join(short)
