"""What this machine can run: a GPU, Nsight Compute, Triton's CPU interpreter, Modal, the
official flashinfer-bench CLI. Detection never imports torch, triton or modal (start-up stays
fast); it looks for executables, device files and installed packages."""

from __future__ import annotations

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


def _gpus() -> list[tuple[str, str, str]]:
    """(index, UUID, name) of every GPU nvidia-smi sees."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
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
    cfg = Path(os.environ.get("MODAL_CONFIG_PATH", Path.home() / ".modal.toml"))
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
