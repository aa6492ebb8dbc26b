"""Roofline floors: the least time a workload can take on a device, from the definition alone.

For every workload this module computes:

- ``floor_bytes``: the fewest bytes the operator must move. Every input is read once and every
  output written once; a tensor's size is the product of its shape's axes at the workload's axis
  values times its dtype's size (``fibtui.core.dtypes``: fp8 is 1 byte, fp4 half a byte, a scalar
  is one element). An input marked ``"optional": true`` counts only when the workload lists it
  among its inputs (when a workload set was built in memory without its input specs, optional
  inputs count as present and the report says so).
- ``floor_flops``: the floating-point operations, where they can be known:

  1. the definition's own ``flops`` field, a number or an arithmetic expression over its axes
     (``"2 * M * N * K"``; ``+ - * / // % **``, parentheses, numbers and axis names only);
  2. otherwise a formula keyed by ``op_type`` (:data:`OP_FLOPS`), each derived from tensor shapes,
     never from axis names:

     - ``gemm`` / ``matmul``: ``2 * (product of the distinct axes of the first two inputs)``, the
       multiply-add count of a contraction (``A[M,K] @ B[K,N]`` or ``B[N,K]`` -> ``2*M*N*K``).
     - ``gdn`` (Gated DeltaNet, recurrent form, decode or prefill): per token and v-head the state
       ``S[V,K]`` is decayed (1 op per element), read against ``k`` (a multiply-add, 2), updated
       by a rank-1 outer product (a multiply-add, 2) and read against ``q`` (a multiply-add, 2):
       about 8 flops per state element, so ``8 * numel(v) * K`` with ``K`` the last axis of ``k``
       (``numel(v)`` = tokens x v-heads x V). Needs inputs named ``v`` and ``k``.

  3. otherwise none: the floor is the memory floor alone.

- ``floor_us = max(floor_bytes / bandwidth, floor_flops / rate)``; ``floor_bound`` says which term
  won (``memory`` or ``compute``). The rate is the device's dense tensor rate for the narrowest
  floating input dtype (fp4, then fp8, else bf16): the highest rate the hardware could apply, so
  the floor stays a lower bound.
- ``speed_of_light_pct = 100 * floor / latency``: the share of the speed of light the workload
  reaches. 100 means it runs at its floor; 25 means the floor is a quarter of its latency (it takes
  4x the floor). Above 100 the measurement or the floor is wrong (data served from L2, a skipped
  write, a wrong shape): treat it as a warning, not a win. (Before, fibtui showed the inverse,
  ``pct_of_floor = 100 * latency / floor``; :func:`pct_of_floor` still computes it.)

Devices (:data:`DEVICES`) carry spec numbers; a measured value in the workspace's
``fibtui.toml`` overrides them (``[devices.H200] bandwidth_tbs = 4.3``; keys ``bandwidth_tbs``,
``bf16_tflops``, ``fp8_tflops``, ``fp4_tflops``, ``sms``), and a table there may add a device
the built-in list lacks (it then needs ``bandwidth_tbs``).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from fibtui.core.dataset import Definition, TensorSpec, WorkloadSet
from fibtui.core.dtypes import DTYPE_BYTES
from fibtui.core.errors import InputError

# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    name: str
    bandwidth_tbs: float  # HBM, terabytes (1e12 bytes) per second
    sms: int | None
    bf16_tflops: float | None  # dense tensor-core rate
    fp8_tflops: float | None = None
    fp4_tflops: float | None = None
    source: str = "spec"  # "spec" | "fibtui.toml" (some value measured and set by the user)
    note: str = ""

    def rate_tflops(self, narrowest_float: str | None) -> float | None:
        """The dense rate for a given narrowest floating dtype class (fp4 / fp8 / other)."""
        if narrowest_float == "fp4":
            return self.fp4_tflops or self.fp8_tflops or self.bf16_tflops
        if narrowest_float == "fp8":
            return self.fp8_tflops or self.bf16_tflops
        return self.bf16_tflops

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: Spec sheets (dense rates, no sparsity). H200's bandwidth measured on the lent H200 by a
#: device-to-device copy was 4.3 TB/s (docs/measurement.md, "Roofline floors"); set it in fibtui.toml to use it.
DEVICES: dict[str, Device] = {
    "B200": Device(
        "B200",
        8.0,
        148,
        2250.0,
        4500.0,
        9000.0,
        note="HBM3e ~8 TB/s, 148 SMs, dense bf16 ~2.25 PFLOP/s",
    ),
    "H200": Device(
        "H200",
        4.8,
        132,
        989.0,
        1979.0,
        None,
        note="HBM3e 4.8 TB/s spec (4.3 TB/s measured by a device copy), 132 SMs",
    ),
    "H100": Device(
        "H100", 3.35, 132, 989.0, 1979.0, None, note="H100 SXM: HBM3 3.35 TB/s, 132 SMs"
    ),
}

_OVERRIDABLE = ("bandwidth_tbs", "bf16_tflops", "fp8_tflops", "fp4_tflops", "sms")


def device_key(name: str) -> str:
    """``"NVIDIA H200"``, ``"h200"``, ``"H100 SXM"`` -> ``H200`` / ``H100``; others upper-cased."""
    key = re.sub(r"[^A-Z0-9]", "", name.upper())
    key = key.removeprefix("NVIDIA")
    for suffix in ("SXM5", "SXM", "HBM3E"):
        if key.endswith(suffix) and key[: -len(suffix)] in DEVICES:
            key = key[: -len(suffix)]
    return key


def _device_overrides(root: str | Path | None) -> tuple[dict[str, Any], Path | None]:
    if root is None:
        return {}, None
    from fibtui.core.settings import load_settings, settings_path

    table = load_settings(root).get("devices", {})
    path = settings_path(root)
    if not isinstance(table, dict):
        raise InputError(path, "expected a table of devices", field="devices")
    return table, path


def device_names(root: str | Path | None = None) -> list[str]:
    table, _ = _device_overrides(root)
    extra = [device_key(k) for k in table if device_key(k) not in DEVICES]
    return list(DEVICES) + sorted(set(extra))


def get_device(name: str, root: str | Path | None = None) -> Device:
    """The named device, with the workspace's measured values (fibtui.toml) applied."""
    key = device_key(name)
    table, path = _device_overrides(root)
    override: dict[str, Any] | None = None
    for raw_name, values in table.items():
        if device_key(str(raw_name)) == key:
            if not isinstance(values, dict):
                raise InputError(path, "expected a table of values", field=f"devices.{raw_name}")
            override = {"_name": raw_name, **values}
    base = DEVICES.get(key)
    if base is None and override is None:
        raise InputError(
            None,
            f"unknown device {name!r}; known: {', '.join(device_names(root))} "
            "(add one as [devices.NAME] bandwidth_tbs = ... in fibtui.toml)",
            field="--device",
        )
    if override is None:
        assert base is not None
        return base
    changes: dict[str, Any] = {}
    for k in _OVERRIDABLE:
        if k not in override:
            continue
        v = override[k]
        where = f"devices.{override['_name']}.{k}"
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(path, f"expected a positive number, got {v!r}", field=where)
        changes[k] = int(v) if k == "sms" else float(v)
    if base is None:
        if "bandwidth_tbs" not in changes:
            raise InputError(
                path,
                "a device not in the built-in table needs bandwidth_tbs",
                field=f"devices.{override['_name']}.bandwidth_tbs",
            )
        base = Device(key, changes.pop("bandwidth_tbs"), None, None, note="defined in fibtui.toml")
    if not changes:
        return base
    note = "measured: " + ", ".join(f"{k}={v}" for k, v in changes.items()) + " (fibtui.toml)"
    return replace(base, source="fibtui.toml", note=note, **changes)


