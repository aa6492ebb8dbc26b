"""Start-up costs of a GPU worker, one fresh process per variant (run on the device):
``python3 scripts/device/probe_cupti.py [after|before]``.

thread: the first profiler session in a background thread started right after import torch,
        while the main thread imports triton, makes the CUDA context and spins a Python loop
        (how much of it ran tells whether the session holds the GIL).
after:  import torch, import triton, CUDA context, then the first and second torch.profiler
        sessions with CUDA activity (what the worker does today).
before: the first profiler session before the CUDA context exists, then the context, then a
        profiled kernel."""

from __future__ import annotations

import json
import sys
import time

t0 = time.perf_counter()
marks: dict[str, float] = {}


def mark(name: str) -> None:
    marks[name] = round(time.perf_counter() - t0, 3)


import torch  # noqa: E402

mark("import torch")
import triton  # noqa: E402, F401

mark("import triton")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

variant = sys.argv[1] if len(sys.argv) > 1 else "after"
if variant == "thread":
    import threading

    def warm() -> None:
        c0 = time.process_time()
        with profile(activities=[ProfilerActivity.CUDA]):
            pass
        marks["thread: cpu s of the first session"] = round(time.process_time() - c0, 3)
        mark("thread: first session done")

    th = threading.Thread(target=warm)
    th.start()
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    mark("main: CUDA context + first kernel")
    spins, t_spin = 0, time.perf_counter()
    while th.is_alive():
        spins += 1
    marks["main: python loop iterations while the thread ran"] = spins
    marks["main: loop seconds"] = round(time.perf_counter() - t_spin, 3)
    th.join()
if variant == "before":
    with profile(activities=[ProfilerActivity.CUDA]):
        pass
    mark("profiler session, no CUDA context yet")
x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()
mark("CUDA context + first kernel")
c0 = time.process_time()
for i in (1, 2, 3):
    if i == 2:
        marks["cpu s of session 1 (all threads of the process)"] = round(
            time.process_time() - c0, 3
        )
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        y = x + 1
        torch.cuda.synchronize()
    n = len([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])
    mark(f"profiler session {i} ({n} device events)")
print(json.dumps({"variant": variant, "marks_s": marks}))
