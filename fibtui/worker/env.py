"""The environment recorded with every result, so a summary says where each number came from."""

from __future__ import annotations

import functools
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: the pynvml module once initialised, False when it cannot be (None: not tried yet)
_nvml: Any = None


def nvml() -> Any:
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
    """The current SM clock in MHz, when readable. It keeps the device handle and asks NVML for
    nothing else (on the H200 the max-clock query cost ~1.4 ms a call, 16 ms of every paired job:
    optimize_ops/benchmarks/h200_20261202c_profile/); :func:`block_clock` reads the rest a block
    records.

    ``uuid``: the GPU's UUID as torch reports it; NVML numbers GPUs ignoring CUDA_VISIBLE_DEVICES,
    so a worker given GPU 3 as its device 0 finds its own GPU by UUID, not by index."""
    nv = nvml()
    if nv is None:
        return None
    try:
        return nv.nvmlDeviceGetClockInfo(_handle(index, uuid), nv.NVML_CLOCK_SM)
    except Exception:
        return None


#: NVML's clock-event (throttle) reasons that slow a block down: software power cap, hardware
#: slowdown, software and hardware thermal slowdown, the power brake (nvml.h's bit values)
THROTTLE_REASONS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
#: a block whose SM clock is below this share of the job's median block clock is measured again
SAG_SHARE = 0.85
#: how long a cool-down before measuring throttled blocks again may wait, and how often it looks
COOL_DOWN_S = 5.0
COOL_DOWN_POLL_S = 0.1


@dataclass
class BlockClock:
    """What NVML said at the start of one timed block: SM and memory clocks, power, temperature,
    and the reasons it was slowed down (THROTTLE_REASONS), each None when not readable."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    power_w: float | None = None
    temp_c: int | None = None
    throttle: list[str] = field(default_factory=list)

    @property
    def throttled(self) -> bool:
        return bool(self.throttle)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _handle(index: int = 0, uuid: str | None = None) -> Any:
    """The NVML handle of the worker's GPU (by UUID when known: NVML numbers GPUs ignoring
    CUDA_VISIBLE_DEVICES), kept for the process; None without NVML."""
    nv = nvml()
    if nv is None:
        return None
    key = uuid or str(index)
    h = _handles.get(key)
    if h is None:
        if uuid:
            name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            h = nv.nvmlDeviceGetHandleByUUID(name)
        else:
            h = nv.nvmlDeviceGetHandleByIndex(index)
        _handles[key] = h
    return h


def _ask(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a value NVML cannot give here is None
        return None


def throttle_reasons(mask: int | None) -> list[str]:
    """The slowdowns a clock-event reason mask names (THROTTLE_REASONS), in bit order."""
    if not mask:
        return []
    return [name for bit, name in sorted(THROTTLE_REASONS.items()) if int(mask) & bit]


def block_clock(index: int = 0, uuid: str | None = None) -> BlockClock | None:
    """SM and memory clocks, power and temperature now, and the slowdowns in force: read before
    every timed block. None without NVML (no nvidia-ml-py, or no driver)."""
    nv = nvml()
    if nv is None:
        return None
    h = _ask(lambda: _handle(index, uuid))
    if h is None:
        return None
    power = _ask(lambda: nv.nvmlDeviceGetPowerUsage(h))
    reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    return BlockClock(
        sm_mhz=_ask(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        mem_mhz=_ask(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        power_w=power / 1000.0 if isinstance(power, (int, float)) else None,
        temp_c=_ask(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        throttle=throttle_reasons(_ask(lambda: reasons(h)) if reasons else None),
    )


def blocks_to_redo(clocks: list[BlockClock | None]) -> list[int]:
    """The blocks to measure again: those that ran throttled, and those whose SM clock sagged
    below SAG_SHARE of the median block clock of the job."""
    known = [c.sm_mhz for c in clocks if c is not None and c.sm_mhz]
    ref = statistics.median(known) if known else None
    out = []
    for i, c in enumerate(clocks):
        if c is None:
            continue
        sagged = ref is not None and c.sm_mhz is not None and 0 < c.sm_mhz < SAG_SHARE * ref
        if c.throttled or sagged:
            out.append(i)
    return out


def cool_down(
    read: Callable[[], BlockClock | None] | None,
    limit_s: float = COOL_DOWN_S,
    poll_s: float = COOL_DOWN_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> float:
    """Wait while the GPU says it is throttled, at most ``limit_s`` seconds; the seconds waited."""
    if read is None:
        return 0.0
    start = clock()
    while True:
        now = read()
        waited = clock() - start
        if now is None or not now.throttled or waited >= limit_s:
            return waited
        sleep(min(poll_s, max(limit_s - waited, 0.0)))


def clock_setup(index: int = 0) -> dict[str, Any]:
    """Whether the clocks are locked, as the official evaluator locks them (``nvidia-smi -ac``:
    application clocks set away from their defaults): the application and default application
    clocks of SM and memory and the power limit, each None when not readable."""
    nv = nvml()
    if nv is None:
        return {"clocks_locked": None}
    h = _ask(lambda: _handle(index))
    if h is None:
        return {"clocks_locked": None}
    clocks = (("sm", nv.NVML_CLOCK_SM), ("mem", nv.NVML_CLOCK_MEM))
    app = {
        kind: _ask(functools.partial(nv.nvmlDeviceGetApplicationsClock, h, clock_id))
        for kind, clock_id in clocks
    }
    default = {
        kind: _ask(functools.partial(nv.nvmlDeviceGetDefaultApplicationsClock, h, clock_id))
        for kind, clock_id in clocks
    }
    limit = _ask(lambda: nv.nvmlDeviceGetPowerManagementLimit(h))
    known = all(v is not None for v in (*app.values(), *default.values()))
    return {
        "clocks_locked": (app != default) if known else None,
        "app_sm_clock_mhz": app["sm"],
        "app_mem_clock_mhz": app["mem"],
        "default_app_sm_clock_mhz": default["sm"],
        "default_app_mem_clock_mhz": default["mem"],
        "mem_clock_mhz": _ask(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
        "power_limit_w": limit / 1000.0 if isinstance(limit, (int, float)) else None,
    }


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
        env.update(clock_setup(idx))
        env["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    else:
        env["gpu"] = None
        env["cpu"] = platform.processor() or platform.machine()
    return env