# --------------------------------------------------------------------------------------------
# FLOP expressions (a definition's ``flops`` field)
# --------------------------------------------------------------------------------------------

_MAX_EXPR = 1000
_MAX_DEPTH = 64
_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


@dataclass(frozen=True)
class FlopsFormula:
    """A FLOP count as an expression over the definition's axes, and where it came from."""

    expression: str
    source: str  # "definition" | "op_type:<name>"
    tree: ast.Expression

    def expr(self, definition: Definition) -> pl.Expr:
        """A polars expression (Float64) over the workload frame's axis columns."""
        consts = definition.const_axes

        def leaf(name: str) -> pl.Expr:
            if name in consts:
                return pl.lit(float(consts[name]))
            return pl.col(name).cast(pl.Float64)

        return _walk(self.tree.body, leaf, lambda v: pl.lit(float(v)))

    def evaluate(self, definition: Definition, axes: Mapping[str, int]) -> float | None:
        values = definition.axis_values(dict(axes))

        def leaf(name: str) -> float:
            return float(values[name])

        try:
            out = _walk(self.tree.body, leaf, float)
        except (ZeroDivisionError, OverflowError, KeyError, ValueError):
            return None
        return out if isinstance(out, float) and math.isfinite(out) and out >= 0 else None


def _walk(node: ast.AST, leaf: Callable[[str], Any], const: Callable[[float], Any]) -> Any:
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_walk(node.left, leaf, const), _walk(node.right, leaf, const))
    if isinstance(node, ast.UnaryOp):
        inner = _walk(node.operand, leaf, const)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Name):
        return leaf(node.id)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return const(node.value)
    raise TypeError(type(node).__name__)  # parse_flops_expression lets nothing else through


