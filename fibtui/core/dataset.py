"""Readers for the FlashInfer-Trace dataset layout: definitions, workloads, solutions, traces.

Tolerant of extra fields, strict on required ones: every rejection is an :class:`InputError` that
names the file, the line (JSONL) and the field. Workload files are read through polars with a
schema derived from the definition (100,000 lines in about a tenth of a second); when that fast
path sees anything odd, the file is re-read line by line to name the exact line and field.
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, Literal, overload

import polars as pl

from fibtui.core.dtypes import KNOWN_DTYPES
from fibtui.core.errors import InputError
from fibtui.core.fsio import read_input, read_input_text
from fibtui.core.measurement import Measurement
from fibtui.core.status import ALL_STATUSES

# --------------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    name: str
    kind: str  # "const" | "var"
    value: int | None = None
    description: str | None = None


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[str, ...] | None  # None: a scalar
    dtype: str
    optional: bool = False
    description: str | None = None

    @property
    def is_scalar(self) -> bool:
        return self.shape is None


@dataclass
class Definition:
    name: str
    op_type: str
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    description: str | None = None
    tags: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    path: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def var_axes(self) -> list[str]:
        return [a.name for a in self.axes.values() if a.kind == "var"]

    @property
    def const_axes(self) -> dict[str, int]:
        return {
            a.name: int(a.value)
            for a in self.axes.values()
            if a.kind == "const" and a.value is not None
        }

    def axis_values(self, workload_axes: dict[str, int]) -> dict[str, int]:
        """Every axis of the definition bound to a number: consts plus the workload's vars."""
        values = dict(self.const_axes)
        for name in self.var_axes:
            if name in workload_axes:
                values[name] = int(workload_axes[name])
        return values

    def shape(self, spec: TensorSpec, workload_axes: dict[str, int]) -> tuple[int, ...] | None:
        if spec.shape is None:
            return None
        values = self.axis_values(workload_axes)
        return tuple(values[a] for a in spec.shape)


@dataclass(frozen=True)
class InputSpec:
    type: str  # random | scalar | safetensors
    value: Any = None
    path: str | None = None
    tensor_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "scalar":
            out["value"] = self.value
        if self.type == "safetensors":
            out["path"] = self.path
            out["tensor_key"] = self.tensor_key
        return out


@dataclass
class Workload:
    uuid: str
    axes: dict[str, int]
    inputs: dict[str, InputSpec]
    definition: str | None = None
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "axes": dict(self.axes),
            "inputs": {k: v.to_json() for k, v in self.inputs.items()},
        }


@dataclass(frozen=True)
class SourceFile:
    path: str
    content: str


@dataclass
class BuildSpec:
    language: str
    entry_point: str
    target_hardware: list[str] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    destination_passing_style: bool = True
    binding: str | None = None

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::", 1)[1]


@dataclass
class Solution:
    name: str
    definition: str
    author: str
    spec: BuildSpec
    sources: list[SourceFile]
    description: str | None = None
    path: Path | None = None

    def to_json(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "language": self.spec.language,
            "target_hardware": list(self.spec.target_hardware),
            "entry_point": self.spec.entry_point,
            "dependencies": list(self.spec.dependencies),
            "destination_passing_style": self.spec.destination_passing_style,
        }
        if self.spec.binding:
            spec["binding"] = self.spec.binding
        out: dict[str, Any] = {
            "name": self.name,
            "definition": self.definition,
            "author": self.author,
            "description": self.description or "",
            "spec": spec,
            "sources": [{"path": s.path, "content": s.content} for s in self.sources],
        }
        return out


@dataclass
class Trace(Measurement):
    """One line of a traces JSONL: a workload, the solution that ran and its evaluation (its
    ``error`` is the last line of the evaluation's log when the status is not PASSED)."""

    definition: str
    workload: Workload
    solution: str | None
    status: str | None
    hardware: str | None = None
    libs: dict[str, str] = field(default_factory=dict)
    timestamp: str | None = None
    log: str = ""
    line: int | None = None


SOLUTION_LANGUAGES = ("python", "triton", "cpp", "cuda", "tilelang", "tvm-ffi", "torch")
INPUT_TYPES = ("random", "scalar", "safetensors")

# --------------------------------------------------------------------------------------------
# Small strict-field helpers
# --------------------------------------------------------------------------------------------


