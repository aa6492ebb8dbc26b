"""The colour of each verdict (PROMOTE, REJECT, ...) and of each word a sample measured (faster,
slower, ...), one table for the CLI and the TUI. Standard library only: both import it at once."""

from __future__ import annotations

COLOUR = {
    # verdicts of a comparison (fibtui.core.stats)
    "PROMOTE": "green",
    "REJECT": "red",
    "INCONCLUSIVE": "yellow",
    "BLOCKED": "red",
    "INCOMPLETE": "red",
    "INCORRECT": "red",
    "NOT_JUDGED": "yellow",
    "NO_SPEED_VERDICT": "yellow",
    # what a sample measured, per band and overall (fibtui.core.stats.measure)
    "faster": "green",
    "slower": "red",
    "unchanged": "cyan",
    "mixed": "yellow",
    "undecided": "yellow",
}


def colour_of(word: str, default: str = "yellow") -> str:
    return COLOUR.get(word, default)
