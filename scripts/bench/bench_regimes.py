"""Time ``fibtui.core.regimes.analyze`` on a large synthetic definition.

Generates N workloads (default 100,000) of a definition with two coupled varying axes
(``rows`` and ``span``) and an optional input, writes them as a workloads JSONL in a temporary
folder, reads it back with ``load_workloads``, makes one result row per workload (a few failures,
a latency that depends on both axes) and times ``analyze`` (floors on B200 included) several
times. Prints the median and the spread; the target is under 1 s on a 2-core machine.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/bench_regimes.py [--workloads N] [--runs R]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

DEF_NAME = "bench_two_axes"


def definition_json() -> dict:
    return {
        "name": DEF_NAME,
        "op_type": "synthetic",
        "description": "benchmark: two coupled varying axes, one optional input",
        "axes": {
            "rows": {"type": "var"},
            "span": {"type": "var"},
            "heads": {"type": "const", "value": 8},
            "dim": {"type": "const", "value": 128},
        },
        "inputs": {
            "x": {"shape": ["rows", "heads", "dim"], "dtype": "bfloat16"},
            "cache": {"shape": ["span", "heads", "dim"], "dtype": "float8_e4m3fn"},
            "bias": {"shape": ["heads"], "dtype": "float32", "optional": True},
        },
        "outputs": {"y": {"shape": ["rows", "heads", "dim"], "dtype": "bfloat16"}},
        "flops": "2 * rows * span * heads * dim",
        "reference": "def run(x, cache, bias):\n    return x\n",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    from fibtui.core import regimes, roofline
    from fibtui.core.dataset import load_definition, load_workloads
    from fibtui.core.results import ResultRow

    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        dpath = root / f"{DEF_NAME}.json"
        dpath.write_text(json.dumps(definition_json()))
        lines = []
        truth = []
        for i in range(args.workloads):
            rows = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
            span = rng.randint(1, 65536)
            inputs = {"x": {"type": "random"}, "cache": {"type": "random"}}
            if i % 3:
                inputs["bias"] = {"type": "random"}
            uuid = f"w{i:07d}"
            lines.append(
                json.dumps(
                    {
                        "definition": DEF_NAME,
                        "solution": None,
                        "workload": {
                            "uuid": uuid,
                            "axes": {"rows": rows, "span": span},
                            "inputs": inputs,
                        },
                        "evaluation": None,
                    }
                )
            )
            truth.append((uuid, rows, span))
        wpath = root / f"{DEF_NAME}.jsonl"
        wpath.write_text("\n".join(lines) + "\n")
        definition = load_definition(dpath)
        t0 = time.perf_counter()
        workloads = load_workloads(wpath, definition)
        load_s = time.perf_counter() - t0
        results = []
        for uuid, rows, span in truth:
            failed = rng.random() < 0.002
            latency = None if failed else 0.002 + 1e-9 * rows * span * (1 + 0.05 * rng.random())
            results.append(
                ResultRow(
                    DEF_NAME,
                    "bench",
                    uuid,
                    {},
                    "RUNTIME_ERROR" if failed else "PASSED",
                    latency_ms=latency,
                )
            )
        device = roofline.get_device("B200")
        times = []
        report = None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            report = regimes.analyze(definition, workloads, results, device=device)
            times.append(time.perf_counter() - t0)
        assert report is not None
    median = statistics.median(times)
    print(f"settings: --workloads {args.workloads} --runs {args.runs} --seed {args.seed}")
    print(
        f"machine: {platform.platform()}, python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    import polars

    print(f"polars {polars.__version__}")
    print(
        f"workloads: {args.workloads} (two varying axes: rows, span; one optional input), result rows: {len(results)}"
    )
    print(f"load_workloads (not part of analyze): {load_s:.3f} s")
    print(
        f"analyze with B200 floors, {args.runs} runs: median {median:.3f} s, min {min(times):.3f} s, max {max(times):.3f} s"
    )
    print(
        f"bands: {len(report.bands)} ({', '.join(report.binning[a] + ' on ' + a for a in report.varying_axes)}); "
        f"outliers: {len(report.outliers)}; representatives: {len(report.representatives)}"
    )
    print(
        f"dominant axis: {report.dominant_axis}; target < 1 s: {'met' if median < 1.0 else 'NOT met'}"
    )
    return 0 if median < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
