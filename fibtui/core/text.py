"""Text read from files, made safe to show in a terminal.

A solution name, a kernel's error message, a line of a reference repo or an NCU kernel name can
hold control characters: an ESC that starts a colour or retitles the window, a carriage return or
backspace that overwrites what was printed before it, a bidirectional override that shows text in
another order than it has. Nothing fibtui prints lets one through: :func:`printable` turns each
into a visible stand-in of one cell (``␛`` for ESC, ``␍`` for a carriage return, ``�`` for the C1
controls and bidi overrides), so a table keeps its columns and the user sees that something odd
was there. JSON output keeps the text as it was (JSON escapes it: ``\\u001b``).

The CLI's console (:func:`fibtui.verbs._common.console`) and the TUI (a line filter of the app) both
go through this one function.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, the C1 controls, and the bidirectional marks, embeddings,
#: overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_OR_NEWLINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def stand_in(ch: str) -> str:
    """The visible one-cell stand-in of the control character ``ch``."""
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ ... ␟ (␛ for ESC, ␍ for CR)
    if code == 0x7F:
        return "\u2421"  # ␡
    return "\ufffd"  # C1 controls and bidi controls have no picture of their own


def _sub(match: re.Match[str]) -> str:
    return stand_in(match.group())


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character a terminal would act on replaced by a visible
    stand-in of one cell. Tabs and newlines are kept, unless ``one_line`` (then a newline shows as
    ``␊`` and a tab as ``␉``, so the text stays on its line)."""
    pattern = _UNSAFE_OR_NEWLINE if one_line else _UNSAFE
    return pattern.sub(_sub, text) if pattern.search(text) else text


def has_control(text: str) -> bool:
    """Does ``text`` hold a character :func:`printable` would replace (tabs and newlines aside)?"""
    return _UNSAFE.search(text) is not None
