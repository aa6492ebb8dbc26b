"""The table of scripts/device/h200_adaptive.sh: for every run it made, the pair, the design, the
verdict (a sample's word, the full set's verdict), the jobs run of those planned, the timed GPU
time, the worker time and the wall time; then, per pair and scope, whether the adaptive design's
verdict is the fixed designs'. Standard library only.

    python3 scripts/device/adaptive_table.py RESULTS_DIR > table.txt

RESULTS_DIR holds ``<pair>__<scope>__<design>.json`` (``fibtui run --json``) and ``.wall`` (the
command's wall seconds) files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def verdict(rec: dict) -> str:
    comp = rec.get("comparison") or {}
    if not comp:
        return "-"
    if comp.get("scope") == "sample" and comp.get("measured"):
        return str(comp["measured"]["word"])
    return str(comp.get("verdict"))


def noise(rec: dict) -> str:
    """The noise of one paired log ratio the verdict used, and where it came from."""
    pn = (rec.get("comparison") or {}).get("pair_noise") or {}
    if not pn:
        return "-"
    source = str(pn.get("source") or "")
    short = "A/A" if source.startswith("A/A") else source.split(" ")[0]
    return f"{pn['sigma'] * 100:.2f}% {short}"


def timed_gpu_ms(rec: dict) -> float:
    """The timed device time: latency x calls per block x blocks, summed over the results."""
    plan = ((rec.get("settings") or {}).get("engine") or {}).get("plan") or {}
    calls = plan.get("calls_per_block", 1) * plan.get("blocks", 1)
    return sum((j.get("latency_ms") or 0.0) * calls for j in rec.get("jobs") or [])


def worker_s(rec: dict) -> float:
    """The worker's time: per paired job (workload, repeat), its wall time (shared by its rows)."""
    groups: dict[tuple[str, int], float] = {}
    for j in rec.get("jobs") or []:
        key = (j["uuid"], j["repeat"])
        groups[key] = max(groups.get(key, 0.0), j.get("wall_s") or 0.0)
    return sum(groups.values())


def main(folder: str) -> int:
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        parts = path.stem.split("__")
        if len(parts) != 3:
            continue
        pair, scope, design = parts
        try:
            rec = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            rows.append((pair, scope, design, "no record", "-", "-", "-", "-", "", "-"))
            continue
        wall = path.with_suffix(".wall")
        s = rec.get("summary") or {}
        adaptive = rec.get("adaptive") or {}
        rows.append(
            (
                pair,
                scope,
                design,
                verdict(rec),
                f"{s.get('done', 0)}/{s.get('planned', s.get('total', 0))}",
                f"{timed_gpu_ms(rec):.1f}",
                f"{worker_s(rec):.1f}",
                wall.read_text().strip() if wall.is_file() else "-",
                str(adaptive.get("stopped") or ""),
                noise(rec),
            )
        )
    head = (
        "pair", "scope", "design", "verdict", "jobs", "GPU ms", "worker s", "wall s", "stopped",
        "noise",
    )  # fmt: skip
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)))
    print()
    by: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    for r in rows:
        by.setdefault((r[0], r[1]), {})[r[2]] = (r[3], r[4])
    for (pair, scope), designs in sorted(by.items()):
        ours = [d for d in designs if d.startswith("adaptive")]
        fixed = [d for d in designs if d.startswith("fixed")]
        for a in ours:
            for f in fixed:
                same = "same" if designs[a][0] == designs[f][0] else "DIFFERENT"
                print(
                    f"{pair} {scope}: {a} {designs[a][0]} ({designs[a][1]} jobs) vs {f} "
                    f"{designs[f][0]} ({designs[f][1]} jobs): {same}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
