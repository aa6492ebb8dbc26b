"""What a result format is: a :class:`ResultFormat` (name, sniff, read) and the :class:`Probe` its
sniff looks at. The formats themselves are the other modules of this package, registered in
:mod:`fibtui.core.results.registry`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from fibtui.core.results.table import RunTable


@dataclass
class Probe:
    """What a sniff looks at: the file's path and its first MiB as text (bytes that are not UTF-8
    read as U+FFFD); for a JSON layout, ``data`` is the whole document, parsed."""

    path: Path
    head: str
    data: Any = None

    @cached_property
    def stripped(self) -> str:
        return self.head.lstrip()

    @cached_property
    def first_line(self) -> str:
        return self.stripped.split("\n", 1)[0].strip()

    @cached_property
    def lines(self) -> list[str]:
        return self.head.splitlines()


@dataclass(frozen=True)
class ResultFormat:
    name: str
    sniff: Callable[[Probe], bool]
    read: Callable[[Probe], RunTable]
    #: The ``source_format`` its tables carry (default: ``name``); one reader can give several.
    tables: tuple[str, ...] = ()
    #: Whether its rows carry per-workload latencies (what ``fibtui compare`` pairs).
    per_workload: bool = True

    @property
    def table_formats(self) -> tuple[str, ...]:
        return self.tables or (self.name,)
