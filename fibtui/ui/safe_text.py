"""The TUI's last line of defence against control characters from files.

Every line the app draws passes :class:`ControlCharacters`, a Textual line filter: a text segment
holding an ESC, a carriage return, a backspace, a bidi override (anything
:func:`fibtui.core.text.printable` replaces) is drawn with visible stand-ins instead, and the line
is cut back to the width it was laid out with, so nothing a file holds can recolour, retitle or
overwrite the screen. The escape sequences Textual writes for its own styles are not text segments
and are left alone.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from fibtui.core.text import has_control, printable


class ControlCharacters(LineFilter):
    """Show the control characters of text segments; never let the terminal act on them."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(s.control is None and has_control(s.text) for s in segments):
            return segments
        width = Segment.get_line_length(segments)
        shown = [
            Segment(printable(s.text, one_line=True), s.style, s.control)
            if s.control is None
            else s
            for s in segments
        ]
        # a control character took no cell when the line was laid out; its stand-in takes one
        return (
            Segment.adjust_line_length(shown, width)
            if Segment.get_line_length(shown) > width
            else shown
        )
