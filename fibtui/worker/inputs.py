"""Inputs from a workload: random by dtype (seeded, reproducible), scalars, safetensors.

Safetensors inputs are read once per worker and kept on the device (each input set gets a
device-side copy, so a kernel that writes into its inputs cannot change the next one). Structured
inputs a workload leaves random (sequence boundaries, lengths, page tables, token indices, FP8
scales) are made consistent with the axes (fibtui.worker.structured), and the definition's
evaluator may prepare the rest as the official one does (fibtui.worker.evaluators).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fibtui.worker import structured

DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
if hasattr(torch, "float4_e2m1fn_x2"):
    DTYPES["float4_e2m1"] = torch.float4_e2m1fn_x2
    DTYPES["float4_e2m1fn_x2"] = torch.float4_e2m1fn_x2
if hasattr(torch, "float8_e8m0fnu"):
    DTYPES["float8_e8m0fnu"] = torch.float8_e8m0fnu

_INT_RANGES = {
    torch.int8: (-128, 128),
    torch.int16: (-1024, 1024),
    torch.int32: (-1024, 1024),
    torch.int64: (-1024, 1024),
    torch.uint8: (0, 256),
}

#: every dtype of the safetensors format, as torch (and the safetensors package) reads it; the
#: ones this torch lacks are named when met (:data:`_ST_MISSING`)
_ST_NAMES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",  # the MX formats' shared exponent (Blackwell block scales)
    "F4": "float4_e2m1fn_x2",  # two values a byte: the file's shape counts values
    "C64": "complex64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U64": "uint64",
    "U32": "uint32",
    "U16": "uint16",
    "U8": "uint8",
    "BOOL": "bool",
}
_ST_DTYPES: dict[str, torch.dtype] = {
    key: getattr(torch, name) for key, name in _ST_NAMES.items() if hasattr(torch, name)
}
_ST_MISSING = {
    "F6_E2M3": "6-bit floats, which torch has no dtype for",
    "F6_E3M2": "6-bit floats, which torch has no dtype for",
    **{
        key: f"this torch ({torch.__version__}) has no {name}"
        for key, name in _ST_NAMES.items()
        if key not in _ST_DTYPES
    },
}


class InputErrorW(Exception):
    """A workload whose inputs cannot be made (reported as an infrastructure failure)."""


def torch_dtype(name: str) -> torch.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise InputErrorW(f"dtype {name!r} is not supported by this torch build") from None


def seed_for(uuid: str, trial: int, base_seed: int = 0) -> int:
    return (zlib.crc32(uuid.encode()) * 1_000_003 + trial * 7919 + base_seed) % (2**62)


def _random(
    shape: list[int] | tuple[int, ...],
    dtype: torch.dtype,
    device: torch.device,
    gen: torch.Generator,
) -> torch.Tensor:
    if dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        return torch.randn(shape, dtype=dtype, device=device, generator=gen)
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return (
            torch.randn(shape, dtype=torch.float32, device=device, generator=gen)
            .clamp_(-2.0, 2.0)
            .to(dtype)
        )
    if hasattr(torch, "float4_e2m1fn_x2") and dtype == torch.float4_e2m1fn_x2:
        raw = torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=gen)
        return raw.view(dtype)
    if dtype is torch.bool:
        return torch.randint(0, 2, shape, dtype=torch.bool, device=device, generator=gen)
    if dtype in _INT_RANGES:
        lo, hi = _INT_RANGES[dtype]
        return torch.randint(lo, hi, shape, dtype=dtype, device=device, generator=gen)
    raise InputErrorW(f"cannot make random values of {dtype}")


def read_safetensors(path: Path, key: str) -> torch.Tensor:
    """A minimal safetensors reader (header length, JSON header, raw little-endian data)."""
    try:
        with open(path, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            if n <= 0 or n > 100_000_000:
                raise InputErrorW(f"{path}: not a safetensors file")
            header = json.loads(fh.read(n))
            if key not in header:
                raise InputErrorW(
                    f"{path}: no tensor {key!r} (has {', '.join(k for k in header if k != '__metadata__')})"
                )
            info = header[key]
            start, end = info["data_offsets"]
            fh.seek(8 + n + start)
            data = bytearray(fh.read(end - start))
    except (OSError, ValueError, KeyError, struct.error) as exc:
        raise InputErrorW(f"{path}: cannot read safetensors ({exc})") from None
    name = str(info.get("dtype"))
    dtype = _ST_DTYPES.get(name)
    if dtype is None:
        why = _ST_MISSING.get(name, "not a safetensors dtype")
        raise InputErrorW(f"{path}: tensor {key!r} has dtype {name} ({why})")
    shape = [int(n) for n in info["shape"]]
    if name == "F4":  # the file counts 4-bit values; torch's float4_e2m1fn_x2 counts pairs
        if not shape or shape[-1] % 2:
            raise InputErrorW(f"{path}: F4 tensor {key!r} of shape {shape} is not whole bytes")
        shape[-1] //= 2
    if not data:
        return torch.empty(shape, dtype=dtype)
    try:
        return torch.frombuffer(data, dtype=dtype).reshape(shape).clone()
    except (RuntimeError, ValueError) as exc:
        raise InputErrorW(
            f"{path}: tensor {key!r}: {len(data)} bytes do not hold a {name} tensor of shape "
            f"{info['shape']} ({exc})"
        ) from None


def resolve_inside(root: Path | None, rel: str) -> Path:
    """A workload's safetensors path, refused when it leaves the dataset root."""
    if root is None:
        raise InputErrorW(f"safetensors input {rel!r} needs the dataset root")
    root = root.resolve()
    path = (root / rel).resolve()
    if path != root and root not in path.parents:
        raise InputErrorW(f"safetensors path {rel!r} leaves the dataset root {root}")
    return path


