#!/usr/bin/env python3
"""Run the worker requests of ``.devreq/`` (scripts/device/make_requests.py) through
``python -m fibtui.worker run``, each in a fresh worker with the environment its case names, and
print one line per solution per job: status, latency, the row's limit (an UNSUPPORTED_HERE's
architecture), the gate's checks and the first words of its error. Standard library only (it runs
on the GPU host before anything else is installed). Full events go to ``$OUT/gate/<case>.jsonl``.

    python3 scripts/device/run_requests.py [CASE ...]          # on the GPU host
    python3 scripts/device/run_requests.py --cpu hostile       # the same requests on Triton's
                                                               # CPU interpreter (a check here)
    python3 scripts/device/run_requests.py --repeat 2 sweep_on sweep_off   # alternated

For the sweeps it prints the worker's own time for the jobs (the sum of the jobs' wall times, what
the gate's checks add to) and the process's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQ = REPO / ".devreq"


def to_cpu(request: dict) -> dict:
    cfg = dict(request["config"])
    cfg.update(backend="interpreter", device="cpu", correctness_trials=1)
    cfg["plan"] = dict(cfg["plan"], calls_per_block=1, blocks=2, warmup_calls=0)
    return {**request, "config": cfg}


def run_case(name: str, env_extra: dict, cpu: bool, out_dir: Path) -> dict:
    request = json.loads((REQ / f"{name}.json").read_text())
    if cpu:
        request = to_cpu(request)
    path = out_dir / f"{name}.request.json"
    path.write_text(json.dumps(request))
    env = dict(os.environ, **env_extra)
    if cpu:
        env["TRITON_INTERPRET"] = "1"
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui.worker", "run", "--request", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=580,
    )
    wall = time.monotonic() - t0
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    (out_dir / f"{name}.jsonl").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    (out_dir / f"{name}.stderr.txt").write_text(proc.stderr[-200_000:])
    names = {s["id"]: s["name"] for s in request["solutions"]}
    loaded = next((e for e in events if e.get("event") == "loaded"), {})
    for sid, rep in (loaded.get("solutions") or {}).items():
        build = rep.get("build") or {}
        how = rep.get("status") or ("built" if rep.get("ok") else "?")
        extra = (
            f" cutlass={build['cutlass']['source']} {build['cutlass'].get('version')}"
            if build.get("cutlass")
            else ""
        )
        print(
            f"  {name}: load {names.get(sid, sid)}: {how}{extra} {str(rep.get('error') or '')[:160]}"
        )
    jobs_wall = 0.0
    statuses: dict[str, dict[str, int]] = {}
    phases: dict[str, list[float]] = {}
    for e in events:
        if e.get("event") != "result":
            continue
        jobs_wall += float(e.get("wall_s") or 0.0)
        for phase, ms in (e.get("phases_ms") or {}).items():
            phases.setdefault(phase, []).append(float(ms))
        for r in e.get("results", []):
            sol = names.get(r.get("solution_id"), r.get("solution_id"))
            statuses.setdefault(sol, {}).setdefault(r.get("status"), 0)
            statuses[sol][r.get("status")] += 1
            if name.startswith("sweep"):
                continue
            lat = r.get("latency_ms")
            checks = (r.get("timing") or {}).get("checks") or {}
            seen = {
                k: checks[k]
                for k in ("side_stream_kernels", "late_kernels", "empty_calls")
                if checks.get(k)
            }
            probe = checks.get("probe_ms")
            print(
                f"  {name}: {e.get('uuid')} {sol}: {r.get('status')}"
                + (f" {lat * 1000:.2f} us" if isinstance(lat, (int, float)) else "")
                + (f" probe {[round(p * 1000, 2) for p in probe]} us" if probe else "")
                + (f" {seen}" if seen else "")
                + (f" limit={r['limit']}" if r.get("limit") else "")
                + (f" | {str(r.get('error'))[:220]}" if r.get("error") else "")
            )
    print(
        f"  {name}: exit {proc.returncode}, process {wall:.2f} s, jobs {jobs_wall:.3f} s, statuses {statuses}"
    )
    if phases:
        # the worker's host time per phase (fibtui.worker.phases): sum over the jobs, and median
        print(
            f"  {name}: phases (sum s / median ms a job): "
            + ", ".join(
                f"{p} {sum(v) / 1000:.3f}/{statistics.median(v):.2f}" for p, v in phases.items()
            )
        )
    if proc.returncode not in (0, 3) and not events:
        print("  " + proc.stderr[-1500:].replace("\n", "\n  "))
    return {
        "case": name,
        "exit": proc.returncode,
        "wall_s": wall,
        "jobs_s": jobs_wall,
        "statuses": statuses,
        "phases_ms": {p: sum(v) for p, v in phases.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    index = json.loads((REQ / "cases.json").read_text())
    names = args.cases or list(index)
    out_dir = Path(os.environ.get("OUT", "/tmp")) / "gate"
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = []
    for r in range(args.repeat):
        for name in names:
            print(f"== {name}" + (f" (round {r + 1})" if args.repeat > 1 else ""), flush=True)
            summary.append(run_case(name, index[name]["env"], args.cpu, out_dir))
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
