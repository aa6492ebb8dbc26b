"""What this machine can run: a GPU, Nsight Compute, Triton's CPU interpreter, Modal, the
official flashinfer-bench CLI. Detection never imports torch, triton or modal (start-up stays
fast); it looks for executables, device files and installed packages."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Backends:
    gpu: bool
    gpu_names: list[str]
    #: the CUDA_VISIBLE_DEVICES entry of each usable GPU (index, UUID or MIG id), in gpu_names' order
    gpu_ids: list[str]
    ncu: str | None
    interpreter: bool  # torch + triton importable: the CPU interpreter runner works
    torch: bool
    triton: bool
    flashinfer_bench: bool
    modal_installed: bool
    modal_credentials: str | None  # where they come from ("env", "~/.modal.toml"), never the token

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


#: where the driver describes itself and each GPU it drives, and the boot's id: what an
#: nvidia-smi answer is kept under (module attributes, so tests can point them elsewhere)
PROC_NVIDIA = Path("/proc/driver/nvidia")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
DEV = Path("/dev")
#: the shape of the nvidia-smi cache's entries (fibtui.core.cachefile); bumped when it changes
_GPU_CACHE_VERSION = 1
#: the most answers the cache keeps (machines sharing one home, driver updates, reboots)
_GPU_CACHE_ENTRIES = 16


def _gpus() -> list[tuple[str, str, str]]:
    """(index, UUID, name) of every GPU nvidia-smi sees. The answer is kept in the user's cache
    folder under :func:`gpu_key` (the driver's and every GPU's own description, the device nodes,
    the boot, the host and nvidia-smi itself), so a later command skips nvidia-smi (0.02 s to a
    second or more) until any of those changes. Without that description nvidia-smi is asked."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    key = gpu_key(exe)
    cached = _cached_gpus(key) if key is not None else None
    if cached is not None:
        return cached
    gpus = _ask_nvidia_smi(exe)
    if key is not None and gpus:
        _keep_gpus(key, gpus)
    return gpus


def gpu_key(exe: str) -> str | None:
    """A digest of everything an nvidia-smi GPU list depends on here, or None when /proc does
    not describe the driver and its GPUs (then nothing is cached)."""
    from fibtui.core.cachefile import file_key

    try:
        parts = [
            "driver " + (PROC_NVIDIA / "version").read_text(errors="replace"),
            "boot " + BOOT_ID.read_text(errors="replace").strip(),
        ]
        infos = sorted((PROC_NVIDIA / "gpus").glob("*/information"))
        if not infos:
            return None
        parts += [f"gpu {p.parent.name}\n{p.read_text(errors='replace')}" for p in infos]
        nodes = sorted(p.name for p in DEV.glob("nvidia[0-9]*"))
    except OSError:
        return None
    parts += [f"nodes {' '.join(nodes)}", f"host {os.uname().nodename}"]
    parts.append(f"nvidia-smi {exe} {file_key(Path(exe))}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _gpu_cache() -> Path:
    from fibtui.core.cachefile import cache_folder

    return cache_folder("gpus") / "nvidia-smi.json"


def _cached_gpus(key: str) -> list[tuple[str, str, str]] | None:
    from fibtui.core import cachefile

    rows = (cachefile.read(_gpu_cache(), _GPU_CACHE_VERSION) or {}).get(key)
    if not isinstance(rows, list) or not rows:
        return None
    if not all(
        isinstance(r, list) and len(r) == 3 and all(isinstance(x, str) for x in r) for r in rows
    ):
        return None
    return [(r[0], r[1], r[2]) for r in rows]


def _keep_gpus(key: str, gpus: list[tuple[str, str, str]]) -> None:
    from fibtui.core import cachefile

    path = _gpu_cache()
    entries = cachefile.read(path, _GPU_CACHE_VERSION) or {}
    entries.pop(key, None)
    entries[key] = [list(g) for g in gpus]  # the newest last; the oldest go first
    cachefile.write(path, _GPU_CACHE_VERSION, dict(list(entries.items())[-_GPU_CACHE_ENTRIES:]))


def _ask_nvidia_smi(exe: str) -> list[tuple[str, str, str]]:
    """(index, UUID, name) of every GPU, as nvidia-smi lists them now ([] when it fails)."""
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,uuid,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    rows = [
        [part.strip() for part in line.split(",", 2)]
        for line in out.stdout.splitlines()
        if line.strip()
    ]
    return [(r[0], r[1], r[2]) for r in rows if len(r) == 3]


def visible_gpus(
    gpus: list[tuple[str, str, str]], env: dict[str, str] | None = None
) -> list[tuple[str, str]]:
    """(CUDA_VISIBLE_DEVICES entry, name) of each GPU this process may use. Without
    CUDA_VISIBLE_DEVICES, every GPU by index; with it, its entries in order (indices, UUIDs or
    UUID prefixes, MIG ids), stopping at the first one that names no GPU, as CUDA does."""
    raw = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return [(index, name) for index, _, name in gpus]
    out: list[tuple[str, str]] = []
    for entry in (part.strip() for part in raw.split(",")):
        if entry.startswith("MIG-"):
            out.append((entry, "MIG instance"))
            continue
        match = next(
            (
                g
                for g in gpus
                if entry == g[0] or (entry.startswith("GPU-") and g[1].startswith(entry))
            ),
            None,
        )
        if match is None or any(entry == e for e, _ in out):
            break
        out.append((entry, match[2]))
    return out


def modal_credentials_source() -> str | None:
    if os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET"):
        return "env"
    from fibtui.core.locations import modal_config_path

    cfg = modal_config_path()
    return str(cfg).replace(str(Path.home()), "~") if _has_token_key(cfg) else None


def _has_token_key(path: Path) -> bool:
    """Does Modal's config file name a ``token_id``? Only the key of each line is looked at (the
    part before ``=``), and reading stops at the first ``token_id``: no value, and never the
    secret, is kept or parsed."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.partition("=")[0].strip() == "token_id":
                    return True
    except OSError:
        return False
    return False


def detect(probe_gpu: bool = True) -> Backends:
    visible = visible_gpus(_gpus()) if probe_gpu else []
    names = [name for _, name in visible]
    has_torch = _has_module("torch")
    has_triton = _has_module("triton")
    return Backends(
        gpu=bool(names),
        gpu_names=names,
        gpu_ids=[entry for entry, _ in visible],
        ncu=shutil.which("ncu"),
        interpreter=has_torch and has_triton and _has_module("numpy"),
        torch=has_torch,
        triton=has_triton,
        flashinfer_bench=_has_module("flashinfer_bench"),
        modal_installed=_has_module("modal"),
        modal_credentials=modal_credentials_source(),
    )


def timing_kind_of(engine_backend: str) -> str:
    """How a backend's latencies are timed: the CPU interpreter's wall clock or CUPTI on a GPU
    (the worker states the same in every result it sends)."""
    return "cpu-interpreter" if engine_backend == "interpreter" else "cupti"
