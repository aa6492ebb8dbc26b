"""The worker's safetensors reader knows every dtype of the format, the Blackwell low-bit scale
formats among them (F8_E8M0, F4, U16-U64): each round-trips byte for byte, from files written by
hand (always) and by the safetensors package itself (where installed), and what torch cannot hold
(6-bit floats) is refused with one line naming the tensor and why."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fibtui.worker.inputs import _ST_DTYPES, InputErrorW, read_safetensors  # noqa: E402

#: (safetensors dtype, torch dtype name, shape in the file, bytes per stored unit)
CASES = [
    ("F64", "float64", [2, 3], 8),
    ("F32", "float32", [4], 4),
    ("F16", "float16", [3], 2),
    ("BF16", "bfloat16", [3], 2),
    ("F8_E4M3", "float8_e4m3fn", [5], 1),
    ("F8_E5M2", "float8_e5m2", [5], 1),
    ("F8_E4M3FNUZ", "float8_e4m3fnuz", [5], 1),
    ("F8_E5M2FNUZ", "float8_e5m2fnuz", [5], 1),
    ("F8_E8M0", "float8_e8m0fnu", [2, 4], 1),
    ("F4", "float4_e2m1fn_x2", [2, 6], 1),  # 12 values, 6 bytes: torch's shape is [2, 3]
    ("C64", "complex64", [2], 8),
    ("I64", "int64", [3], 8),
    ("I32", "int32", [3], 4),
    ("I16", "int16", [3], 2),
    ("I8", "int8", [3], 1),
    ("U64", "uint64", [3], 8),
    ("U32", "uint32", [3], 4),
    ("U16", "uint16", [3], 2),
    ("U8", "uint8", [3], 1),
    ("BOOL", "bool", [3], 1),
]


def write(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    """A safetensors file by the format's own layout: an 8-byte header length, the JSON header
    (dtype, shape, data offsets), the raw little-endian data."""
    header, blob = {}, b""
    for key, (dtype, shape, data) in tensors.items():
        header[key] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(blob), len(blob) + len(data)],
        }
        blob += data
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + blob)


def _stored_bytes(dtype: str, shape: list[int], unit: int) -> bytes:
    count = 1
    for n in shape:
        count *= n
    if dtype == "F4":
        count //= 2
    if dtype == "BOOL":
        return bytes([i % 2 for i in range(count)])
    return bytes((i * 37 + 11) % 251 for i in range(count * unit))


@pytest.mark.parametrize(("st", "name", "shape", "unit"), CASES, ids=[c[0] for c in CASES])
def test_every_safetensors_dtype_round_trips(
    tmp_path: Path, st: str, name: str, shape, unit
) -> None:
    if not hasattr(torch, name):
        pytest.skip(f"this torch has no {name}")
    data = _stored_bytes(st, shape, unit)
    path = tmp_path / "t.safetensors"
    write(path, {"t": (st, shape, data)})
    t = read_safetensors(path, "t")
    assert t.dtype == getattr(torch, name)
    expected = list(shape) if st != "F4" else [*shape[:-1], shape[-1] // 2]
    assert list(t.shape) == expected
    assert t.contiguous().view(torch.uint8).flatten().tolist() == list(data)


def test_the_reader_agrees_with_the_safetensors_package(tmp_path: Path) -> None:
    """Files written by the safetensors package (every dtype this torch has), read by fibtui's
    reader and by the package's own ``safe_open``: the same dtype, shape and bytes."""
    st = pytest.importorskip("safetensors.torch")
    from safetensors import safe_open

    tensors = {}
    for code, name, shape, unit in CASES:
        if not hasattr(torch, name) or code == "F4":
            continue
        raw = torch.tensor(list(_stored_bytes(code, shape, unit)), dtype=torch.uint8)
        tensors[code] = raw.view(getattr(torch, name)).reshape(shape)
    if hasattr(torch, "float4_e2m1fn_x2"):
        tensors["F4"] = (
            torch.arange(6, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).reshape(2, 3)
        )
    path = tmp_path / "pkg.safetensors"
    st.save_file(tensors, str(path))
    with safe_open(str(path), framework="pt") as f:
        for key in tensors:
            theirs = f.get_tensor(key)
            ours = read_safetensors(path, key)
            assert (ours.dtype, list(ours.shape)) == (theirs.dtype, list(theirs.shape)), key
            assert torch.equal(ours.view(torch.uint8), theirs.view(torch.uint8)), key


def test_what_torch_cannot_hold_is_refused_naming_the_tensor(tmp_path: Path) -> None:
    path = tmp_path / "f6.safetensors"
    write(path, {"scales": ("F6_E2M3", [4], bytes(3))})
    with pytest.raises(InputErrorW) as exc:
        read_safetensors(path, "scales")
    assert "tensor 'scales' has dtype F6_E2M3 (6-bit floats, which torch has no dtype for)" in str(
        exc.value
    )
    write(path, {"odd": ("F4", [3], bytes(2))})
    with pytest.raises(InputErrorW, match="F4 tensor 'odd' of shape \\[3\\] is not whole bytes"):
        read_safetensors(path, "odd")
    write(path, {"short": ("U32", [4], bytes(6))})
    with pytest.raises(InputErrorW, match="6 bytes do not hold a U32 tensor of shape \\[4\\]"):
        read_safetensors(path, "short")
    assert "F8_E8M0" in _ST_DTYPES and "U64" in _ST_DTYPES
