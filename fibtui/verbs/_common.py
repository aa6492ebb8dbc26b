"""Helpers shared by the verb handlers: opening the workspace, printing JSON and tables.

Width. On a terminal the CLI lays out at the terminal's width (``COLUMNS`` wins when set): every
table fits it, and an id (run id, uuid, solution name, round) is never cut: :func:`print_table`
hides a table's low-value columns first and says so in one dim line, and when even that is too
wide it prints each row as a block (its ids on a line of their own). With ``--wide``, or when
stdout is not a terminal (a pipe, a file), nothing is laid out to a width: every column and every
cell is printed whole and a line is never wrapped. ``FIBTUI_FORCE_TERMINAL=1`` makes the CLI treat
its stdout as a terminal (``=0``: as not one), for tests and for ``... | less -R``."""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeAlias, overload

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from fibtui.core.text import has_control, printable
from fibtui.core.workspace import Workspace, open_workspace

if TYPE_CHECKING:
    import threading

    from rich.table import Column, Table
    from rich.text import Text

#: what a verb module's ``register(sub, common)`` is given: the verbs' subparsers (argparse's
#: action is generic only in its stubs), and the options every verb takes
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Common: TypeAlias = Callable[[argparse.ArgumentParser], None]


class SafeConsole(Console):
    """A console that never lets a control character from a file reach the terminal: strings are
    made printable before their markup is read (so tables measure what they show), and every
    segment of text is checked again as it is rendered (a ``Text`` built elsewhere). The escape
    sequences Rich writes for its own styles are not text segments and stay as they are."""

    #: True when this console lays out at no width (``--wide``, or stdout is not a terminal)
    wide = False

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and has_control(segment.text):
                segment = Segment(printable(segment.text), segment.style)
            yield segment


#: the width of a wide console: more than any line the CLI prints, so nothing wraps or is cut
UNLIMITED_WIDTH = 1_000_000

_wide_flag = False


def set_wide(flag: bool) -> None:
    """``--wide`` for this invocation (fibtui.cli.main sets it before the verb runs)."""
    global _wide_flag
    _wide_flag = bool(flag)


def _forced_terminal() -> bool | None:
    value = os.environ.get("FIBTUI_FORCE_TERMINAL", "").strip()
    return True if value == "1" else False if value == "0" else None


def console(*, file: TextIO | None = None, wide: bool | None = None) -> SafeConsole:
    """The CLI's console, writing to ``file`` (default stdout). It is wide (no width: nothing
    wraps, nothing is cut) with ``--wide`` or when ``file`` is not a terminal; else it has the
    terminal's width and :func:`print_table` fits tables to it."""
    con = SafeConsole(
        highlight=False, soft_wrap=False, file=file, force_terminal=_forced_terminal()
    )
    if (_wide_flag if wide is None else wide) or not con.is_terminal:
        con.width = UNLIMITED_WIDTH
        con.wide = True
    return con


# --------------------------------------------------------------------------------------------
# Tables that fit the terminal without cutting an id
# --------------------------------------------------------------------------------------------

ColumnRef = str | int  # a column's header, or its index (negative from the end)


def print_table(
    con: Console, table: Table, *, ids: Iterable[ColumnRef] = (), drop: Iterable[ColumnRef] = ()
) -> list[str]:
    """Print a rich ``Table`` (``box=None`` as every CLI table) on ``con``; returns the headers of
    the columns it hid.

    ``ids`` name the columns whose cells are copied (run ids, uuids, solution names, paths): they
    never wrap and are never cut. On a wide console (see :func:`console`) the table is printed as
    it is. On a terminal, when the table does not fit the width, the other columns wrap at spaces
    first (never inside a word); then the ``drop`` columns, low value first, are hidden until it
    fits, and one dim line names them; when even without them it does not fit, each row is
    printed as a block instead, every column kept: its ids on one line, then ``header value``
    pairs indented below, wrapped at the width. Only an id longer than the width itself makes a
    line longer than the width (it is printed whole all the same)."""
    id_cols = [_column(table, ref) for ref in ids]
    for col in id_cols:
        col.no_wrap = True
        col.overflow = "ignore"
    if getattr(con, "wide", False) or not table.columns:
        con.print(table)
        return []
    width = con.width
    kept = list(table.columns)
    victims = [_column(table, ref) for ref in drop]
    hidden: list[Any] = []
    widths = _fit(con, table, kept, width)
    while widths is None and victims:
        victim = victims.pop(0)
        if victim in kept and victim not in id_cols and len(kept) > 1:
            kept.remove(victim)
            hidden.append(victim)
            widths = _fit(con, table, kept, width)
    if widths is None:
        _print_blocks(con, table, id_cols)
        return []
    shown = _subset(table, kept) if hidden else table
    if widths:
        for col, w in zip(shown.columns, widths, strict=True):
            col.width = w
            if not col.no_wrap:
                col.overflow = "fold"
    con.print(shown)
    names = [_plain(con, c.header) for c in hidden]
    if names:
        from rich.markup import escape

        con.print(
            f"[dim](columns hidden at {width} columns: {escape(', '.join(names))}; --wide shows them)[/]"
        )
    return names


