"""The pieces every evaluator shares: tolerances, the verdict, turning a value-returning result into
the definition's output list, and the elementwise check of one output against its reference.

The elementwise check is flashinfer-bench's: shape, then dtype, then any inf (errors reported as
inf), then any NaN (errors NaN), then per element abs = |x - y| and rel = abs / (|y| + 1e-8) in
float32; an element fails when abs > atol AND rel > rtol; the output fails when the share of
elements that do not fail is under the required matched ratio. (A NaN in the reference makes its
element compare as not failing, as there.) The evaluators (fibtui.worker.evaluators) decide what
is checked; docs/evaluators.md says how each one judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Tolerance:
    atol: float = 1e-2
    rtol: float = 1e-2
    #: the required share of matching elements; None: the evaluator's own default
    matched_ratio: float | None = 1.0
    #: evaluator-specific settings (sampling: validation trials, TVD threshold)
    extra: dict[str, Any] = field(default_factory=dict)

    def ratio(self, default: float = 1.0) -> float:
        return default if self.matched_ratio is None else float(self.matched_ratio)


@dataclass
class Verdict:
    status: str  # PASSED | INCORRECT_SHAPE | INCORRECT_DTYPE | INCORRECT_NUMERICAL
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    matched_ratio: float | None = None
    detail: str | None = None
    #: evaluator-specific numbers (tvd, per-batch tvds...)
    extra: dict[str, Any] = field(default_factory=dict)


def normalize(
    result: Any, names: list[str], dtypes: list[torch.dtype], device: torch.device
) -> list[torch.Tensor]:
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
            raise ValueError(
                f"returned {len(result)} values but the definition has {len(names)} outputs"
            )
        return [as_tensor(v, d) for v, d in zip(result, dtypes, strict=True)]
    if len(names) != 1:
        raise ValueError(f"returned a single value but the definition has {len(names)} outputs")
    return [as_tensor(result, dtypes[0])]


@dataclass
class OutputCheck:
    """One output against its reference: a status that is not None ends the check at once
    (shape, dtype, inf or NaN); otherwise the error numbers and whether it exceeded."""

    status: str | None
    max_abs: float
    max_rel: float
    ratio: float
    exceeds: bool
    detail: str | None = None


def _host_check(name: str, out: Any, ref: torch.Tensor) -> OutputCheck | None:
    """What is known of an output without reading the device: a wrong shape or dtype (a
    status), an empty output (nothing to compare), else None."""
    if tuple(out.shape) != tuple(ref.shape):
        return OutputCheck(
            "INCORRECT_SHAPE",
            0.0,
            0.0,
            0.0,
            True,
            f"{name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
        )
    if out.dtype != ref.dtype:
        return OutputCheck(
            "INCORRECT_DTYPE",
            0.0,
            0.0,
            0.0,
            True,
            f"{name}: dtype {out.dtype}, expected {ref.dtype}",
        )
    if out.numel() == 0:
        return OutputCheck(None, 0.0, 0.0, 1.0, False)
    return None


def _error_numbers(x: torch.Tensor, y: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Infinities and NaNs in float32 ``x``, its elements beyond tolerance against ``y``, the
    largest absolute and relative errors: one float64 tensor of five, on the device (every
    output of a check is read back in one synchronization, not five each)."""
    abs_err = (x - y).abs()
    rel_err = abs_err / (y.abs() + 1e-8)
    failing = (abs_err > tol.atol) & (rel_err > tol.rtol)
    return torch.stack(
        [
            torch.isinf(x).sum().double(),
            torch.isnan(x).sum().double(),
            failing.sum().double(),
            abs_err.max().double(),
            rel_err.max().double(),
        ]
    )


def _from_numbers(
    name: str,
    numel: int,
    numbers: list[float],
    tol: Tolerance,
    required_ratio: float,
    nonfinite: bool = True,
) -> OutputCheck:
    n_inf, n_nan, n_fail, max_abs, max_rel = numbers
    if nonfinite and n_inf:
        return OutputCheck(
            "INCORRECT_NUMERICAL",
            math.inf,
            math.inf,
            0.0,
            True,
            f"{name}: {int(n_inf)} infinite value(s)",
        )
    if nonfinite and n_nan:
        return OutputCheck(
            "INCORRECT_NUMERICAL",
            math.nan,
            math.nan,
            0.0,
            True,
            f"{name}: {int(n_nan)} NaN value(s) (unwritten outputs read as NaN)",
        )
    fails = int(n_fail)
    ratio = min(1.0, max(0.0, 1.0 - fails / numel))
    exceeds = ratio < required_ratio
    detail = (
        (
            f"{name}: {fails} of {numel} elements beyond atol={tol.atol:g} rtol={tol.rtol:g}"
            f" (matched {ratio:.4f}, required {required_ratio:g})"
        )
        if exceeds
        else None
    )
    return OutputCheck(None, max_abs, max_rel, ratio, exceeds, detail)


def check_output(
    name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, required_ratio: float
) -> OutputCheck:
    return check_outputs([name], [out], [ref], tol, required_ratio)[0]


