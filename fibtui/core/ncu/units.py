"""Cells of an Nsight Compute page: numbers (``36,029``), units normalized to one canonical unit
each (times to ``us``, sizes to ``byte``, rates to per second, frequencies to ``GHz``, percentages
to ``%``), grid and block dimensions ``(x, y, z)`` and plain integers. Nothing here raises on an
odd cell: an unknown unit is kept as written, a value that is not a number is kept as text."""

from __future__ import annotations

import math
import re

# Exact spellings (case matters for the short forms: "ms" is not "Ms").
_TIME_US: dict[str, float] = {
    "ns": 1e-3,
    "us": 1.0,
    "µs": 1.0,
    "μs": 1.0,
    "ms": 1e3,
    "s": 1e6,
}
# Word forms, matched case-insensitively.
_TIME_US_WORDS: dict[str, float] = {
    "nsecond": 1e-3,
    "nsec": 1e-3,
    "nanosecond": 1e-3,
    "nanoseconds": 1e-3,
    "usecond": 1.0,
    "usec": 1.0,
    "microsecond": 1.0,
    "microseconds": 1.0,
    "msecond": 1e3,
    "msec": 1e3,
    "millisecond": 1e3,
    "milliseconds": 1e3,
    "second": 1e6,
    "sec": 1e6,
    "seconds": 1e6,
}
_BYTES: dict[str, float] = {
    "B": 1.0,
    "KB": 1e3,
    "kB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 1024.0,
    "MiB": 1024.0**2,
    "GiB": 1024.0**3,
    "TiB": 1024.0**4,
}
_BYTES_WORDS: dict[str, float] = {
    "byte": 1.0,
    "bytes": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "pbyte": 1e15,
    "kibyte": 1024.0,
    "mibyte": 1024.0**2,
    "gibyte": 1024.0**3,
    "tibyte": 1024.0**4,
}
_FREQ_GHZ: dict[str, float] = {  # lower-cased keys
    "hz": 1e-9,
    "khz": 1e-6,
    "mhz": 1e-3,
    "ghz": 1.0,
    "cycle/nsecond": 1.0,
    "cycle/ns": 1.0,
    "cycle/usecond": 1e-3,
    "cycle/us": 1e-3,
    "cycle/msecond": 1e-6,
    "cycle/ms": 1e-6,
    "cycle/second": 1e-9,
    "cycle/s": 1e-9,
}
_PERCENT = {"%", "pct", "percent"}
_MISSING = {"", "n/a", "na", "no data", "none", "-", "--"}

_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,4})?", re.ASCII)
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d{1,4})?", re.ASCII)


def parse_number(text: str) -> float | None:
    """``"36,029"`` -> 36029.0, ``"1.5e3"`` -> 1500.0; anything else (or non-finite) -> None."""
    t = text.strip().replace("\u00a0", "").replace("\u202f", "")
    if _GROUPED_NUMBER.fullmatch(t):
        t = t.replace(",", "")
    elif not _PLAIN_NUMBER.fullmatch(t):
        return None
    try:
        value = float(t)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _time_factor_us(unit: str) -> float | None:
    if unit in _TIME_US:
        return _TIME_US[unit]
    return _TIME_US_WORDS.get(unit.lower())


def _byte_factor(unit: str) -> float | None:
    if unit in _BYTES:
        return _BYTES[unit]
    return _BYTES_WORDS.get(unit.lower())


def normalize_unit(unit: str) -> tuple[str, float]:
    """(canonical unit, factor to multiply a value by); an unknown unit is (itself, 1.0)."""
    u = unit.strip()
    if not u:
        return "", 1.0
    if u.lower() in _PERCENT:
        return "%", 1.0
    if (f := _time_factor_us(u)) is not None:
        return "us", f
    if (f := _byte_factor(u)) is not None:
        return "byte", f
    if (f := _FREQ_GHZ.get(u.lower())) is not None:
        return "GHz", f
    if u.count("/") == 1:
        num, den = (part.strip() for part in u.split("/"))
        if num and den:
            num_f = _byte_factor(num)
            num_c = "byte" if num_f is not None else num
            den_us = _time_factor_us(den)
            if den_us is not None:
                return f"{num_c}/s", (num_f or 1.0) / (den_us * 1e-6)
            if num_f is not None:
                return f"byte/{den}", num_f
    return u, 1.0


def normalize(value: str | None, unit: str | None) -> tuple[float | str | None, str]:
    """A cell and its unit -> (number in the canonical unit, or the text as given, or None; unit).

    Never raises: an unknown unit is kept as written, a non-number is kept as text, an empty or
    ``n/a`` cell is None.
    """
    unit_text = "" if unit is None else str(unit).strip()
    return normalize_with(
        "" if value is None else str(value), unit_text, *normalize_unit(unit_text)
    )


def normalize_with(
    value: str, unit_text: str, canon: str, factor: float
) -> tuple[float | str | None, str]:
    raw = value.strip()
    if raw.lower() in _MISSING:
        return None, canon
    number = parse_number(raw)
    if number is None and raw.endswith("%") and unit_text in ("", "%"):
        number, canon, factor = parse_number(raw[:-1]), "%", 1.0
    if number is None:
        return raw, canon
    scaled = number * factor
    if not math.isfinite(scaled):
        return raw, unit_text
    return scaled, canon


_DIMS = re.compile(r"\(\s*(\d{1,12})\s*,\s*(\d{1,12})\s*,\s*(\d{1,12})\s*\)", re.ASCII)
_ASCII_INT = re.compile(r"\d{1,18}", re.ASCII)


def dims(text: str) -> tuple[int, int, int] | None:
    m = _DIMS.fullmatch(text.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def cell_int(text: str | None) -> int | None:
    if text is None:
        return None
    t = text.strip().replace(",", "")
    return int(t) if _ASCII_INT.fullmatch(t) else None
