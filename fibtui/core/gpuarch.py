"""GPU architectures: which one a kernel needs, which one this GPU is, and whether the first runs
on the second.

A kernel written for the B200 (``sm_100a``: tcgen05, tensor memory) cannot run on a Hopper GPU at
all. That is a limit of the machine, never the kernel's failure: a job that fails for it is
UNSUPPORTED_HERE with the architecture needed and the one present (:class:`MachineLimit`), and
``fibtui run --backend auto`` sends it to a GPU that has it. What a job needs is found two ways:

- from what failed: the CuTe DSL's arch check (``expects arch to be one of [...], but got
  sm_90a``), ptxas refusing an instruction for the target (``Instruction 'tcgen05.alloc' not
  supported on .target 'sm_90'``), CUDA's "no kernel image is available for execution on the
  device", a kernel's own ``#error`` naming a newer architecture (:func:`limit_from_text`);
- from the built library itself: the architectures of the cubins and PTX in its ``.nv_fatbin``
  section (:func:`fatbin_entries`), checked against the device before the first call
  (:func:`runs_on_device`).

The rules (CUDA's): a cubin for ``sm_XY`` runs on the same major version with a minor of Y or
more; an arch-specific cubin (``sm_XYa``) only on ``sm_XY`` itself; a family-specific one
(``sm_XYf``) on the same major with a minor of Y or more. PTX for ``compute_XY`` is compiled by
the driver for any GPU of ``XY`` or newer; ``compute_XYa`` only for ``XY``, ``compute_XYf`` within
its family.

Standard library only: the worker imports it.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: what the contest's GPU is (Modal's B200): where ``--backend auto`` sends what needs it
B200_ARCH = "sm_100"

_ARCH = re.compile(r"\b(?:Arch\.)?(?:sm|compute)_?(\d{2,3})([af]?)\b")


@dataclass(frozen=True, order=True)
class Arch:
    """``sm_<major><minor><variant>``: variant ``""``, ``"a"`` (arch-specific) or ``"f"``
    (family-specific)."""

    major: int
    minor: int
    variant: str = ""

    @property
    def name(self) -> str:
        return f"sm_{self.major}{self.minor}{self.variant}"

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @classmethod
    def parse(cls, text: str) -> Arch | None:
        """``sm_100a``, ``Arch.sm_90a``, ``compute_90``, ``sm90``; None for anything else."""
        m = _ARCH.search(text.strip())
        if m is None:
            return None
        return cls.from_number(int(m.group(1)), m.group(2))

    @classmethod
    def from_number(cls, number: int, variant: str = "") -> Arch:
        return cls(number // 10, number % 10, variant)

    @classmethod
    def of_capability(cls, major: int, minor: int) -> Arch:
        """The device of compute capability ``major.minor`` (``torch.cuda.get_device_capability``)."""
        return cls(int(major), int(minor))

    def runs_on(self, device: Arch, ptx: bool = False) -> bool:
        """Does code built for this architecture run on ``device`` (a cubin, or PTX the driver
        compiles when ``ptx``)?"""
        if self.variant == "a":
            return (device.major, device.minor) == (self.major, self.minor)
        if self.variant == "f" or not ptx:
            return device.major == self.major and device.minor >= self.minor
        return device.number >= self.number


def arch_names(text: str) -> list[str]:
    """Every architecture named in ``text``, in order, each once (``sm_100a``...)."""
    out: dict[str, None] = {}
    for m in _ARCH.finditer(text):
        out[Arch.from_number(int(m.group(1)), m.group(2)).name] = None
    return list(out)


@dataclass(frozen=True)
class MachineLimit:
    """Why a job cannot run on this machine, and where it could: ``kind`` is ``arch`` (the GPU
    lacks the architecture the code needs), ``headers`` (CUTLASS/CuTe headers not found) or
    ``tool`` (no GPU, no nvcc, a package missing). ``needs``: the architectures (or headers) it
    needs; ``has``: what this machine has; ``evidence``: the line that showed it."""

    kind: str
    needs: tuple[str, ...] = ()
    has: str | None = None
    evidence: str = ""
    remedy: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "needs": list(self.needs), "has": self.has}
        if self.evidence:
            out["evidence"] = self.evidence
        if self.remedy:
            out["remedy"] = self.remedy
        out.update(self.extra)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> MachineLimit | None:
        """A limit read back from a record, or None when ``obj`` is not one."""
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            return None
        needs = obj.get("needs")
        has = obj.get("has")
        known = {"kind", "needs", "has", "evidence", "remedy"}
        return cls(
            kind=obj["kind"],
            needs=tuple(str(n) for n in needs) if isinstance(needs, list) else (),
            has=str(has) if isinstance(has, str) else None,
            evidence=str(obj.get("evidence") or ""),
            remedy=str(obj.get("remedy") or ""),
            extra={k: v for k, v in obj.items() if k not in known},
        )

    def runs_on(self, arch: str) -> bool:
        """Would a GPU of architecture ``arch`` have what this arch limit needs? (False for
        other kinds, and when nothing is known of what it needs.)"""
        device = Arch.parse(arch)
        if self.kind != "arch" or device is None:
            return False
        needed = [a for a in (Arch.parse(n) for n in self.needs) if a is not None]
        return bool(needed) and any(a.runs_on(device, ptx=True) for a in needed)

    def describe(self) -> str:
        """One line: what it needs and what this machine has."""
        if self.kind == "arch":
            need = " or ".join(self.needs) if self.needs else "another GPU architecture"
            text = f"needs {need}; this GPU is {self.has or 'another architecture'}"
        elif self.kind == "headers":
            text = f"needs the headers {', '.join(self.needs)}, not found on this machine"
        else:
            text = "cannot run on this machine"
        if self.remedy:
            text += f" ({self.remedy})"
        return text


#: PTX instructions of one architecture family alone (for ptxas's "not supported on .target"):
#: the instruction's prefix -> the architectures that have it
_PTX_NEEDS = {
    "tcgen05": ("sm_100a", "sm_103a", "sm_110a"),
    ".cta_group": ("sm_100a", "sm_103a", "sm_110a"),
    "wgmma": ("sm_90a",),
    "setmaxnreg": ("sm_90a", "sm_100a"),
}

_DSL_ARCH = re.compile(r"expects arch to be one of \[([^\]]*)\],? but got ([\w.]+)")
_PTXAS_TARGET = re.compile(
    r"(?:Instruction|Feature|Modifier) '([^']+)' not supported on \.target '(sm_\d+[af]?)'"
)
_PTXAS_REQUIRES = re.compile(r"requires \.target '?(sm_\d+[af]?)'? or higher")
_ERROR_DIRECTIVE = re.compile(r"#error\b(.*)$", re.MULTILINE)
#: what CUDA says when a library holds no code for this GPU
NO_IMAGE_MARKERS = (
    "no kernel image is available for execution on the device",
    "cudaErrorNoKernelImageForDevice",
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "NoKernelImageForDevice",
)


def limit_from_text(text: str, device: Arch | None) -> MachineLimit | None:
    """An arch limit shown by an error message or a compiler log, or None when the text shows
    none. ``device``: this GPU (None when unknown)."""
    has = device.name if device is not None else None
    m = _DSL_ARCH.search(text)
    if m:
        needs = tuple(arch_names(m.group(1)))
        got = Arch.parse(m.group(2))
        if needs and (device is None or not _any_runs(needs, device)):
            return MachineLimit(
                "arch", needs, got.name if got else has, evidence=_line_of(text, m.start())
            )
    m = _PTXAS_TARGET.search(text)
    if m:
        instruction, target = m.group(1), m.group(2)
        needs = next((v for k, v in _PTX_NEEDS.items() if instruction.startswith(k)), ())
        if device is not None and needs and _any_runs(needs, device):
            return None  # this GPU has it: the build's target flags lack it (the kernel's build)
        return MachineLimit("arch", needs, target, evidence=_line_of(text, m.start()))
    m = _PTXAS_REQUIRES.search(text)
    if m and not (device is not None and _any_runs((m.group(1),), device)):
        return MachineLimit("arch", (m.group(1),), has, evidence=_line_of(text, m.start()))
    if any(marker in text for marker in NO_IMAGE_MARKERS):
        marker_at = min(text.find(k) for k in NO_IMAGE_MARKERS if k in text)
        return MachineLimit("arch", (), has, evidence=_line_of(text, marker_at))
    if device is not None:
        for m in _ERROR_DIRECTIVE.finditer(text):
            named = [a for a in (Arch.parse(n) for n in arch_names(m.group(1))) if a is not None]
            if named and not any(a.runs_on(device, ptx=True) for a in named):
                return MachineLimit(
                    "arch", tuple(a.name for a in named), has, evidence=_line_of(text, m.start())
                )
    return None


def _any_runs(needs: tuple[str, ...], device: Arch) -> bool:
    return any(a.runs_on(device, ptx=True) for a in (Arch.parse(n) for n in needs) if a)


def _line_of(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end >= 0 else len(text)].strip()[:300]


# --------------------------------------------------------------------------------------------
# The fat binary inside a built library
# --------------------------------------------------------------------------------------------

FATBIN_MAGIC = 0xBA55ED50
_KIND = {1: "ptx", 2: "sass"}
_VARIANT = {0: "", 1: "a", 2: "f"}


@dataclass(frozen=True)
class FatbinEntry:
    """One image of a fat binary: ``sass`` (a cubin) or ``ptx``, for ``arch``."""

    kind: str
    arch: Arch

    @property
    def label(self) -> str:
        return self.arch.name if self.kind == "sass" else "compute_" + self.arch.name[3:]


def _elf_section(data: bytes, wanted: tuple[str, ...]) -> list[tuple[int, int]]:
    """(offset, size) of the sections of a 64-bit little-endian ELF named in ``wanted``."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff == 0 or shentsize < 64 or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        return []

    def header(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", data, shoff + i * shentsize
        )
        return name, offset, size

    _, str_off, str_size = header(shstrndx)
    out = []
    for i in range(shnum):
        name_at, offset, size = header(i)
        if name_at >= str_size:
            continue
        end = data.find(b"\0", str_off + name_at)
        name = data[str_off + name_at : end].decode("ascii", "replace")
        if name in wanted and offset + size <= len(data):
            out.append((offset, size))
    return out


