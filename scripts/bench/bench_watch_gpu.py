"""Watch mode on a GPU: what a save costs until the first result and until the gate's verdict,
with the worker started ahead of time as the TUI does (WarmWorkers), with and without the CUPTI
warm-up the worker now does before saying ready (FIBTUI_WARM_CUPTI=1 / 0).

    python3 scripts/bench/bench_watch_gpu.py [--rounds 3]   # on a GPU machine, from the repo root

Per round and variant: a fresh workspace copy of the demo, a worker prewarmed (its start-up is
timed: that happens while the user edits), then a paired representative gate (the baseline and
v2_smallb_splitv on the demo's representatives) through the same runner the TUI uses, timed from
the gate's start (the save) to its first result and to its end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fibtui.core.demo import create_demo_workspace  # noqa: E402
from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners.events import JobFinished  # noqa: E402
from fibtui.runners.local import WarmWorkers, worker_pool  # noqa: E402
from fibtui.services.runs import (  # noqa: E402
    RunOptions,
    check_backend,
    engine_config,
    prepare_run,
)


def one(variant: str, base: Path) -> dict[str, float]:
    os.environ["FIBTUI_WARM_CUPTI"] = variant
    root = base / f"ws-{variant}-{time.time_ns()}"
    create_demo_workspace(root)
    ws = open_workspace(root)
    options = RunOptions(
        backend="local",
        workloads="rep",
        workers=1,
        baseline=str(root / "solution" / "triton"),
        solutions=[str(root / "candidates" / "v2_smallb_splitv")],
    )
    found = check_backend("local")
    definition = ws.dataset().definition(ws.active.definition)
    pool = worker_pool(
        "local", found, engine_config("local", definition, ws.dataset_root, options), options
    )
    warm = WarmWorkers(root / ".fibtui" / "warm")
    t = time.monotonic()
    assert warm.prewarm(pool, 0), "the worker did not start"
    prewarm_s = time.monotonic() - t
    options.warm = warm
    t0 = time.monotonic()
    prepared = prepare_run(ws, options)
    first: list[float] = []

    def on_event(event: object) -> None:
        if isinstance(event, JobFinished) and not first:
            first.append(time.monotonic() - t0)

    record = prepared.runner.run(on_event).to_json()
    end = time.monotonic() - t0
    warm.close()
    assert record["summary"]["complete"], record["summary"]
    return {
        "prewarm_s": prewarm_s,
        "first_result_s": first[0],
        "gate_s": end,
        "passed": record["summary"]["passed"],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="fibtui-watch-gpu-"))
    rows: dict[str, list[dict[str, float]]] = {"0": [], "1": []}
    one("1", base)  # reference cache and Triton cache warm; not counted
    for _ in range(args.rounds):
        for variant in ("0", "1"):
            r = one(variant, base)
            rows[variant].append(r)
            print(
                f"FIBTUI_WARM_CUPTI={variant}: prewarm {r['prewarm_s']:.2f} s, save -> first result "
                f"{r['first_result_s']:.2f} s, save -> gate done {r['gate_s']:.2f} s, {r['passed']:.0f} PASSED",
                flush=True,
            )
    for variant, label in (("0", "without the warm-up"), ("1", "with the warm-up")):
        rs = rows[variant]
        print(
            f"{label}: median prewarm {statistics.median(r['prewarm_s'] for r in rs):.2f} s, save -> first result "
            f"{statistics.median(r['first_result_s'] for r in rs):.2f} s, save -> gate done "
            f"{statistics.median(r['gate_s'] for r in rs):.2f} s over {len(rs)} rounds"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