def _depth(tree: ast.AST) -> int:
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_flops_expression(
    value: Any, definition: Definition, source: str = "definition", path: Path | str | None = None
) -> FlopsFormula:
    """Check a FLOP count (a number or an expression over the definition's axes).

    Rejections are :class:`InputError` naming the definition file and the ``flops`` field.
    """
    where = path if path is not None else definition.path
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(where, "expected a number or an expression over the axes", field="flops")
    if not isinstance(value, str):
        if not math.isfinite(value) or value < 0:
            raise InputError(
                where, f"expected a non-negative finite number, got {value!r}", field="flops"
            )
        text = repr(float(value))
    else:
        text = value.strip()
    if not text or len(text) > _MAX_EXPR:
        raise InputError(
            where, f"expected an expression of 1 to {_MAX_EXPR} characters", field="flops"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise InputError(
            where, f"not an arithmetic expression: {text[:80]!r}", field="flops"
        ) from None
    if _depth(tree) > _MAX_DEPTH:
        raise InputError(where, f"expression nested deeper than {_MAX_DEPTH} levels", field="flops")
    axes = set(definition.axes)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Load)) or type(node) in _BINOPS:
            continue
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            if isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise InputError(
                    where, "only + - * / // % ** and parentheses are allowed", field="flops"
                )
            continue
        if isinstance(node, (ast.USub, ast.UAdd)):
            continue
        if (
            isinstance(node, ast.Constant)
            and not isinstance(node.value, bool)
            and isinstance(node.value, (int, float))
        ):
            try:
                number = float(node.value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number) or abs(number) > 1e30:
                raise InputError(where, "number out of range", field="flops")
            continue
        if isinstance(node, ast.Name):
            if node.id not in axes:
                raise InputError(
                    where,
                    f"unknown axis {node.id!r} (axes: {', '.join(definition.axes)})",
                    field="flops",
                )
            continue
        raise InputError(
            where, f"not allowed in a FLOP expression: {type(node).__name__}", field="flops"
        )
    return FlopsFormula(text, source, tree)


def _gemm_formula(definition: Definition) -> str | None:
    tensors = [s for s in definition.inputs.values() if s.shape]
    if len(tensors) < 2:
        return None
    axes: list[str] = []
    for spec in tensors[:2]:
        for a in spec.shape or ():
            if a not in axes:
                axes.append(a)
    return "2 * " + " * ".join(axes) if axes else None


def _gdn_formula(definition: Definition) -> str | None:
    v = definition.inputs.get("v")
    k = definition.inputs.get("k")
    if v is None or k is None or not v.shape or not k.shape:
        return None
    return "8 * " + " * ".join([*v.shape, k.shape[-1]])


#: op_type -> a function of the definition giving a FLOP expression over its axes (or None).
OP_FLOPS: dict[str, Callable[[Definition], str | None]] = {
    "gemm": _gemm_formula,
    "matmul": _gemm_formula,
    "gdn": _gdn_formula,
}


def flops_formula(definition: Definition) -> FlopsFormula | None:
    """The definition's own ``flops`` field, else the op_type's formula, else None."""
    if definition.raw.get("flops") is not None:
        return parse_flops_expression(definition.raw["flops"], definition)
    maker = OP_FLOPS.get(definition.op_type.lower())
    if maker is None:
        return None
    text = maker(definition)
    if text is None:
        return None
    return parse_flops_expression(text, definition, source=f"op_type:{definition.op_type.lower()}")


def narrowest_float(definition: Definition) -> str | None:
    """``fp4`` / ``fp8`` when some floating input is that narrow, else None (bf16 rate)."""
    dtypes = {s.dtype for s in definition.inputs.values()}
    if any(d.startswith("float4") for d in dtypes):
        return "fp4"
    if any(d.startswith("float8") for d in dtypes):
        return "fp8"
    return None


# --------------------------------------------------------------------------------------------
# Bytes
# --------------------------------------------------------------------------------------------


def _dtype_size(definition: Definition, spec: TensorSpec) -> float:
    try:
        return float(DTYPE_BYTES[spec.dtype])
    except KeyError:
        raise InputError(
            definition.path, f"unknown dtype {spec.dtype!r}", field=f"{spec.name}.dtype"
        ) from None