#: ``prepare(definition, workload, inputs, generator)``: an evaluator's adjustment of fresh inputs
Prepare = Callable[[dict[str, Any], dict[str, Any], list[Any], torch.Generator], None]


class InputMaker:
    """Makes the inputs of one workload in definition order; caches safetensors loads."""

    def __init__(
        self,
        definition: dict[str, Any],
        device: str,
        dataset_root: str | None,
        prepare: Prepare | None = None,
    ) -> None:
        self.definition = definition
        self.device = torch.device(device)
        self.dataset_root = Path(dataset_root) if dataset_root else None
        #: safetensors inputs, on the device, by (path, tensor key)
        self._loaded: dict[tuple[str, str], torch.Tensor] = {}
        self.prepare = prepare
        #: the structured inputs filled for the last workload made (names)
        self.filled: list[str] = []

    def axis_values(self, workload: dict[str, Any]) -> dict[str, int]:
        values = {
            n: a["value"] for n, a in self.definition["axes"].items() if a.get("type") == "const"
        }
        values.update({k: int(v) for k, v in workload.get("axes", {}).items()})
        return values

    def shape(self, spec: dict[str, Any], axes: dict[str, int]) -> list[int] | None:
        if spec.get("shape") is None:
            return None
        try:
            return [axes[a] for a in spec["shape"]]
        except KeyError as exc:
            raise InputErrorW(f"axis {exc.args[0]!r} has no value in this workload") from None

    def make(self, workload: dict[str, Any], seed: int) -> list[Any]:
        axes = self.axis_values(workload)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        out: list[Any] = []
        winputs = workload.get("inputs") or {}
        for name, spec in self.definition["inputs"].items():
            kind = (winputs.get(name) or {}).get("type", "random")
            dtype = torch_dtype(spec["dtype"])
            if kind == "scalar":
                out.append(winputs[name]["value"])
            elif kind == "safetensors":
                w = winputs[name]
                key = (w["path"], w["tensor_key"])
                if key not in self._loaded:
                    t = read_safetensors(
                        resolve_inside(self.dataset_root, w["path"]), w["tensor_key"]
                    )
                    expect = self.shape(spec, axes)
                    if expect is not None and list(t.shape) != expect:
                        raise InputErrorW(
                            f"safetensors input {name!r}: shape {list(t.shape)}, expected {expect}"
                        )
                    if t.dtype != dtype:
                        raise InputErrorW(
                            f"safetensors input {name!r}: dtype {t.dtype}, expected {dtype}"
                        )
                    self._loaded[key] = t.to(self.device)
                out.append(self._loaded[key].clone())
            else:
                shape = self.shape(spec, axes)
                if shape is None:
                    out.append(_random((), dtype, self.device, gen).item())
                else:
                    out.append(_random(shape, dtype, self.device, gen))
        # structured inputs from a CPU generator of their own (its draws do not depend on the device)
        self.filled = structured.fill(
            self.definition, workload, out, axes, torch.Generator().manual_seed(seed ^ 0x5EED)
        )
        if self.prepare is not None:
            self.prepare(self.definition, workload, out, gen)
        return out

    def output_shapes(self, workload: dict[str, Any]) -> list[tuple[list[int], torch.dtype]]:
        axes = self.axis_values(workload)
        return [
            ((self.shape(spec, axes) or []), torch_dtype(spec["dtype"]))
            for spec in self.definition["outputs"].values()
        ]

    def axes_from_inputs(self, inputs: list[Any]) -> dict[str, int]:
        """The axis values the given input tensors have (a batch repeated by the sampling
        evaluator has more rows than its workload)."""
        axes = {
            n: a["value"] for n, a in self.definition["axes"].items() if a.get("type") == "const"
        }
        for spec, value in zip(self.definition["inputs"].values(), inputs, strict=False):
            if isinstance(value, torch.Tensor) and spec.get("shape"):
                for axis, size in zip(spec["shape"], value.shape, strict=False):
                    axes.setdefault(axis, int(size))
        return axes

    def allocate_outputs(
        self, workload: dict[str, Any], poison: bool, inputs: list[Any] | None = None
    ) -> list[torch.Tensor]:
        """Output tensors for the workload's shapes (or, given ``inputs``, for theirs)."""
        shapes = (
            self.output_shapes(workload)
            if inputs is None
            else [
                (
                    (self.shape(spec, self.axes_from_inputs(inputs)) or []),
                    torch_dtype(spec["dtype"]),
                )
                for spec in self.definition["outputs"].values()
            ]
        )
        outs = []
        for shape, dtype in shapes:
            t = torch.empty(shape, dtype=dtype, device=self.device)
            if poison and t.is_floating_point() and t.element_size() >= 2:
                t.fill_(float("nan"))
            elif poison and t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
                t.view(torch.uint8).fill_(
                    0x7F
                )  # NaN in both FP8 formats: an unwritten element fails
            elif poison and t.dtype in (torch.int32, torch.int64, torch.int16):
                t.fill_(-(2**15) + 7)
            elif poison and t.dtype in (torch.int8, torch.uint8):
                t.fill_(-113 if t.dtype == torch.int8 else 0xA5)
            outs.append(t)
        return outs