def check_outputs(
    names: list[str],
    outputs: list[torch.Tensor],
    references: list[torch.Tensor],
    tol: Tolerance,
    required_ratio: float,
) -> list[OutputCheck]:
    """Each output against its reference, in order, up to and with the first whose shape or
    dtype is wrong; the device is read once for all of them."""
    host: list[OutputCheck | None] = []
    pending: list[tuple[int, torch.Tensor]] = []
    for i, (name, out, ref) in enumerate(zip(names, outputs, references, strict=False)):
        known = _host_check(name, out, ref)
        host.append(known)
        if known is None:
            x = out.detach().to(device=ref.device, dtype=torch.float32)
            pending.append((i, _error_numbers(x, ref.to(torch.float32), tol)))
        elif known.status is not None:
            break
    read = torch.stack([n.to(pending[0][1].device) for _, n in pending]).tolist() if pending else []
    numbers = {i: row for (i, _), row in zip(pending, read, strict=True)}
    return [
        known
        if known is not None
        else _from_numbers(names[i], outputs[i].numel(), numbers[i], tol, required_ratio)
        for i, known in enumerate(host)
    ]


def elementwise(
    name: str, x: torch.Tensor, y: torch.Tensor, tol: Tolerance, required_ratio: float
) -> OutputCheck:
    """abs/rel errors of float32 ``x`` against ``y``, the share within tolerance, and whether it
    is under ``required_ratio``."""
    numbers = _error_numbers(x, y, tol).tolist()
    return _from_numbers(name, x.numel(), numbers, tol, required_ratio, nonfinite=False)


def mismatch_flag(out: Any, ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """A device-side flag, True when ``out`` fails the default evaluator's check against
    ``ref`` (shape, dtype, a non-finite value, or more elements beyond atol and rtol than the
    matched ratio allows), without a synchronization: the gate reads every kept call's flags at
    once. It agrees with :func:`compare`'s pass/fail (the words come from :func:`compare`)."""
    device = ref.device
    if (
        not isinstance(out, torch.Tensor)
        or tuple(out.shape) != tuple(ref.shape)
        or out.dtype != ref.dtype
    ):
        return torch.ones((), dtype=torch.bool, device=device)
    if out.numel() == 0:
        return torch.zeros((), dtype=torch.bool, device=device)
    return mismatch_flags([out], [ref], tol)[0]


#: the most bytes one stacked operand of :func:`mismatch_flags` holds (as float32): more kept
#: outputs than fit are compared in several stacks
STACK_BYTES = 512 * 2**20


def mismatch_flags(outs: list[Any], refs: list[torch.Tensor], tol: Tolerance) -> torch.Tensor:
    """:func:`mismatch_flag` of many pairs at once: one device-side bool per pair, True where
    that pair fails. Pairs of one shape and dtype are stacked and compared together (one
    sequence of kernels for all of them, not one per pair: the gate compares every kept call
    of a job, and on the H200 the per-pair kernels' launches were most of the checks' cost),
    in stacks of at most :data:`STACK_BYTES`."""
    assert len(outs) == len(refs)
    if not refs:
        return torch.zeros(0, dtype=torch.bool)
    device = refs[0].device
    flags: list[torch.Tensor | None] = [None] * len(refs)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        if (
            not isinstance(out, torch.Tensor)
            or tuple(out.shape) != tuple(ref.shape)
            or out.dtype != ref.dtype
            or out.numel() == 0
            or ref.device != device
        ):
            flags[i] = mismatch_flag(out, ref, tol).reshape(1).to(device)
        else:
            groups.setdefault((tuple(ref.shape), ref.dtype), []).append(i)
    allowed_share = 1.0 - tol.ratio(1.0)
    for idx in groups.values():
        per = max(1, STACK_BYTES // max(1, refs[idx[0]].numel() * 4))
        for start in range(0, len(idx), per):
            part = idx[start : start + per]
            x = torch.stack([outs[i].detach() for i in part]).to(device=device, dtype=torch.float32)
            y = torch.stack([refs[i] for i in part]).to(torch.float32)
            abs_err = (x - y).abs()
            # flashinfer-bench's rule: a NaN or an infinity anywhere in the output fails it
            # whatever the matched ratio; else an element fails when abs > atol and
            # abs / (|y| + 1e-8) > rtol, and more failing elements than the ratio allows fail it
            fails = (abs_err > tol.atol) & (abs_err > tol.rtol * (y.abs() + 1e-8))
            rows = len(part)
            numel = x[0].numel()
            got = (fails.reshape(rows, -1).sum(dim=1) > allowed_share * numel) | (
                ~torch.isfinite(x)
            ).reshape(rows, -1).any(dim=1)
            for j, i in enumerate(part):
                flags[i] = got[j : j + 1]
    return torch.cat([f for f in flags if f is not None])


def compare(
    outputs: list[torch.Tensor],
    references: list[torch.Tensor],
    names: list[str],
    tol: Tolerance,
    default_ratio: float = 1.0,
) -> Verdict:
    """Every output against its reference (the default evaluator's check of one input set)."""
    max_abs = 0.0
    max_rel = 0.0
    worst = 1.0
    failing: list[str] = []
    required = tol.ratio(default_ratio)
    for name, c in zip(
        names, check_outputs(names, outputs, references, tol, required), strict=False
    ):
        if c.status is not None:
            return Verdict(
                c.status,
                c.max_abs if c.status == "INCORRECT_NUMERICAL" else None,
                c.max_rel if c.status == "INCORRECT_NUMERICAL" else None,
                c.ratio if c.status == "INCORRECT_NUMERICAL" else None,
                detail=c.detail,
            )
        max_abs, max_rel, worst = (
            max(max_abs, c.max_abs),
            max(max_rel, c.max_rel),
            min(worst, c.ratio),
        )
        if c.exceeds:
            failing.append(c.detail or name)
    if failing:
        return Verdict("INCORRECT_NUMERICAL", max_abs, max_rel, worst, detail="; ".join(failing))
    return Verdict("PASSED", max_abs, max_rel, worst)
