#!/usr/bin/env python3
"""Tables of a contest-solutions benchmark folder made by scripts/device/h200_contest.sh: per
solution, fibtui's two gates (cold L2: the first build; warm L2: from the build cache) beside the
independent plain-CUPTI timing (scripts/bench/bench_plain_solution.py) and flashinfer-bench's own build
time (scripts/bench/bench_fib_build.py); and the parity records (`fibtui parity --solution`).

    python3 scripts/bench/contest_table.py optimize_ops/benchmarks/h200_20261201_contest
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    root = Path(sys.argv[1])
    gates = root / "gates"
    print(
        "| solution | builder | gate 1 (cold) | compile s | gate 2 (warm) | build s | flashinfer-bench build s (first / again) | warm fibtui / plain | cold fibtui / plain |"
    )
    print("|---|---|---|---:|---|---:|---|---|---|")
    detail = []
    for g1 in sorted(gates.glob("*_gate1.json")):
        n = g1.name[: -len("_gate1.json")]
        r1, r2 = json.loads(g1.read_text()), json.loads((gates / f"{n}_gate2.json").read_text())
        plain = {}
        for l2 in ("warm", "cold"):
            for line in (gates / f"{n}_plain_{l2}.jsonl").read_text().splitlines():
                o = json.loads(line)
                plain[(o["uuid"], l2)] = o["median_us"]
        fb = json.loads((gates / f"{n}_fib_build.json").read_text())
        b1, b2 = r1["jobs"][0]["timing"].get("build", {}), r2["jobs"][0]["timing"].get("build", {})
        warm, cold = [], []
        for j1, j2 in zip(r1["jobs"], r2["jobs"], strict=True):
            fw, fc = j2["latency_ms"] * 1000, j1["latency_ms"] * 1000
            pw, pc = plain[(j2["uuid"], "warm")], plain[(j1["uuid"], "cold")]
            warm.append(fw / pw)
            cold.append(fc / pc)
            detail.append(
                f"| {n} | {j1['axes']['batch_size']} | {j1['status']} / {j2['status']} | {fw:.2f} | {pw:.2f} | "
                f"{fw / pw:.3f} | {fc:.2f} | {pc:.2f} | {fc / pc:.3f} |"
            )
        s1 = f"{r1['summary']['passed']}/{r1['summary']['total']} PASSED"
        s2 = f"{r2['summary']['passed']}/{r2['summary']['total']} PASSED"
        fbs = f"{fb['first'].get('build_s', float('nan')):.2f} / {fb['again'].get('build_s', float('nan')):.2f}"
        print(
            f"| {n} | {b1.get('builder')} | {s1} | {b1.get('compile_s', b1.get('build_s', 0)):.2f} | {s2} | "
            f"{b2.get('build_s', 0):.3f} | {fbs} | {min(warm):.3f}-{max(warm):.3f} | {min(cold):.3f}-{max(cold):.3f} |"
        )
    print()
    print(
        "| solution | batch | status (gate 1 / 2) | fibtui warm us | plain warm us | ratio | fibtui cold us | plain cold us | ratio |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(detail))
    print()
    print("| solution | flashinfer-bench | fibtui | statuses per workload |")
    print("|---|---|---|---|")
    for p in sorted((root / "parity").glob("*_parity.json")):
        r = json.loads(p.read_text())
        for c in r["comparisons"]:
            same = all(row["bench_status"] == row["fibtui_status"] for row in c["rows"])
            fib_passed = sum(row["fibtui_status"] == "PASSED" for row in c["rows"])
            print(
                f"| {p.name[: -len('_parity.json')]} | {r['passed']}/{r['total']} PASSED | {fib_passed}/{len(c['rows'])} PASSED | "
                f"{'identical' if same else 'DIFFERENT'} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
