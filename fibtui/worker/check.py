"""Correctness like the official evaluator: shape, dtype, non-finite values, then atol/rtol with a
required matched ratio (an element fails when both its absolute and relative error exceed the
tolerances)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Tolerance:
    atol: float = 1e-2
    rtol: float = 1e-2
    matched_ratio: float = 1.0


@dataclass
class Verdict:
    status: str  # PASSED | INCORRECT_SHAPE | INCORRECT_DTYPE | INCORRECT_NUMERICAL
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    matched_ratio: float | None = None
    detail: str | None = None


def normalize(result: Any, names: list[str], dtypes: list[torch.dtype], device: torch.device) -> list[torch.Tensor]:
    """A value-returning result (tensor, scalar, tuple/list, dict) as the definition's output list."""
    def as_tensor(v: Any, dtype: torch.dtype) -> torch.Tensor:
        if isinstance(v, torch.Tensor):
            return v
        return torch.tensor(v, dtype=dtype, device=device)

    if isinstance(result, dict):
        missing = [n for n in names if n not in result]
        if missing:
            raise ValueError(f"returned dict lacks outputs {missing}")
        return [as_tensor(result[n], d) for n, d in zip(names, dtypes, strict=True)]
    if isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise ValueError(f"returned {len(result)} values but the definition has {len(names)} outputs")
        return [as_tensor(v, d) for v, d in zip(result, dtypes, strict=True)]
    if len(names) != 1:
        raise ValueError(f"returned a single value but the definition has {len(names)} outputs")
    return [as_tensor(result, dtypes[0])]


def compare(outputs: list[torch.Tensor], references: list[torch.Tensor], names: list[str], tol: Tolerance) -> Verdict:
    max_abs = 0.0
    max_rel = 0.0
    worst_ratio = 1.0
    failing: list[str] = []
    for name, out, ref in zip(names, outputs, references, strict=True):
        if tuple(out.shape) != tuple(ref.shape):
            return Verdict("INCORRECT_SHAPE", detail=f"{name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            return Verdict("INCORRECT_DTYPE", detail=f"{name}: dtype {out.dtype}, expected {ref.dtype}")
        x = out.detach().to(device=ref.device, dtype=torch.float32)
        y = ref.to(torch.float32)
        if x.numel() == 0:
            continue
        finite = torch.isfinite(x)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            return Verdict("INCORRECT_NUMERICAL", float("inf"), float("inf"), 0.0,
                           detail=f"{name}: {bad} non-finite value(s) (unwritten outputs read as NaN)")
        abs_err = (x - y).abs()
        rel_err = abs_err / (y.abs() + 1e-8)
        exceeds = (abs_err > tol.atol) & (rel_err > tol.rtol)
        ratio = 1.0 - float(exceeds.sum()) / x.numel()
        max_abs = max(max_abs, float(abs_err.max()))
        max_rel = max(max_rel, float(rel_err.max()))
        worst_ratio = min(worst_ratio, ratio)
        if ratio < tol.matched_ratio:
            failing.append(f"{name}: {int(exceeds.sum())} of {x.numel()} elements beyond atol={tol.atol} rtol={tol.rtol}")
    if failing:
        return Verdict("INCORRECT_NUMERICAL", max_abs, max_rel, worst_ratio, detail="; ".join(failing))
    return Verdict("PASSED", max_abs, max_rel, worst_ratio)