def _entries_of(data: bytes, start: int, size: int) -> list[FatbinEntry]:
    """The images of the fat binaries in ``data[start:start+size]`` (several may follow each
    other, 8-byte aligned)."""
    out: list[FatbinEntry] = []
    p, end = start, start + size
    while p + 16 <= end:
        magic, _version, head, body = struct.unpack_from("<IHHQ", data, p)
        if magic != FATBIN_MAGIC:
            p += 8  # padding between two fat binaries
            continue
        q, stop = p + head, min(p + head + body, end)
        while q + 48 <= stop:
            kind, _ver, entry_head, payload = struct.unpack_from("<HHIQ", data, q)
            if entry_head < 48 or kind not in _KIND:
                break
            arch_number = struct.unpack_from("<I", data, q + 28)[0]
            flags = struct.unpack_from("<Q", data, q + 40)[0]
            variant = _VARIANT.get((flags >> 20) & 0xF, "")
            if 10 <= arch_number < 1000:
                out.append(FatbinEntry(_KIND[kind], Arch.from_number(arch_number, variant)))
            q += entry_head + payload
        p += max(head + body, 8)
    return out


def fatbin_entries(path: str | Path) -> list[FatbinEntry]:
    """The cubins and PTX a library (or object, or raw ``.fatbin``) carries; [] when it carries
    none or cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    if data[:4] == struct.pack("<I", FATBIN_MAGIC):
        return _entries_of(data, 0, len(data))
    out: list[FatbinEntry] = []
    try:
        for offset, size in _elf_section(data, (".nv_fatbin", "__nv_relfatbin")):
            out.extend(_entries_of(data, offset, size))
    except struct.error:
        return out
    return out


def runs_on_device(entries: list[FatbinEntry], device: Arch) -> bool:
    """Does one image of the library run on ``device``?"""
    return any(e.arch.runs_on(device, ptx=e.kind == "ptx") for e in entries)


def library_limit(path: str | Path, device: Arch) -> MachineLimit | None:
    """An arch limit when the library carries GPU code and none of it runs on ``device``."""
    entries = fatbin_entries(path)
    if not entries or runs_on_device(entries, device):
        return None
    labels = list(dict.fromkeys(e.label for e in entries))
    needs = tuple(dict.fromkeys(e.arch.name for e in entries))
    return MachineLimit(
        "arch",
        needs,
        device.name,
        evidence=f"the built library holds code for {', '.join(labels)} only",
    )