def _column(table: Table, ref: ColumnRef) -> Column:
    if isinstance(ref, int):
        return table.columns[ref]
    for col in table.columns:
        if col.header == ref:
            return col
    raise KeyError(f"no column {ref!r} in this table")


def _subset(table: Table, columns: Sequence[Any]) -> Table:
    new = copy.copy(table)
    new.columns = []
    for i, col in enumerate(columns):
        c = copy.copy(col)
        c._index = i  # rich's own bookkeeping: which column is first and last (edge padding)
        new.columns.append(c)
    return new


def _paddings(table: Table, n: int) -> list[int]:
    """Each column's padding, as rich.table.Table._get_padding_width counts it."""
    _, pad_right, _, pad_left = table.padding
    if table.collapse_padding:
        pad_left = 0
    out = []
    for i in range(n):
        left = 0 if (i == 0 and not table.pad_edge) else pad_left
        right = 0 if (i == n - 1 and not table.pad_edge) else pad_right
        out.append(left + right)
    return out


def _extent(con: Console, table: Table, col: Column) -> tuple[int, int]:
    """(narrowest, widest) content width of a column: a column that wraps goes no narrower than
    its longest word; one that does not wrap needs its longest cell."""
    from rich.measure import Measurement

    if col.width is not None:
        return col.width, col.width
    options = con.options.update(width=UNLIMITED_WIDTH)
    cells = list(col.cells)
    if table.show_header:
        cells.append(col.header)
    if table.show_footer:
        cells.append(col.footer)
    lo = hi = 0
    for cell in cells:
        m = Measurement.get(con, options, cell)
        lo, hi = max(lo, m.minimum), max(hi, m.maximum)
    if col.no_wrap:
        lo = hi
    if col.min_width is not None:
        lo, hi = max(lo, col.min_width), max(hi, col.min_width)
    if col.max_width is not None and not col.no_wrap:
        hi = max(lo, min(hi, col.max_width))
    return lo, hi


