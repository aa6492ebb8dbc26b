#!/usr/bin/env python3
"""An independent check of fibtui's latencies: the demo kernel timed by a plain torch.profiler
loop written without any fibtui code (no delimiter kernels, no worker), on one workload per batch
size. warm: 200 back-to-back calls; cold: the same with a 2xL2 ``zero_()`` between calls (the way
flashinfer's CUPTI bench flushes). Prints the median kernel duration per batch size as JSON.

    python3 scripts/bench/bench_cupti_plain.py > plain_cupti.json
"""

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

KERNEL = Path(__file__).resolve().parents[2] / "kernels/gdn_decode_demo/solution/triton/kernel.py"
spec = importlib.util.spec_from_file_location("demo_kernel", KERNEL)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
dev = torch.device("cuda")
flush_buf = torch.empty(
    2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.int32, device=dev
)
out = {}
for B in (1, 2, 4, 8, 16, 24, 32, 48, 64):
    g = torch.Generator(device=dev).manual_seed(B)
    q = torch.randn(B, 1, 4, 128, dtype=torch.bfloat16, device=dev, generator=g)
    k = torch.randn(B, 1, 4, 128, dtype=torch.bfloat16, device=dev, generator=g)
    v = torch.randn(B, 1, 8, 128, dtype=torch.bfloat16, device=dev, generator=g)
    st = torch.randn(B, 8, 128, 128, device=dev, generator=g)
    A = torch.randn(8, device=dev, generator=g)
    a = torch.randn(B, 1, 8, dtype=torch.bfloat16, device=dev, generator=g)
    dt = torch.randn(8, device=dev, generator=g)
    b = torch.randn(B, 1, 8, dtype=torch.bfloat16, device=dev, generator=g)
    o = torch.empty(B, 1, 8, 128, dtype=torch.bfloat16, device=dev)
    ns = torch.empty_like(st)
    args = (q, k, v, st, A, a, dt, b, 0.08838834764831845, o, ns)
    for _ in range(50):
        mod.gdn_decode(*args)
    torch.cuda.synchronize()
    res = {}
    for policy in ("warm", "cold"):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(200):
                if policy == "cold":
                    flush_buf.zero_()
                mod.gdn_decode(*args)
            torch.cuda.synchronize()
        durs = [
            e.duration_ns() / 1000
            for e in prof.profiler.kineto_results.events()
            if e.device_type() == torch.autograd.DeviceType.CUDA and "gdn" in e.name()
        ]
        res[policy] = {"median_us": statistics.median(durs), "n": len(durs)}
    out[B] = res
    print(B, res, file=sys.stderr)
print(json.dumps(out, indent=1))
