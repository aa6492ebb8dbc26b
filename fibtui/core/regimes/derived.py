"""Axes a definition derives from others (``a == b * c`` constraints)."""

from __future__ import annotations

import ast
import re

import polars as pl

from fibtui.core.dataset import Definition

_EQUALITY = re.compile(r"^\s*([A-Za-z_]\w*)\s*==\s*(.+?)\s*$")


def _axis_expression(node: ast.AST, axes: set[str]) -> bool:
    """Integer arithmetic over axis names only (no calls, indexing or attributes)."""
    if isinstance(node, ast.Expression):
        return _axis_expression(node.body, axes)
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
    ):
        return _axis_expression(node.left, axes) and _axis_expression(node.right, axes)
    if isinstance(node, ast.Name):
        return node.id in axes
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )


def _evaluate(node: ast.AST, values: dict[str, int]) -> int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, values)
    if isinstance(node, ast.Name):
        return int(values[node.id])
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    assert isinstance(node, ast.BinOp)
    left, right = _evaluate(node.left, values), _evaluate(node.right, values)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    return left // right if right else 0


def derived_axes(definition: Definition, frame: pl.DataFrame, varying: list[str]) -> dict[str, str]:
    """Varying axes that an equality constraint of the definition (``axis == expression over other
    axes``) fixes, checked against every workload: axis -> expression. Only integer arithmetic over
    axis names counts; a constraint reading a tensor (``cu_seqlens[-1].item()``) does not."""
    out: dict[str, str] = {}
    consts = definition.const_axes
    known = set(consts) | set(varying)
    for text in definition.constraints:
        m = _EQUALITY.match(text)
        if not m or m.group(1) not in varying:
            continue
        axis, expr = m.group(1), m.group(2)
        try:
            tree = ast.parse(expr, mode="eval")
        except SyntaxError:
            continue
        if not _axis_expression(tree, known - {axis}):
            continue
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        if not names & (set(varying) - {axis}):
            continue  # fixed by consts alone: it would not vary
        cols = [c for c in sorted(names | {axis}) if c in frame.columns]
        holds = all(
            _evaluate(tree, {**consts, **row}) == row[axis]
            for row in frame.select(cols).iter_rows(named=True)
        )
        if holds:
            out[axis] = expr
    return out