class _Ctx:
    """Where we are while validating: the file, the line and the dotted field path."""

    def __init__(self, path: Path | str | None, line: int | None = None) -> None:
        self.path = path
        self.line = line

    def fail(self, field_name: str | None, message: str) -> InputError:
        return InputError(self.path, message, line=self.line, field=field_name)

    def obj(self, value: Any, name: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(name, f"expected an object, got {_kind(value)}")
        return value

    def req(self, obj: dict[str, Any], key: str, prefix: str = "") -> Any:
        name = f"{prefix}{key}"
        if key not in obj or obj[key] is None:
            raise self.fail(name, "required field is missing")
        return obj[key]

    @overload
    def string(
        self, obj: dict[str, Any], key: str, prefix: str = "", required: Literal[True] = True
    ) -> str: ...

    @overload
    def string(
        self, obj: dict[str, Any], key: str, prefix: str = "", *, required: bool
    ) -> str | None: ...

    def string(
        self, obj: dict[str, Any], key: str, prefix: str = "", required: bool = True
    ) -> str | None:
        name = f"{prefix}{key}"
        if key not in obj or obj[key] is None:
            if required:
                raise self.fail(name, "required field is missing")
            return None
        value = obj[key]
        if not isinstance(value, str):
            raise self.fail(name, f"expected a string, got {_kind(value)}")
        if required and not value.strip():
            raise self.fail(name, "must not be empty")
        return value

    def number(self, obj: dict[str, Any], key: str, prefix: str = "") -> float | None:
        """An error figure: a number, or one of the strings pydantic writes for a non-finite float
        (``"Infinity"``, ``"-Infinity"``, ``"NaN"``: flashinfer-bench's traces of a wrong output)."""
        if key not in obj or obj[key] is None:
            return None
        value = obj[key]
        if isinstance(value, str) and value.strip() in NON_FINITE_STRINGS:
            return NON_FINITE_STRINGS[value.strip()]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{prefix}{key}", f"expected a number, got {_kind(value)}")
        try:
            return float(value)
        except OverflowError:
            raise self.fail(f"{prefix}{key}", "number too large (past a float's range)") from None

    def positive(self, obj: dict[str, Any], key: str, prefix: str = "") -> float | None:
        """An optional latency (or speedup): absent/null is None, and so is a non-finite float
        written as pydantic writes it (``"NaN"``: nothing measured); anything else must be a
        finite, positive, normal number (see :func:`positive_number_problem`)."""
        if key not in obj or obj[key] is None:
            return None
        value = obj[key]
        if isinstance(value, str) and value.strip() in NON_FINITE_STRINGS:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{prefix}{key}", f"expected a number, got {_kind(value)}")
        problem = positive_number_problem(value, key)
        if problem is not None:
            raise self.fail(f"{prefix}{key}", problem)
        return float(value)

    def str_list(self, obj: dict[str, Any], key: str, prefix: str = "") -> list[str]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{prefix}{key}", "expected a list of strings")
        return list(value)


#: how JSON writers spell the floats JSON has no literal for: pydantic's ``ser_json_inf_nan=
#: "strings"`` (flashinfer-bench's Correctness) and Python's repr (fibtui's worker protocol)
NON_FINITE_STRINGS: dict[str, float] = {
    "Infinity": math.inf,
    "-Infinity": -math.inf,
    "NaN": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


#: The largest axis value (and const axis) a workload may name: what a 64-bit signed integer holds
#: (polars, torch and every shape computation work in int64).
MAX_AXIS = 2**63 - 1


def _shown(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _kind(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else f"an integer of {_digits(value)} digits"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value != 0 and abs(value) < sys.float_info.min:
        return f"{value!r} (a subnormal number)"
    return repr(value)


def _digits(value: int) -> int:
    """How many decimal digits ``value`` has (without str(), which refuses over 4300 digits)."""
    n = abs(value)
    digits = max(1, int(n.bit_length() * 0.30102999566398) - 1)
    while n >= 10**digits:
        digits += 1
    return digits


_HUGE_NUMBER = "a number with more than 4300 digits"


def positive_number_problem(value: Any, name: str) -> str | None:
    """None when ``value`` is a finite, positive, normal number (what a latency, a reference latency
    or a speedup must be); else why not, naming ``name`` (``latency_ms must be a finite positive
    number, got NaN``). NaN, infinities, numbers past a float's range (``1e400``, a 400-digit
    integer), zero, negatives and subnormals are all refused: each would poison every statistic."""
    ok = False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            f = float(value)
        except OverflowError:
            f = math.inf
        ok = math.isfinite(f) and f >= sys.float_info.min
    return None if ok else f"{name} must be a finite positive number, got {_shown(value)}"


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _string_end(text: str, start: int) -> int:
    """Index just past the JSON string that opens at ``text[start]`` (a quote)."""
    i = start + 1
    while True:
        j = text.find('"', i)
        if j < 0:
            return len(text)
        backslashes = 0
        k = j - 1
        while k > start and text[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 0:
            return j + 1
        i = j + 1


def find_duplicate_key(text: str) -> tuple[str, int, int] | None:
    """In valid JSON ``text``, the first object that names one key twice: (the dotted path of the
    second occurrence, its 1-based line, the line of the first). None when every key is unique.

    An iterative scan (no recursion, so a deeply nested file costs nothing more), used only after
    the parser found a duplicate, to say where it is."""
    # stack entries: [is_object, keys seen -> line, current key or index, expecting a key]
    stack: list[list[Any]] = []
    path: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            top = stack[-1] if stack else None
            if top is not None and top[0] and top[3]:
                try:
                    key = json.loads(text[i:end])
                except ValueError:
                    key = text[i + 1 : end - 1]
                line = text.count("\n", 0, i) + 1
                if key in top[1]:
                    return ".".join([*path, str(key)]), line, top[1][key]
                top[1][key] = line
                top[2] = str(key)
                top[3] = False
            i = end
            continue
        if c in "{[":
            if stack:
                path.append(str(stack[-1][2]))
            stack.append([c == "{", {}, 0, c == "{"])
        elif c in "}]":
            if stack:
                stack.pop()
            if path and stack:
                path.pop()
        elif c == "," and stack:
            top = stack[-1]
            if top[0]:
                top[3] = True
            else:
                top[2] += 1
        i += 1
    return None


def read_json_file(path: Path, *, unique_keys: bool = False) -> Any:
    """Parse a whole JSON file; a syntax error names the line. A UTF-8 byte-order mark at the start
    is accepted. With ``unique_keys``, an object naming one key twice is refused (Python's json
    would keep the last one silently: two results for one workload, one of them dropped)."""
    return parse_json_text(path, read_input_text(path), unique_keys=unique_keys)


def parse_json_text(path: Path, text: str, *, unique_keys: bool = False) -> Any:
    """:func:`read_json_file` of a file's text already read (``path`` names it in errors)."""
    if not text.strip():
        raise InputError(path, "file is empty")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys if unique_keys else None)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"not valid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno
        ) from None
    except _DuplicateKey as exc:
        where = find_duplicate_key(text)
        if where is None:  # not expected: the parser saw a duplicate
            raise InputError(
                path,
                f"key {exc.key!r} appears twice in one object (two runs concatenated?)",
                field=exc.key,
            ) from None
        dotted, line, first = where
        raise InputError(
            path,
            f"a second entry with this key in one object (first on line {first}; "
            "two runs concatenated?)",
            line=line,
            field=dotted,
        ) from None
    except (
        ValueError
    ):  # json refuses integers of more than 4300 digits (sys.get_int_max_str_digits)
        raise InputError(path, f"not valid JSON: {_HUGE_NUMBER}") from None
    except RecursionError:
        raise InputError(path, "not valid JSON: nested too deeply") from None


def iter_jsonl(path: Path, data: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for each non-blank line; a bad line names itself."""
    if data is None:
        data = read_input(path)
    total = data.count(b"\n") + 1
    # one line at a time (a 100,000-line file is never held twice, as bytes and as lines)
    start, number = 0, 0
    while start <= len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        raw = data[start:end]
        start, number = end + 1, number + 1
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text", line=number) from None
        except json.JSONDecodeError as exc:
            hint = " (truncated line?)" if number == total or exc.pos >= len(raw.strip()) else ""
            raise InputError(path, f"not valid JSON: {exc.msg}{hint}", line=number) from None
        except ValueError:
            raise InputError(path, f"not valid JSON: {_HUGE_NUMBER}", line=number) from None
        except RecursionError:
            raise InputError(path, "not valid JSON: nested too deeply", line=number) from None
        if not isinstance(obj, dict):
            raise InputError(path, f"expected a JSON object, got {_kind(obj)}", line=number)
        yield number, obj


# --------------------------------------------------------------------------------------------
# Definitions
# --------------------------------------------------------------------------------------------


def _tensor_specs(
    ctx: _Ctx, obj: dict[str, Any], key: str, axes: dict[str, Axis]
) -> dict[str, TensorSpec]:
    raw = ctx.obj(ctx.req(obj, key), key)
    specs: dict[str, TensorSpec] = {}
    for name, spec in raw.items():
        prefix = f"{key}.{name}."
        spec = ctx.obj(spec, f"{key}.{name}")
        if "shape" not in spec:
            raise ctx.fail(f"{prefix}shape", "required field is missing (null for a scalar)")
        shape = spec["shape"]
        if shape is not None:
            if not isinstance(shape, list) or not all(isinstance(a, str) and a for a in shape):
                raise ctx.fail(f"{prefix}shape", "expected a list of axis names or null")
            for axis in shape:
                if axis not in axes:
                    raise ctx.fail(f"{prefix}shape", f"names axis '{axis}', which is not in 'axes'")
        dtype = ctx.string(spec, "dtype", prefix)
        if dtype not in KNOWN_DTYPES:
            raise ctx.fail(f"{prefix}dtype", f"unknown dtype '{dtype}'")
        optional = spec.get("optional", False)
        if not isinstance(optional, bool):
            raise ctx.fail(f"{prefix}optional", f"expected true or false, got {_kind(optional)}")
        specs[name] = TensorSpec(
            name=name,
            shape=tuple(shape) if shape is not None else None,
            dtype=dtype,
            optional=optional,
            description=spec.get("description")
            if isinstance(spec.get("description"), str)
            else None,
        )
    return specs


def parse_definition(obj: Any, path: Path | str | None = None) -> Definition:
    ctx = _Ctx(path)
    obj = ctx.obj(obj, "<root>")
    name = ctx.string(obj, "name")
    op_type = ctx.string(obj, "op_type")
    raw_axes = ctx.obj(ctx.req(obj, "axes"), "axes")
    axes: dict[str, Axis] = {}
    for axis_name, spec in raw_axes.items():
        prefix = f"axes.{axis_name}."
        spec = ctx.obj(spec, f"axes.{axis_name}")
        kind = ctx.string(spec, "type", prefix)
        if kind == "const":
            value = ctx.req(spec, "value", prefix)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ctx.fail(f"{prefix}value", f"expected a non-negative integer, got {value!r}")
            if value > MAX_AXIS:
                raise ctx.fail(
                    f"{prefix}value",
                    f"{_shown(value)} is too large for an axis (at most 2**63 - 1)",
                )
            axes[axis_name] = Axis(axis_name, "const", value, spec.get("description"))
        elif kind == "var":
            axes[axis_name] = Axis(axis_name, "var", None, spec.get("description"))
        else:
            raise ctx.fail(f"{prefix}type", f"expected 'const' or 'var', got {kind!r}")
    inputs = _tensor_specs(ctx, obj, "inputs", axes)
    outputs = _tensor_specs(ctx, obj, "outputs", axes)
    overlap = set(inputs) & set(outputs)
    if overlap:
        raise ctx.fail("outputs", f"names also used by inputs: {', '.join(sorted(overlap))}")
    reference = ctx.string(obj, "reference")
    try:
        module = ast.parse(reference, mode="exec")
    except SyntaxError as exc:
        raise ctx.fail(
            "reference", f"not valid Python: {exc.msg} (reference line {exc.lineno})"
        ) from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in module.body):
        raise ctx.fail("reference", "must define a top-level function 'run'")
    constraints = ctx.str_list(obj, "constraints")
    for i, expr in enumerate(constraints):
        try:
            ast.parse(expr, mode="eval")
        except SyntaxError:
            raise ctx.fail(
                f"constraints[{i}]", f"not a valid Python expression: {expr!r}"
            ) from None
    description = obj.get("description")
    return Definition(
        name=name,
        op_type=op_type,
        axes=axes,
        inputs=inputs,
        outputs=outputs,
        reference=reference,
        description=description if isinstance(description, str) else None,
        tags=ctx.str_list(obj, "tags"),
        constraints=constraints,
        path=Path(path) if path is not None else None,
        raw=obj,
    )


def load_definition(path: str | Path) -> Definition:
    path = Path(path)
    return parse_definition(read_json_file(path), path)


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


def parse_workload(
    ctx: _Ctx, obj: dict[str, Any], definition: Definition | None, prefix: str = "workload."
) -> Workload:
    """Validate one workload object (the value of a JSONL line's ``workload`` field)."""
    uuid = ctx.string(obj, "uuid", prefix)
    axes_raw = ctx.obj(ctx.req(obj, "axes", prefix), f"{prefix}axes")
    axes: dict[str, int] = {}
    for axis, value in axes_raw.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ctx.fail(
                f"{prefix}axes.{axis}", f"expected a non-negative integer, got {_kind(value)}"
            )
        if value < 0:
            raise ctx.fail(f"{prefix}axes.{axis}", f"expected a non-negative integer, got {value}")
        if value > MAX_AXIS:
            raise ctx.fail(
                f"{prefix}axes.{axis}",
                f"{_shown(value)} is too large for an axis (at most 2**63 - 1)",
            )
        axes[axis] = value
    inputs_raw = ctx.obj(ctx.req(obj, "inputs", prefix), f"{prefix}inputs")
    inputs: dict[str, InputSpec] = {}
    for name, spec in inputs_raw.items():
        where = f"{prefix}inputs.{name}"
        spec = ctx.obj(spec, where)
        kind = ctx.string(spec, "type", where + ".")
        if kind not in INPUT_TYPES:
            raise ctx.fail(
                f"{where}.type", f"expected one of {', '.join(INPUT_TYPES)}, got {kind!r}"
            )
        if kind == "scalar":
            if "value" not in spec:
                raise ctx.fail(f"{where}.value", "required field is missing")
            value = spec["value"]
            if not isinstance(value, (int, float, bool)):
                raise ctx.fail(
                    f"{where}.value", f"expected a number or boolean, got {_kind(value)}"
                )
            inputs[name] = InputSpec("scalar", value=value)
        elif kind == "safetensors":
            p = safe_relative_path(
                ctx, ctx.string(spec, "path", where + "."), f"{where}.path"
            )  # inside the dataset root
            key = ctx.string(spec, "tensor_key", where + ".")
            inputs[name] = InputSpec("safetensors", path=p, tensor_key=key)
        else:
            inputs[name] = InputSpec("random")
    if definition is not None:
        for axis in definition.var_axes:
            if axis not in axes:
                raise ctx.fail(
                    f"{prefix}axes.{axis}", f"missing (a variable axis of {definition.name})"
                )
        for name in inputs:
            if name not in definition.inputs:
                raise ctx.fail(f"{prefix}inputs.{name}", f"not an input of {definition.name}")
    return Workload(uuid=uuid, axes=axes, inputs=inputs, line=ctx.line)


class WorkloadSet:
    """The workloads of one definition: a polars table of uuid + axes, exact lines on demand."""

    def __init__(
        self,
        definition: str,
        frame: pl.DataFrame,
        axis_names: list[str],
        path: Path | None = None,
        data: bytes | None = None,
        parsed: dict[str, Workload] | None = None,
        definition_obj: Definition | None = None,
    ) -> None:
        self.definition = definition
        self.frame = frame  # columns: uuid, line, <axis names...>
        self.axis_names = axis_names
        self.path = path
        self._data = data
        self._parsed: dict[str, Workload] = dict(parsed or {})
        self._definition_obj = definition_obj

    def __len__(self) -> int:
        return self.frame.height

    @cached_property
    def uuids(self) -> list[str]:
        return self.frame.get_column("uuid").to_list()

    @cached_property
    def _row_of(self) -> dict[str, int]:
        return {u: i for i, u in enumerate(self.uuids)}

    def __contains__(self, uuid: str) -> bool:
        return uuid in self._row_of

    def axes_of(self, uuid: str) -> dict[str, int]:
        row = self.frame.row(self._row_of[uuid], named=True)
        return {a: int(row[a]) for a in self.axis_names if row[a] is not None}

    @cached_property
    def _lines(self) -> list[bytes]:
        return (self._data or b"").split(b"\n")

    def get(self, uuid: str) -> Workload:
        """The full workload (inputs included), validated strictly from its own line."""
        if uuid in self._parsed:
            return self._parsed[uuid]
        if uuid not in self._row_of:
            raise KeyError(uuid)
        line_no = int(self.frame.get_column("line")[self._row_of[uuid]])
        ctx = _Ctx(self.path, line_no)
        try:
            obj = json.loads(self._lines[line_no - 1])
        except (
            ValueError,
            RecursionError,
        ) as exc:  # JSONDecodeError, UnicodeDecodeError, a huge number
            raise ctx.fail(None, f"not valid JSON: {exc}") from None
        workload = parse_workload(
            ctx, ctx.obj(obj.get("workload"), "workload"), self._definition_obj
        )
        workload.definition = self.definition
        self._parsed[uuid] = workload
        return workload

    def __iter__(self) -> Iterator[Workload]:
        for uuid in self.uuids:
            yield self.get(uuid)

    def validate_all(self) -> None:
        """Strictly validate every line (what ``fibtui check`` runs)."""
        for _ in self:
            pass


def _axis_names_guess(data: bytes) -> list[str]:
    for raw in data.split(b"\n"):
        if raw.strip():
            try:
                obj = json.loads(raw)
                axes = obj["workload"]["axes"]
                if isinstance(axes, dict):
                    return list(axes)
            except Exception:  # the strict path will name the problem
                return []
            return []
    return []


_NON_STRING_UUID = re.compile(rb'"uuid"\s*:\s*[^"\s]')


def _fast_workloads(
    data: bytes, definition: Definition | None, axis_names: list[str], def_name: str
) -> pl.DataFrame | None:
    """Read uuid + axes with polars; None when anything looks off (the strict path takes over)."""
    if not axis_names:
        return None
    if _NON_STRING_UUID.search(data):
        return None  # polars would turn a number into a string; the strict path refuses it
    # Inputs stay out of the schema (nested structs cost polars ten times more); each workload's
    # inputs are validated strictly from its own line when it is used, and by validate_all().
    workload_fields: dict[str, Any] = {
        "uuid": pl.String,
        "axes": pl.Struct({a: pl.Int64 for a in axis_names}),
    }
    schema: dict[str, Any] = {"definition": pl.String, "workload": pl.Struct(workload_fields)}
    try:
        df = pl.read_ndjson(io.BytesIO(data), schema=schema)
    except Exception:
        return None
    if df.height == 0:
        return None
    w = pl.col("workload")
    cols = [w.struct.field("uuid").alias("uuid")]
    cols += [w.struct.field("axes").struct.field(a).alias(a) for a in axis_names]
    out = df.select([pl.col("definition"), *cols])
    # Anything the strict path must explain: missing/empty uuids, missing or negative axes,
    # another definition's lines, duplicates, bad input types.
    bad = out.select(
        (pl.col("uuid").is_null() | (pl.col("uuid").str.len_chars() == 0)).any().alias("uuid"),
        pl.any_horizontal([pl.col(a).is_null() | (pl.col(a) < 0) for a in axis_names])
        .any()
        .alias("axes"),
        (pl.col("definition").is_null() | (pl.col("definition") != def_name))
        .any()
        .alias("definition"),
        pl.col("uuid").is_duplicated().any().alias("dup"),
    ).row(0)
    if any(bad):
        return None
    return out.drop("definition")


def _content_end(data: bytes) -> int:
    """Index just past the last non-whitespace byte, without copying the buffer."""
    end = len(data)
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    return end


def load_workloads(path: str | Path, definition: Definition | None = None) -> WorkloadSet:
    """Read a workloads JSONL. With a definition, its variable axes must be on every line."""
    path = Path(path)
    data = read_input(path)
    if not data.strip():
        raise InputError(path, "file is empty (no workloads)")
    def_name = definition.name if definition else None
    axis_names = definition.var_axes if definition else _axis_names_guess(data)
    if def_name is None:
        first = next(iter_jsonl(path, data.split(b"\n", 1)[0] + b"\n"), None)
        def_name = first[1].get("definition") if first else None
    body_end = _content_end(data)
    blank_inside = 0 <= data.find(b"\n\n") < body_end - 1 or data[:1] == b"\n"
    if isinstance(def_name, str) and not blank_inside:
        frame = _fast_workloads(data, definition, axis_names, def_name)
        if frame is not None and frame.height == data.count(b"\n", 0, body_end) + 1:
            frame = frame.with_row_index("line", offset=1).with_columns(
                pl.col("line").cast(pl.Int64)
            )
            frame = frame.select(["uuid", "line", *axis_names])
            return WorkloadSet(def_name, frame, axis_names, path, data, definition_obj=definition)
    # Strict path: line by line, naming the first problem exactly.
    parsed: dict[str, Workload] = {}
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for number, obj in iter_jsonl(path, data):
        ctx = _Ctx(path, number)
        name = ctx.string(obj, "definition")
        if def_name is None:
            def_name = name
        if name != def_name:
            raise ctx.fail("definition", f"is {name!r}, but this file holds {def_name!r}")
        workload = parse_workload(ctx, ctx.obj(ctx.req(obj, "workload"), "workload"), definition)
        if workload.uuid in seen:
            raise ctx.fail(
                "workload.uuid",
                f"duplicate uuid {workload.uuid} (first on line {seen[workload.uuid]})",
            )
        seen[workload.uuid] = number
        workload.definition = name
        parsed[workload.uuid] = workload
        rows.append(
            {"uuid": workload.uuid, "line": number, **{a: workload.axes.get(a) for a in axis_names}}
        )
    if not rows:
        raise InputError(path, "no workloads in file")
    schema = {"uuid": pl.String, "line": pl.Int64, **{a: pl.Int64 for a in axis_names}}
    frame = pl.DataFrame(rows, schema=schema)
    return WorkloadSet(def_name or "", frame, axis_names, path, data, parsed, definition)


# --------------------------------------------------------------------------------------------
# Solutions
# --------------------------------------------------------------------------------------------


def safe_relative_path(ctx: _Ctx, rel: str, field_name: str) -> str:
    """Refuse absolute paths and parent traversal in solution sources."""
    p = PurePosixPath(rel.replace("\\", "/"))
    if p.is_absolute() or rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":"):
        raise ctx.fail(field_name, f"absolute path not allowed: {rel!r}")
    if any(part == ".." for part in p.parts):
        raise ctx.fail(field_name, f"parent-folder traversal not allowed: {rel!r}")
    if not p.parts or str(p) == "." or rel.endswith(("/", "\\")):
        raise ctx.fail(field_name, f"not a file path: {rel!r}")
    if any(ord(c) < 32 for c in rel) or any(len(part) > 255 for part in p.parts):
        raise ctx.fail(field_name, f"control characters or an over-long name in {rel!r}")
    return str(p)


def parse_solution(obj: Any, path: Path | str | None = None) -> Solution:
    ctx = _Ctx(path)
    obj = ctx.obj(obj, "<root>")
    name = ctx.string(obj, "name")
    definition = ctx.string(obj, "definition")
    author = ctx.string(obj, "author")
    spec_raw = ctx.obj(ctx.req(obj, "spec"), "spec")
    language = ctx.string(spec_raw, "language", "spec.")
    if language not in SOLUTION_LANGUAGES:
        raise ctx.fail(
            "spec.language", f"expected one of {', '.join(SOLUTION_LANGUAGES)}, got {language!r}"
        )
    entry = ctx.string(spec_raw, "entry_point", "spec.")
    if entry.count("::") != 1 or not all(entry.split("::")):
        raise ctx.fail("spec.entry_point", f"expected 'file::function', got {entry!r}")
    dps = spec_raw.get("destination_passing_style", True)
    if not isinstance(dps, bool):
        raise ctx.fail(
            "spec.destination_passing_style", f"expected true or false, got {_kind(dps)}"
        )
    binding = spec_raw.get("binding")
    if binding is not None and not isinstance(binding, str):
        raise ctx.fail("spec.binding", f"expected a string, got {_kind(binding)}")
    sources_raw = ctx.req(obj, "sources")
    if not isinstance(sources_raw, list) or not sources_raw:
        raise ctx.fail("sources", "expected a non-empty list of {path, content}")
    sources: list[SourceFile] = []
    for i, src in enumerate(sources_raw):
        src = ctx.obj(src, f"sources[{i}]")
        rel = ctx.string(src, "path", f"sources[{i}].")
        content = src.get("content")
        if not isinstance(content, str):
            raise ctx.fail(f"sources[{i}].content", f"expected a string, got {_kind(content)}")
        clean = safe_relative_path(ctx, rel, f"sources[{i}].path")
        earlier = {s.path for s in sources}
        if clean in earlier:
            raise ctx.fail(f"sources[{i}].path", f"duplicate source path {clean!r}")
        folders = {
            "/".join(s.path.split("/")[:k])
            for s in sources
            for k in range(1, s.path.count("/") + 1)
        }
        if clean in folders or any(clean.startswith(e + "/") for e in earlier):
            raise ctx.fail(
                f"sources[{i}].path", f"{clean!r} is both a file and a folder among the sources"
            )
        sources.append(SourceFile(clean, content))
    entry_file = entry.split("::", 1)[0]
    if entry_file not in {s.path for s in sources}:
        raise ctx.fail("spec.entry_point", f"file {entry_file!r} is not among the sources")
    return Solution(
        name=name,
        definition=definition,
        author=author,
        spec=BuildSpec(
            language=language,
            entry_point=entry,
            target_hardware=ctx.str_list(spec_raw, "target_hardware", "spec."),
            dependencies=ctx.str_list(spec_raw, "dependencies", "spec."),
            destination_passing_style=dps,
            binding=binding,
        ),
        sources=sources,
        description=obj.get("description") if isinstance(obj.get("description"), str) else None,
        path=Path(path) if path is not None else None,
    )


def load_solution(path: str | Path) -> Solution:
    path = Path(path)
    return parse_solution(read_json_file(path), path)


# --------------------------------------------------------------------------------------------
# Traces
# --------------------------------------------------------------------------------------------


def parse_trace_line(ctx: _Ctx, obj: dict[str, Any]) -> Trace:
    definition = ctx.string(obj, "definition")
    workload = parse_workload(ctx, ctx.obj(ctx.req(obj, "workload"), "workload"), None)
    workload.definition = definition
    solution = ctx.string(obj, "solution", required=False)
    evaluation = obj.get("evaluation")
    trace = Trace(
        definition=definition, workload=workload, solution=solution, status=None, line=ctx.line
    )
    if evaluation is None:
        return trace
    ev = ctx.obj(evaluation, "evaluation")
    status = ctx.string(ev, "status", "evaluation.")
    if status not in ALL_STATUSES:
        raise ctx.fail("evaluation.status", f"unknown status {status!r}")
    trace.status = status
    env = ev.get("environment")
    if isinstance(env, dict):
        hw = env.get("hardware")
        trace.hardware = hw if isinstance(hw, str) else None
        libs = env.get("libs")
        if isinstance(libs, dict):
            trace.libs = {str(k): str(v) for k, v in libs.items()}
    ts = ev.get("timestamp")
    trace.timestamp = ts if isinstance(ts, str) else None
    log = ev.get("log")
    trace.log = log if isinstance(log, str) else ""
    if status != "PASSED" and trace.log.strip():
        trace.error = trace.log.strip().splitlines()[-1][:300]
    corr = ev.get("correctness")
    if corr is not None:
        corr = ctx.obj(corr, "evaluation.correctness")
        trace.max_abs_error = ctx.number(corr, "max_absolute_error", "evaluation.correctness.")
        trace.max_rel_error = ctx.number(corr, "max_relative_error", "evaluation.correctness.")
    perf = ev.get("performance")
    if perf is not None:
        perf = ctx.obj(perf, "evaluation.performance")
        trace.latency_ms = ctx.positive(perf, "latency_ms", "evaluation.performance.")
        if _baseline_not_profiled(perf):
            # flashinfer-bench run --no-profile-baseline writes 0.0 for both: nothing measured
            trace.reference_latency_ms = trace.speedup = None
        else:
            trace.reference_latency_ms = ctx.positive(
                perf, "reference_latency_ms", "evaluation.performance."
            )
            trace.speedup = ctx.positive(perf, "speedup_factor", "evaluation.performance.")
    if status == "PASSED" and trace.latency_ms is None:
        raise ctx.fail(
            "evaluation.performance.latency_ms", "a PASSED evaluation must carry a latency"
        )
    return trace


def _baseline_not_profiled(perf: dict[str, Any]) -> bool:
    """Does a trace's ``performance`` say the reference went untimed: a reference latency of
    exactly zero, with a speedup of zero or none (flashinfer-bench's --no-profile-baseline)?"""
    ref, speedup = perf.get("reference_latency_ms"), perf.get("speedup_factor")

    def zero(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0

    return zero(ref) and (speedup is None or zero(speedup))


_FLOAT_MIN = sys.float_info.min


def _fast_positive(perf: dict[str, Any], key: str) -> float | None | bool:
    """A latency read the quick way: the float, None when absent, False when it needs the strict
    reader (a non-float, a non-finite or non-positive value, a string)."""
    v = perf.get(key)
    if v is None:
        return None
    if type(v) is float and _FLOAT_MIN <= v < math.inf:
        return v
    return False


def _fast_trace(obj: dict[str, Any], line: int) -> Trace | None:
    """:func:`parse_trace_line` for the common, well-formed line (strings where strings belong,
    integer axes, random or scalar inputs, float figures), the same :class:`Trace` without the
    field-by-field checks; None for anything else, which the strict reader then reads (and
    refuses, naming the field, when it is wrong). It keeps a 100,000-line file a matter of
    seconds."""
    definition = obj.get("definition")
    wl = obj.get("workload")
    solution = obj.get("solution")
    ev = obj.get("evaluation")
    if (
        type(definition) is not str
        or not definition.strip()
        or type(wl) is not dict
        or (solution is not None and type(solution) is not str)
        or type(ev) is not dict
    ):
        return None
    uuid, axes, inputs_raw = wl.get("uuid"), wl.get("axes"), wl.get("inputs")
    if (
        type(uuid) is not str
        or not uuid.strip()
        or type(axes) is not dict
        or type(inputs_raw) is not dict
    ):
        return None
    for value in axes.values():
        if type(value) is not int or not 0 <= value <= MAX_AXIS:
            return None
    inputs: dict[str, InputSpec] = {}
    for name, spec in inputs_raw.items():
        if type(spec) is not dict:
            return None
        kind = spec.get("type")
        if kind == "random":
            inputs[name] = InputSpec("random")
        elif kind == "scalar" and type(spec.get("value")) in (int, float, bool):
            inputs[name] = InputSpec("scalar", value=spec["value"])
        else:
            return None
    status = ev.get("status")
    if type(status) is not str or status not in ALL_STATUSES:
        return None
    env, ts, log = ev.get("environment"), ev.get("timestamp"), ev.get("log")
    if (
        (env is not None and type(env) is not dict)
        or (ts is not None and type(ts) is not str)
        or (log is not None and type(log) is not str)
    ):
        return None
    corr, perf = ev.get("correctness"), ev.get("performance")
    abs_err = rel_err = None
    if corr is not None:
        if type(corr) is not dict:
            return None
        abs_err, rel_err = corr.get("max_absolute_error"), corr.get("max_relative_error")
        if (abs_err is not None and type(abs_err) is not float) or (
            rel_err is not None and type(rel_err) is not float
        ):
            return None
    lat = ref = spd = None
    if perf is not None:
        if type(perf) is not dict:
            return None
        lat, ref, spd = (
            _fast_positive(perf, "latency_ms"),
            _fast_positive(perf, "reference_latency_ms"),
            _fast_positive(perf, "speedup_factor"),
        )
        if lat is False or ref is False or spd is False:
            return None
    if status == "PASSED" and lat is None:
        return None  # the strict reader says why
    workload = Workload(uuid=uuid, axes=dict(axes), inputs=inputs, line=line)
    workload.definition = definition
    trace = Trace(
        definition=definition, workload=workload, solution=solution, status=status, line=line
    )
    if env is not None:
        hw = env.get("hardware")
        trace.hardware = hw if isinstance(hw, str) else None
        libs = env.get("libs")
        if isinstance(libs, dict):
            trace.libs = {str(k): str(v) for k, v in libs.items()}
    trace.timestamp = ts
    trace.log = log or ""
    if status != "PASSED" and trace.log.strip():
        trace.error = trace.log.strip().splitlines()[-1][:300]
    trace.max_abs_error, trace.max_rel_error = abs_err, rel_err
    trace.latency_ms, trace.reference_latency_ms, trace.speedup = lat, ref, spd
    return trace


def load_traces(path: str | Path) -> list[Trace]:
    """Every evaluation of a traces JSONL, the newest of each (solution, workload, device)
    (:func:`read_traces`)."""
    return read_traces(path)[0]


def read_traces(path: str | Path) -> tuple[list[Trace], list[str]]:
    """Every line of a traces JSONL, and notes on what was left aside. flashinfer-bench appends
    each run's evaluations to ``traces/<author>/<op_type>/<definition>.jsonl``, so one file can
    hold several runs of one solution on one workload (and one device): the newest evaluation
    (its timestamp, else the later line) is read, and a note says which lines it replaced."""
    path = Path(path)
    traces: list[Trace | None] = []
    newest: dict[tuple[str, str, str | None, str | None], int] = {}
    superseded: list[int] = []
    for n, obj in iter_jsonl(path):
        trace = _fast_trace(obj, n) or parse_trace_line(_Ctx(path, n), obj)
        if trace.status is not None:
            key = (trace.definition, trace.workload.uuid, trace.solution, trace.hardware)
            if key in newest:
                old = traces[newest[key]]
                assert old is not None
                if (trace.timestamp or "") >= (old.timestamp or ""):
                    superseded.append(old.line or 0)
                    traces[newest[key]] = None
                else:
                    superseded.append(n)
                    continue
            newest[key] = len(traces)
        traces.append(trace)
    kept = [t for t in traces if t is not None]
    if not kept:
        raise InputError(path, "file is empty (no traces)")
    notes = []
    if superseded:
        lines = ", ".join(str(n) for n in sorted(superseded)[:8])
        more = f" and {len(superseded) - 8} more" if len(superseded) > 8 else ""
        notes.append(
            f"{len(superseded)} older evaluation(s) of a solution on a workload replaced by a "
            f"newer one (flashinfer-bench appends each run to its traces file): lines {lines}{more}"
        )
    return kept, notes


# --------------------------------------------------------------------------------------------
# The dataset folder
# --------------------------------------------------------------------------------------------


class Dataset:
    """A FlashInfer-Trace folder: definitions/, workloads/, solutions/, traces/ (all optional but
    definitions/)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._definitions: dict[str, Definition] = {}
        self._workloads: dict[str, WorkloadSet] = {}

    @cached_property
    def definition_paths(self) -> dict[str, Path]:
        folder = self.root / "definitions"
        if not folder.is_dir():
            return {}
        return {p.stem: p for p in self._checked(sorted(folder.rglob("*.json")))}

    def _checked(self, paths: list[Path]) -> list[Path]:
        """``paths`` when none is a link out of the dataset folder (fibtui.core.safetree); else
        one line naming the link and its target."""
        from fibtui.core.safetree import check_links

        check_links(self.root, paths)
        return paths

    @property
    def definition_names(self) -> list[str]:
        return list(self.definition_paths)

    def definition(self, name: str) -> Definition:
        if name not in self._definitions:
            path = self.definition_paths.get(name)
            if path is None:
                raise InputError(self.root / "definitions", f"no definition named {name!r}")
            definition = load_definition(path)
            if definition.name != name:
                raise InputError(
                    path,
                    f"declares name {definition.name!r}, but the file is named {name}.json",
                    field="name",
                )
            self._definitions[name] = definition
        return self._definitions[name]

    def workloads_path(self, name: str) -> Path | None:
        folder = self.root / "workloads"
        if not folder.is_dir():
            return None
        found = self._checked(sorted(folder.rglob(f"{name}.jsonl")))
        return found[0] if found else None

    def workloads(self, name: str) -> WorkloadSet:
        if name not in self._workloads:
            path = self.workloads_path(name)
            if path is None:
                raise InputError(self.root / "workloads", f"no workloads file {name}.jsonl")
            self._workloads[name] = load_workloads(path, self.definition(name))
        return self._workloads[name]

    def solution_paths(self) -> list[Path]:
        folder = self.root / "solutions"
        return self._checked(sorted(folder.rglob("*.json"))) if folder.is_dir() else []

    def solutions(self, definition: str | None = None) -> list[Solution]:
        out = [load_solution(p) for p in self.solution_paths()]
        return [s for s in out if definition is None or s.definition == definition]
