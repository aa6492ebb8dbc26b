"""The environment recorded with every result, so a summary says where each number came from."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any

_nvml = None


def nvml():
    """pynvml handle module when available (nvidia-ml-py), else None."""
    global _nvml
    if _nvml is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception:
            _nvml = False
    return _nvml or None


_handles: dict[str, object] = {}


def sm_clock_now(index: int = 0, uuid: str | None = None) -> int | None:
    """The current SM clock in MHz, when readable: read before every timed block, so it keeps the
    device handle and asks NVML for nothing else (on the H200 the max-clock query cost ~1.4 ms a
    call, 16 ms of every paired job: optimize_ops/benchmarks/h200_20261202c_profile/).

    ``uuid``: the GPU's UUID as torch reports it; NVML numbers GPUs ignoring CUDA_VISIBLE_DEVICES,
    so a worker given GPU 3 as its device 0 finds its own GPU by UUID, not by index."""
    nv = nvml()
    if nv is None:
        return None
    key = uuid or str(index)
    try:
        h = _handles.get(key)
        if h is None:
            if uuid:
                name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
                h = nv.nvmlDeviceGetHandleByUUID(name)
            else:
                h = nv.nvmlDeviceGetHandleByIndex(index)
            _handles[key] = h
        return nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
    except Exception:
        return None


def sm_clock_mhz(index: int = 0) -> tuple[int | None, int | None]:
    """(current SM clock, max SM clock) in MHz, when readable."""
    nv = nvml()
    if nv is None:
        return None, None
    try:
        h = nv.nvmlDeviceGetHandleByIndex(index)
        return nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM), nv.nvmlDeviceGetMaxClockInfo(
            h, nv.NVML_CLOCK_SM
        )
    except Exception:
        return None, None


def _driver_version() -> str | None:
    nv = nvml()
    if nv is not None:
        try:
            v = nv.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        except Exception:
            pass
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run(
                [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            )
            return (
                out.stdout.strip().splitlines()[0]
                if out.returncode == 0 and out.stdout.strip()
                else None
            )
        except (OSError, subprocess.SubprocessError, IndexError):
            return None
    return None


def describe(device: str, backend: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "backend": backend,
        "device": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception as exc:  # noqa: BLE001 - recorded, not fatal
        env["triton"] = f"unavailable ({type(exc).__name__})"
    if device.startswith("cuda") and torch.cuda.is_available():
        idx = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(idx)
        env.update(
            {
                "gpu": props.name,
                "sm_count": props.multi_processor_count,
                "l2_bytes": getattr(props, "L2_cache_size", None),
                "memory_bytes": props.total_memory,
                "capability": f"{props.major}.{props.minor}",
                "cuda": torch.version.cuda,
                "driver": _driver_version(),
            }
        )
        cur, mx = sm_clock_mhz(idx)
        env["sm_clock_mhz"] = cur
        env["sm_clock_max_mhz"] = mx
        env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    else:
        env["gpu"] = None
        env["cpu"] = platform.processor() or platform.machine()
    return env
