"""Field readers shared by the result formats: a status, a number or a positive latency under one
of several keys, a console log read as text, one number of a console table row. Each refusal is
one :class:`~fibtui.core.errors.InputError` naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core.dataset import _Ctx, _kind, positive_number_problem
from fibtui.core.fsio import read_input_text
from fibtui.core.status import ALL_STATUSES

FOLDER = "is a folder; give a result file"


def status_of(ctx: _Ctx, entry: dict[str, Any], field_name: str) -> str:
    status = entry.get("status")
    if not isinstance(status, str) or not status:
        raise ctx.fail(
            field_name,
            "required field is missing"
            if status is None
            else f"expected a string, got {_kind(status)}",
        )
    if status not in ALL_STATUSES:
        raise ctx.fail(field_name, f"unknown status {status!r}")
    return status


def number_at(ctx: _Ctx, entry: dict[str, Any], keys: tuple[str, ...], prefix: str) -> float | None:
    for key in keys:
        if key in entry and entry[key] is not None:
            return ctx.number(entry, key, prefix)
    return None


def positive_at(
    ctx: _Ctx, entry: dict[str, Any], keys: tuple[str, ...], prefix: str
) -> float | None:
    """A latency or speedup under one of ``keys``: a finite, positive, normal number, or absent."""
    for key in keys:
        if key in entry and entry[key] is not None:
            return ctx.positive(entry, key, prefix)
    return None


def first_of(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def token_float(token: str) -> float | None:
    token = token.strip().rstrip("x")
    try:
        return float(token)
    except ValueError:
        return None


def read_log(path: Path) -> str:
    """A console log or summary as text (bytes that are not UTF-8 shown as U+FFFD; a leading
    byte-order mark dropped; a FIFO or device refused before reading)."""
    return read_input_text(path, folder_message=FOLDER, errors="replace")


def log_number(ctx: _Ctx, token: str, column: str, positive: bool) -> float | None:
    """One number of a console table row: None for a placeholder (``-``, ``n/a``); a latency or
    speedup must be a finite positive number, an error column a finite or non-finite number."""
    value = token_float(token)
    if value is None:
        return None
    if positive:
        problem = positive_number_problem(value, column)
        if problem is not None:
            raise ctx.fail(column, problem)
    return value
