#!/usr/bin/env python3
"""An independent timing of a contest solution, written without fibtui's worker, timing or input
code: the solution is loaded on its own (a Python/Triton solution imported as a package from its
sources; a CUDA/C++ one from the shared library named by --library, e.g. the one fibtui's build
cache holds, through tvm_ffi or importlib), its inputs are plain ``torch.randn`` draws of the
definition's shapes and dtypes (scalars from the workload), and each call is timed by CUPTI
activity records (torch.profiler): ``--calls`` calls, each after a ``bitwise_not_()`` (its kernel's
name is the delimiter) of a 2xL2 buffer (``--l2 cold``) or of one element (``--l2 warm``,
back-to-back calls); a call's latency is the span from its first kernel's start to its last
kernel's end, the delimiter excluded. Prints the median per workload as JSON lines.

    python3 scripts/bench/bench_plain_solution.py --solution DIR --dataset DATASET --workloads U1,U2 \
        [--library PATH.so] [--l2 warm|cold] [--calls 100]
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path

import torch

DTYPES = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "float8_e4m3fn": torch.float8_e4m3fn,
}


def load_python(folder: Path, language: str, entry: str):
    """Import the entry file as a module of a package made of the solution's sources."""
    src = folder / "solution" / language
    work = Path(tempfile.mkdtemp(prefix="plain-solution-"))
    pkg = "plain_solution_pkg"
    (work / pkg).symlink_to(src.resolve(), target_is_directory=True)
    sys.path.insert(0, str(work))
    file, symbol = entry.split("::")
    module = importlib.import_module(pkg + "." + file[:-3].replace("/", "."))
    return getattr(module, symbol)


def load_library(library: str, binding: str, symbol: str):
    if binding == "torch":
        import importlib.machinery
        import importlib.util

        name = Path(library).name.split(".")[0]
        loader = importlib.machinery.ExtensionFileLoader(name, library)
        spec = importlib.util.spec_from_file_location(name, library, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return getattr(module, symbol)
    import tvm_ffi

    return getattr(tvm_ffi.load_module(library), symbol)


def make_inputs(definition: dict, workload: dict, dev: torch.device, seed: int):
    axes = {k: v["value"] for k, v in definition["axes"].items() if v.get("type") == "const"}
    axes.update(workload["axes"])
    g = torch.Generator(device=dev).manual_seed(seed)
    args = []
    for name, spec in definition["inputs"].items():
        w = workload["inputs"].get(name, {"type": "random"})
        if w.get("type") == "scalar":
            args.append(w["value"])
            continue
        if w.get("type") != "random":
            raise SystemExit(
                f"input {name}: only random and scalar inputs are generated here, not {w.get('type')}"
            )
        shape = [axes[a] for a in spec["shape"]] if spec["shape"] else []
        dtype = DTYPES[spec["dtype"]]
        t = torch.randn(shape, generator=g, device=dev, dtype=torch.float32)
        args.append(t.to(dtype))
    outs = []
    for spec in definition["outputs"].values():
        shape = [axes[a] for a in spec["shape"]] if spec["shape"] else []
        outs.append(torch.empty(shape, dtype=DTYPES[spec["dtype"]], device=dev))
    return args, outs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--solution", required=True, help="a folder with config.toml and solution/<language>/"
    )
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--workloads", required=True, help="comma-separated uuids")
    ap.add_argument("--library", help="the built shared library of a CUDA/C++ solution")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--l2", choices=("warm", "cold"), default="warm")
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    folder = Path(args.solution)
    cfg = tomllib.loads((folder / "config.toml").read_text())
    build = cfg["build"]
    language, entry = build["language"], build["entry_point"]
    dps = build.get("destination_passing_style", True)
    definition_name = cfg["solution"]["definition"]
    ds = Path(args.dataset)
    definition = json.loads(next(ds.glob(f"definitions/**/{definition_name}.json")).read_text())
    workloads = {}
    for line in next(ds.glob(f"workloads/**/{definition_name}.jsonl")).read_text().splitlines():
        if line.strip():
            w = json.loads(line)["workload"]
            workloads[w["uuid"]] = w
    if language in ("cuda", "cpp"):
        fn = load_library(args.library, build.get("binding") or "tvm-ffi", entry.split("::")[1])
    else:
        fn = load_python(folder, language, entry)
    dev = torch.device("cuda")
    n_flush = 2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 if args.l2 == "cold" else 1
    flush = torch.zeros(n_flush, dtype=torch.int32, device=dev)

    from torch.profiler import ProfilerActivity, profile

    for uuid in args.workloads.split(","):
        w = workloads[uuid]
        inputs, outs = make_inputs(definition, w, dev, seed=int(uuid.replace("-", "")[:8], 16))

        def call(inputs=inputs, outs=outs):
            return fn(*inputs, *outs) if dps else fn(*inputs)

        with torch.no_grad():
            for _ in range(args.warmup):
                call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.calls):
                    flush.bitwise_not_()
                    call()
                torch.cuda.synchronize()
        kernels = sorted(
            (
                e
                for e in prof.profiler.kineto_results.events()
                if e.device_type() == torch.autograd.DeviceType.CUDA and e.duration_ns() > 0
            ),
            key=lambda e: e.start_ns(),
        )
        # segments: the kernels between two flushes are one call's
        spans, current, flush_ns = [], [], None
        for e in kernels:
            if "bitwise_not" in e.name():
                if current:
                    spans.append(current)
                current, flush_ns = [], e.duration_ns()
                continue
            current.append(e)
        if current:
            spans.append(current)
        lat = [
            (max(e.start_ns() + e.duration_ns() for e in s) - min(e.start_ns() for e in s)) / 1000
            for s in spans
            if s
        ]
        names = sorted({e.name()[:60] for s in spans[:3] for e in s})
        print(
            json.dumps(
                {
                    "uuid": uuid,
                    "axes": w["axes"],
                    "l2": args.l2,
                    "median_us": statistics.median(lat),
                    "calls": len(lat),
                    "kernels_per_call": statistics.median([len(s) for s in spans])
                    if spans
                    else None,
                    "kernel_names": names,
                    "flush_us": (flush_ns or 0) / 1000,
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
