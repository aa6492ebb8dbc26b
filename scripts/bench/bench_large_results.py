"""Large result files at the speed of the format (issue 37 item 6).

Generates two flashinfer-bench trace files of N workloads each (one definition, one solution per
file, every row PASSED with a latency), then times ``fibtui results show`` of one and ``fibtui
compare`` of the two, each as a subprocess, and reads its peak resident memory from
``resource.getrusage(RUSAGE_CHILDREN)`` (each verb runs in a fresh child of a fresh helper, so
the figure is that verb's own). Prints JSON and writes it to ``--out`` when given.

    python scripts/bench/bench_large_results.py --workloads 100000 --out optimize_ops/benchmarks/large_results/after.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFINITION = "bench_large_scale"


def write_traces(path: Path, n: int, solution: str, factor: float, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            batch = 1 + i % 512
            base = 0.002 + 0.00001 * batch
            lat = base * factor * math.exp(rng.gauss(0, 0.01))
            ref = base * 3.0
            line = {
                "definition": DEFINITION,
                "solution": solution,
                "workload": {
                    "uuid": f"w{i:07d}-0000-4000-8000-000000000000",
                    "axes": {"batch_size": batch, "seq_len": 1 + (i // 512) % 64},
                    "inputs": {"x": {"type": "random"}},
                },
                "evaluation": {
                    "status": "PASSED",
                    "environment": {"hardware": "NVIDIA B200", "libs": {"torch": "2.8.0"}},
                    "timestamp": "2026-12-01T00:00:00",
                    "log": "",
                    "correctness": {"max_relative_error": 1e-6, "max_absolute_error": 1e-7},
                    "performance": {
                        "latency_ms": lat,
                        "reference_latency_ms": ref,
                        "speedup_factor": ref / lat,
                    },
                },
            }
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")


#: runs one command in a child and prints its wall time and the child's peak RSS (KiB on Linux)
_MEASURE = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": p.returncode, "wall_s": round(wall, 2), "peak_rss_mib": round(rss / 1024, 1),
                  "stderr_tail": p.stderr.decode("utf-8", "replace")[-300:]}))
"""


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=cwd,
    )
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep", type=Path, help="folder to write the two files into (kept)")
    ap.add_argument(
        "--verbs", default="show,show-json,compare,compare-json", help="which measurements"
    )
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="fibtui-bench-large-"))
    folder.mkdir(parents=True, exist_ok=True)
    base, cand = folder / "base.jsonl", folder / "cand.jsonl"
    t = time.perf_counter()
    write_traces(base, args.workloads, "baseline_v1", 1.0, 1)
    write_traces(cand, args.workloads, "candidate_v2", 0.97, 2)
    generated = time.perf_counter() - t
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    fib = [sys.executable, "-m", "fibtui"]
    # run outside any workspace (in a folder of its own): the verbs read the files alone
    cwd = Path(tempfile.mkdtemp(prefix="fibtui-bench-cwd-"))
    commands = {
        "show": [*fib, "results", "show", str(base)],
        "show-json": [*fib, "results", "show", str(base), "--json"],
        "compare": [*fib, "compare", str(base), str(cand)],
        "compare-json": [*fib, "compare", str(base), str(cand), "--json"],
    }
    results = {}
    for name in args.verbs.split(","):
        results[name] = measure(commands[name], env, cwd)
        print(f"{name}: {results[name]}", file=sys.stderr)
    report = {
        "workloads": args.workloads,
        "file_mib": round(base.stat().st_size / 2**20, 1),
        "generate_s": round(generated, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
        "targets": {"wall_s": 15, "peak_rss_mib": 600},
        "results": results,
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