def tensor_bytes(definition: Definition, spec: TensorSpec, axes: Mapping[str, int]) -> float:
    """Bytes of one tensor at a workload's axes (a scalar is one element)."""
    shape = definition.shape(spec, dict(axes)) or ()
    return float(math.prod(shape)) * _dtype_size(definition, spec)


def workload_bytes(
    definition: Definition, axes: Mapping[str, int], present: Iterable[str] | None = None
) -> float:
    """Every input read once and every output written once. ``present``: the workload's input
    names (an optional input not among them is not counted); None counts every input."""
    names = None if present is None else set(present)
    total = 0.0
    for name, spec in definition.inputs.items():
        if spec.optional and names is not None and name not in names:
            continue
        total += tensor_bytes(definition, spec, axes)
    for spec in definition.outputs.values():
        total += tensor_bytes(definition, spec, axes)
    return total


def _tensor_bytes_expr(definition: Definition, spec: TensorSpec) -> pl.Expr:
    consts = definition.const_axes
    size = _dtype_size(definition, spec)
    expr: pl.Expr = pl.lit(size)
    for axis in spec.shape or ():
        expr = expr * (
            pl.lit(float(consts[axis])) if axis in consts else pl.col(axis).cast(pl.Float64)
        )
    return expr


def optional_presence(definition: Definition, workloads: WorkloadSet) -> pl.DataFrame | None:
    """uuid + one boolean column ``has:<input>`` per optional input (None when there is none, or
    when the workload set carries no input specs: optional inputs then count as present)."""
    names = [n for n, s in definition.inputs.items() if s.optional]
    if not names:
        return None
    data: bytes | None = getattr(workloads, "_data", None)
    parsed: dict[str, Any] = getattr(workloads, "_parsed", {}) or {}
    uuids = workloads.uuids
    if parsed and all(u in parsed for u in uuids):
        return pl.DataFrame(
            {"uuid": uuids, **{f"has:{n}": [n in parsed[u].inputs for u in uuids] for n in names}}
        )
    if not data:
        return None
    import io

    schema = {
        "workload": pl.Struct(
            {
                "uuid": pl.String,
                "inputs": pl.Struct({n: pl.Struct({"type": pl.String}) for n in names}),
            }
        )
    }
    try:
        raw = pl.read_ndjson(io.BytesIO(data), schema=schema, ignore_errors=False)
        w = pl.col("workload")
        frame = (
            raw.select(
                w.struct.field("uuid").alias("uuid"),
                *[
                    w.struct.field("inputs").struct.field(n).is_not_null().alias(f"has:{n}")
                    for n in names
                ],
            )
            .filter(pl.col("uuid").is_not_null())
            .unique("uuid", keep="first", maintain_order=True)
        )
    except Exception:  # a line polars cannot read: fall back to the strict per-line reader
        frame = pl.DataFrame(
            {
                "uuid": uuids,
                **{f"has:{n}": [n in workloads.get(u).inputs for u in uuids] for n in names},
            }
        )
    return frame


@dataclass(frozen=True)
class Floor:
    bytes: float
    flops: float | None
    memory_us: float
    compute_us: float | None
    floor_us: float
    bound: str  # "memory" | "compute"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def floor(
    definition: Definition,
    axes: Mapping[str, int],
    device: Device,
    present: Iterable[str] | None = None,
) -> Floor:
    """The floor of one workload on ``device``."""
    nbytes = workload_bytes(definition, axes, present)
    formula = flops_formula(definition)
    flops = formula.evaluate(definition, axes) if formula else None
    memory_us = nbytes / (device.bandwidth_tbs * 1e6)
    rate = device.rate_tflops(narrowest_float(definition))
    compute_us = flops / (rate * 1e6) if flops is not None and rate else None
    if compute_us is not None and compute_us > memory_us:
        return Floor(nbytes, flops, memory_us, compute_us, compute_us, "compute")
    return Floor(nbytes, flops, memory_us, compute_us, memory_us, "memory")