def _fit(con: Console, table: Table, columns: Sequence[Any], width: int) -> list[int] | None:
    """The content widths that fit ``columns`` in ``width``: ``[]`` when they fit as they are,
    None when they cannot fit without cutting a word or a no-wrap cell."""
    room = width - sum(_paddings(table, len(columns)))
    if table.box:
        room -= (2 if table.show_edge else 0) + len(columns) - 1
    extents = [_extent(con, table, c) for c in columns]
    if sum(hi for _, hi in extents) <= room:
        return []
    spare = room - sum(lo for lo, _ in extents)
    if spare < 0:
        return None
    gaps = [hi - lo for lo, hi in extents]
    total = sum(gaps)
    widths = [lo + g * spare // total for (lo, _), g in zip(extents, gaps, strict=True)]
    left = room - sum(widths)
    for i, (_, hi) in enumerate(extents):
        while left > 0 and widths[i] < hi:
            widths[i] += 1
            left -= 1
    return widths


def _plain(con: Console, cell: Any) -> str:
    return _text(con, cell).plain


def _text(con: Console, cell: Any) -> Text:
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return con.render_str(cell)
    return Text(str(cell))


def _print_blocks(con: Console, table: Table, id_cols: Sequence[Any]) -> None:
    """Each row as a block: its ids first (each whole on a line, however long), then its other
    cells as ``header value`` pairs, indented; as many to a line as fit, none split."""
    from rich.text import Text

    columns = list(table.columns)
    cells = [list(c.cells) for c in columns]
    if table.title:
        con.print(table.title)
    for r in range(len(table.rows)):
        head = [_text(con, cells[i][r]) for i, c in enumerate(columns) if c in id_cols]
        rest = []
        for i, c in enumerate(columns):
            value = _text(con, cells[i][r])
            if c in id_cols or not value.plain.strip():
                continue
            label = _plain(con, c.header)
            rest.append(Text.assemble((label, "dim"), " ", value) if label else value)
        _pack(con, head, "", whole=True)
        _pack(con, rest, "  ", whole=False)


def _pack(con: Console, items: list[Any], indent: str, *, whole: bool) -> None:
    from rich.text import Text

    sep = "  "
    line = Text(indent)

    def flush() -> None:
        if whole:  # an id longer than the width: printed whole all the same
            con.print(line, no_wrap=True, overflow="ignore", crop=False)
        else:  # a pair longer than the width wraps at its spaces
            con.print(line)

    for item in items:
        if line.cell_len > len(indent) and line.cell_len + len(sep) + item.cell_len > con.width:
            flush()
            line = Text(indent)
        if line.cell_len > len(indent):
            line.append(sep)
        line.append_text(item)
    if line.cell_len > len(indent):
        flush()


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float value (NaN, Infinity) turned into None and tuples into
    lists: what RFC 8259 JSON can hold. Anything else json cannot write (a path, a key that is not
    a string or number) becomes its ``str``. Iterative, so a deeply nested document a reader
    accepted (a hand summary's free-form fields) costs no recursion."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(obj, root, 0)]
    while stack:
        value, parent, slot = stack.pop()
        if isinstance(value, float):
            parent[slot] = value if math.isfinite(value) else None
        elif value is None or isinstance(value, (str, int)):
            parent[slot] = value
        elif isinstance(value, dict):
            new: dict[Any, Any] = {}
            for k, v in value.items():
                key = _key(k)
                new[key] = None  # keeps the order of the keys
                stack.append((v, new, key))
            parent[slot] = new
        elif isinstance(value, (list, tuple)):
            items: list[Any] = [None] * len(value)
            stack.extend((v, items, i) for i, v in enumerate(value))
            parent[slot] = items
        else:
            parent[slot] = str(value)
    return root[0]


def _key(k: Any) -> Any:
    if isinstance(k, float) and not math.isfinite(k):
        return str(k)
    return k if k is None or isinstance(k, (str, int, float)) else str(k)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as strict JSON (RFC 8259): never a bare NaN or Infinity, which JSON has not."""
    # written as it is encoded: a 100,000-row table is never one string in memory
    encoder = json.JSONEncoder(indent=1, allow_nan=False)
    chunk: list[str] = []
    size = 0
    for piece in encoder.iterencode(strict_json(obj)):
        chunk.append(piece)
        size += len(piece)
        if size > 1 << 16:
            sys.stdout.write("".join(chunk))
            chunk, size = [], 0
    chunk.append("\n")
    sys.stdout.write("".join(chunk))


@overload
def workspace_from(args: argparse.Namespace, *, required: Literal[True] = True) -> Workspace: ...


@overload
def workspace_from(args: argparse.Namespace, *, required: bool) -> Workspace | None: ...


def workspace_from(args: argparse.Namespace, *, required: bool = True) -> Workspace | None:
    """The workspace the arguments name (``--workspace``, ``--dataset``), else the one found from
    the current folder upward; none found: a UsageError, or None when not ``required``."""
    from fibtui.core.errors import UsageError

    try:
        return open_workspace(getattr(args, "workspace", None), getattr(args, "dataset", None))
    except UsageError:
        if required:
            raise
        return None


def fmt_ms(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


class CancelOnSignals:
    """While a long verb goes (``fibtui run``, ``fibtui parity``): SIGINT, SIGTERM and SIGHUP set ``cancel``
    instead of killing this process, so the verb stops what it started (flashinfer-bench runs in a
    process group of its own: a killed fibtui would leave it running on the GPU), archives what it
    has and returns 128 + the signal. A second signal raises KeyboardInterrupt.

    The handler only sets flags and writes one line with ``os.write`` (it may run while the main
    thread is inside a print)."""

    def __init__(
        self,
        cancel: threading.Event,
        what: str,
        stop: Callable[[str], None] | None = None,
    ) -> None:
        """``stop(signal_name)``: how to stop instead of ``cancel.set()`` (``fibtui run`` marks the
        run interrupted first); it must not import or lock (it runs in the signal handler)."""
        import signal

        self.cancel = cancel
        self.what = what
        self._stop = stop
        self.received: int | None = None
        self._signals = tuple(
            getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)
        )
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> CancelOnSignals:
        import signal

        for sig in self._signals:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        import signal

        for sig, previous in self._previous.items():
            signal.signal(sig, previous)

    @property
    def name(self) -> str | None:
        import signal

        return None if self.received is None else signal.Signals(self.received).name

    def _handle(self, signum: int, _frame: Any) -> None:
        import os
        import signal

        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signum
        name = signal.Signals(signum).name
        if self._stop is not None:
            self._stop(name)
        else:
            self.cancel.set()
        try:
            os.write(2, f"\n{name}: stopping {self.what}\n".encode())
        except OSError:
            pass
