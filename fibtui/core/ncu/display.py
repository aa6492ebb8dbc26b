"""Display: metric values and report labels, as plain strings shared by the TUI and the CLI."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Fields that count whole things (registers, blocks, threads, bytes, requests, SMs): an integer
#: value prints without decimals (``2048.0`` -> ``2,048``).
COUNT_FIELDS: frozenset[str] = frozenset(
    {
        "registers_per_thread",
        "dynamic_shared_memory_bytes",
        "static_shared_memory_bytes",
        "grid_blocks",
        "block_threads",
        "block_limit_registers",
        "block_limit_shared_memory",
        "block_limit_warps",
        "block_limit_blocks",
        "block_limit_barriers",
        "l2_persisting_size_bytes",
        "local_spilling_requests",
        "register_spilling_instructions",
        "sm_count",
    }
)


def format_metric(value: Any, field: str | None = None) -> str:
    """One metric value for a table: ``-`` when unknown; an integer value of a count field
    (:data:`COUNT_FIELDS`) or a Python int without decimals, with thousands separators
    (``2,048``); any other number with 2 decimals (``4.70``, ``1,234.50``), or without decimals
    from a million up; text as it is."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if field in COUNT_FIELDS and value.is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}" if abs(value) < 1e6 else f"{value:,.0f}"


ELLIPSIS = "…"


def abbreviate_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with ``…`` (the head keeps
    the larger half); unchanged when it fits."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (keep - head) :]


def report_name(path: str | Path) -> str:
    """The label of a report file: its name without the ``_details`` of the page
    (``x_details.csv`` -> ``x.csv``)."""
    return re.sub(r"_details(?=\.[A-Za-z0-9]+$)", "", Path(path).name)


def _split_ext(label: str) -> tuple[str, str]:
    stem, dot, ext = label.rpartition(".")
    if dot and stem and 0 < len(ext) <= 8 and ext.isalnum():
        return stem, "." + ext
    return label, ""


def _token_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` that ends just after a separator
    (``_``, ``-``, ``.``, ``/``)."""
    n = 0
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            break
        if x in "_-./":
            n = i + 1
    return n


def _whole_labels(paths: Sequence[str | Path]) -> list[str]:
    """Each report's label; equal names (one file name in two folders) take as many parent
    folders as they need to differ."""
    parts = [Path(p).parts for p in paths]
    labels = [report_name(p) for p in paths]
    depth = 1
    while len(set(labels)) < len(labels) and depth < max((len(p) for p in parts), default=1):
        seen: dict[str, int] = {}
        for lab in labels:
            seen[lab] = seen.get(lab, 0) + 1
        labels = [
            ("/".join(pp[max(0, len(pp) - 1 - depth) : -1]) + "/" + report_name(p))
            if seen[lab] > 1
            else lab
            for lab, pp, p in zip(labels, parts, paths, strict=True)
        ]
        depth += 1
    return labels


def report_labels(paths: Sequence[str | Path], width: int) -> list[str]:
    """Labels for a list of report files, at most ``width`` characters where that can be done
    without two labels reading the same.

    A label is the file name without ``_details`` (:func:`report_name`). One that is too long
    drops a leading part it shares with another report (``…`` in its place): the longest such
    part after which it still fits, else the longest there is, so what is left starts where the
    report differs from its nearest neighbour. If that is still too long, the rest is cut before
    the extension (``…demo_gdn_decode_triton_v1_a8ef….csv``). A label that would then read like
    another one is shown whole; so the labels are always distinct (distinct paths give distinct
    whole labels: a file name found in two folders carries its folder)."""
    whole = _whole_labels(paths)
    stems = [_split_ext(label)[0] for label in whole]
    out: list[str] = []
    for i, label in enumerate(whole):
        if len(label) <= width:
            out.append(label)
            continue
        stem, ext = _split_ext(label)
        cuts = sorted(
            {_token_prefix(stem, o) for j, o in enumerate(stems) if j != i and o != stem} - {0}
        )
        cuts = [c for c in cuts if c < len(stem)]
        fitting = [c for c in cuts if len(ELLIPSIS) + len(stem) - c + len(ext) <= width]
        cut = fitting[0] if fitting else (cuts[-1] if cuts else 0)
        head = ELLIPSIS if cut else ""
        rest = stem[cut:]
        short = head + rest + ext
        if len(short) > width:
            budget = width - len(head) - len(ext) - len(ELLIPSIS)
            short = (
                head + rest[:budget] + ELLIPSIS + ext
                if budget > 0
                else abbreviate_middle(label, width)
            )
        out.append(short)
    # whatever still collides is shown whole (whole labels never collide with each other)
    while True:
        count: dict[str, int] = {}
        for label in out:
            count[label] = count.get(label, 0) + 1
        clash = [i for i, label in enumerate(out) if count[label] > 1 and label != whole[i]]
        if not clash:
            return out
        for i in clash:
            out[i] = whole[i]