def floor_frame(
    definition: Definition, workloads: WorkloadSet, device: Device
) -> tuple[pl.DataFrame, list[str]]:
    """Floors of every workload, vectorized: (frame, notes).

    Frame columns: uuid, floor_bytes, floor_flops (null without a formula), floor_us, floor_bound.
    """
    notes: list[str] = []
    frame = workloads.frame
    presence = optional_presence(definition, workloads)
    optional = [n for n, s in definition.inputs.items() if s.optional]
    if optional and presence is None:
        notes.append(
            f"optional input(s) {', '.join(optional)} counted as present (the workloads' input specs are not at hand)"
        )
    if presence is not None:
        frame = frame.join(presence, on="uuid", how="left")
    terms: list[pl.Expr] = []
    for name, spec in definition.inputs.items():
        term = _tensor_bytes_expr(definition, spec)
        if spec.optional and presence is not None:
            term = pl.when(pl.col(f"has:{name}").fill_null(True)).then(term).otherwise(0.0)
        terms.append(term)
    terms += [_tensor_bytes_expr(definition, spec) for spec in definition.outputs.values()]
    bytes_expr = pl.sum_horizontal(terms) if terms else pl.lit(0.0)
    formula = flops_formula(definition)
    rate = device.rate_tflops(narrowest_float(definition))
    cols = [pl.col("uuid"), bytes_expr.alias("floor_bytes")]
    if formula is not None:
        flops = formula.expr(definition)
        cols.append(
            pl.when(flops.is_finite() & (flops >= 0))
            .then(flops)
            .otherwise(None)
            .alias("floor_flops")
        )
    else:
        cols.append(pl.lit(None, dtype=pl.Float64).alias("floor_flops"))
    out = frame.select(cols)
    mem = pl.col("floor_bytes") / (device.bandwidth_tbs * 1e6)
    comp = pl.col("floor_flops") / (rate * 1e6) if rate else pl.lit(None, dtype=pl.Float64)
    out = out.with_columns(
        pl.max_horizontal(mem, comp.fill_null(0.0)).alias("floor_us"),
        pl.when(comp.fill_null(0.0) > mem)
        .then(pl.lit("compute"))
        .otherwise(pl.lit("memory"))
        .alias("floor_bound"),
    )
    if formula is not None:
        notes.append(f"FLOPs = {formula.expression} ({formula.source}); rate {rate} TFLOP/s")
    else:
        notes.append(f"no FLOP count for op_type {definition.op_type!r}: memory floor only")
    return out, notes


def speed_of_light_pct(latency_ms: float | None, floor_us: float | None) -> float | None:
    """Speed-of-light percent, 100 * floor / latency: 100 = at the floor, 25 = the floor is a
    quarter of the latency (4x the floor). None when either is unknown or not positive."""
    if latency_ms is None or floor_us is None or floor_us <= 0 or latency_ms <= 0:
        return None
    return 100.0 * floor_us / (latency_ms * 1000.0)


def format_speed_of_light(pct: float | None) -> str:
    """A speed-of-light percent for a table: ``-`` when unknown, one decimal under 10
    (``7.9%``), none from 10 up (``25%``)."""
    if pct is None or not math.isfinite(pct):
        return "-"
    return f"{pct:.1f}%" if abs(pct) < 10 else f"{pct:.0f}%"


def pct_of_floor(latency_ms: float | None, floor_us: float | None) -> float | None:
    """The older, inverse ratio: 100 * latency / floor (100 = at the floor; 120 = 1.2x the
    floor). None when unknown. fibtui's reports show :func:`speed_of_light_pct`; this stays for
    library callers of the old ratio."""
    if latency_ms is None or floor_us is None or floor_us <= 0:
        return None
    return 100.0 * latency_ms * 1000.0 / floor_us


def annotate_rows(
    definition: Definition,
    rows: Iterable[Any],
    device: Device,
    axes_of: Callable[[str], Mapping[str, int] | None] | None = None,
    present_of: Callable[[str], Iterable[str] | None] | None = None,
) -> list[dict[str, Any]]:
    """Each result row as a dict plus ``floor_bytes``, ``floor_us``, ``floor_bound`` and
    ``speed_of_light_pct`` (100 * floor / latency; null when the row's axes are unknown or it has
    no latency)."""
    out: list[dict[str, Any]] = []
    for r in rows:
        d = r.to_json() if hasattr(r, "to_json") else dict(r)
        axes = d.get("axes") or (axes_of(d["uuid"]) if axes_of else None)
        f = None
        if axes is not None and all(a in axes for a in definition.var_axes):
            f = floor(definition, axes, device, present_of(d["uuid"]) if present_of else None)
        d["floor_bytes"] = f.bytes if f else None
        d["floor_us"] = f.floor_us if f else None
        d["floor_bound"] = f.bound if f else None
        d["speed_of_light_pct"] = speed_of_light_pct(d.get("latency_ms"), f.floor_us if f else None)
        out.append(d)
    return out
