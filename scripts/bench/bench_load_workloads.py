#!/usr/bin/env python3
"""Time reading 100,000 workload lines (fibtui.core.dataset.load_workloads) on this machine.

    .venv/bin/python scripts/bench/bench_load_workloads.py [--lines 100000] [--runs 7]

The lines are the bundled demo's workloads repeated with fresh uuids (about 46 MB of JSONL).
Prints the median and the spread; "strict" is the line-by-line path a malformed file takes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core.dataset import Dataset, load_workloads  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    ds = Dataset(REPO / "kernels" / "gdn_decode_demo" / "dataset")
    definition = ds.definition("demo_gdn_decode_qk4_v8_d128_k_last")
    src = ds.workloads_path(definition.name).read_text().splitlines()
    out = []
    for i in range(a.lines):
        obj = json.loads(src[i % len(src)])
        obj["workload"]["uuid"] = str(uuid.UUID(int=i))
        out.append(json.dumps(obj))
    path = Path(tempfile.mkdtemp()) / "workloads.jsonl"
    path.write_text("\n".join(out) + "\n")
    size_mb = path.stat().st_size / 1e6
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        ws = load_workloads(path, definition)
        times.append(time.perf_counter() - t0)
        assert len(ws) == a.lines
    # the strict path (a blank line inside forces it), once
    strict = path.with_name("strict.jsonl")
    strict.write_text(out[0] + "\n\n" + "\n".join(out[1:]) + "\n")
    t0 = time.perf_counter()
    load_workloads(strict, definition)
    t_strict = time.perf_counter() - t0
    print(
        f"{a.lines} workload lines ({size_mb:.1f} MB), {a.runs} runs: median {statistics.median(times):.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f}); strict line-by-line path {t_strict:.2f} s"
    )


if __name__ == "__main__":
    main()
