"""Dtypes of the FlashInfer-Trace format and their sizes in bytes (fp4 is half a byte)."""

from __future__ import annotations

DTYPE_BYTES: dict[str, float] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float4_e2m1": 0.5,
    "float4_e2m1fn_x2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

KNOWN_DTYPES = frozenset(DTYPE_BYTES)
