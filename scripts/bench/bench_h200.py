#!/usr/bin/env python3
"""Benchmarks of fibtui's runs on a GPU host (the lent H200). Each subcommand prints a table and
writes a JSON file; scripts/device/h200_fibtui.sh runs them in order and the outputs are committed
under optimize_ops/benchmarks/ with the command that made them.

    python3 scripts/bench/bench_h200.py noise    --ws WS --out OUT
    python3 scripts/bench/bench_h200.py fidelity --ws WS --run RUN_ID --out OUT
    python3 scripts/bench/bench_h200.py sweep    --ws WS --out OUT --name NAME -- <fibtui run args>
    python3 scripts/bench/bench_h200.py profile  --ws WS --solution DIR --workloads U1,U2 --set detailed --out OUT --name NAME
    python3 scripts/bench/bench_h200.py hostile  --ws WS --out OUT
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core.numbers import p95  # noqa: E402 - the project's one definition of p95


def fibtui(*args: str, timeout: float = 900) -> tuple[dict, float, str]:
    """Run the real CLI; return (record, wall seconds, stderr)."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1) or not proc.stdout.strip():
        raise SystemExit(
            f"fibtui {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return json.loads(proc.stdout), wall, proc.stderr


def band_of(job: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(job["axes"].items()))


def by_key(record: dict, role: str | None = None) -> dict[tuple[str, int], dict]:
    return {
        (j["uuid"], j["repeat"]): j for j in record["jobs"] if role is None or j["role"] == role
    }


def log_ratio_stats(pairs: list[tuple[float, float]]) -> dict:
    logs = [math.log(b / a) for a, b in pairs]
    absl = sorted(abs(x) for x in logs)
    return {
        "n": len(logs),
        "mean_log_ratio": statistics.mean(logs),
        "std_log_ratio": statistics.stdev(logs) if len(logs) > 1 else 0.0,
        "p95_abs_log_ratio": p95(absl),
        "max_abs_log_ratio": absl[-1],
    }


def cmd_noise(a: argparse.Namespace) -> None:
    out = Path(a.out)
    runs = []
    for i in range(2):
        rec, wall, _ = fibtui(
            "run", "--backend", "local", "--workloads", "all", "--l2", a.l2, "--workspace", a.ws
        )
        runs.append(rec)
        (out / f"noise_{a.l2}_run{i + 1}.json").write_text(json.dumps(rec, indent=1))
        print(
            f"run {i + 1}: {rec['run_id']} {rec['summary']['passed']}/{rec['summary']['total']} PASSED in {wall:.1f} s"
        )
    r1, r2 = by_key(runs[0]), by_key(runs[1])
    pairs, bands = [], {}
    for key, j1 in r1.items():
        j2 = r2.get(key)
        if j1["status"] == j2["status"] == "PASSED":
            pairs.append((j1["latency_ms"], j2["latency_ms"]))
            bands.setdefault(band_of(j1), []).append((j1["latency_ms"], j2["latency_ms"]))
    res = {
        "overall": log_ratio_stats(pairs),
        "bands": {
            b: log_ratio_stats(p) | {"mean_us_run1": 1000 * statistics.mean(x for x, _ in p)}
            for b, p in bands.items()
        },
        "runs": [r["run_id"] for r in runs],
        "target": {"std_log_ratio": 0.01, "p95_abs_log_ratio": 0.02},
    }
    res["l2_policy"] = a.l2
    (out / f"noise_{a.l2}.json").write_text(json.dumps(res, indent=1))
    print(f"{'band':<16}{'n':>4}{'mean us':>10}{'std log':>10}{'p95 |log|':>11}")
    for b, s in sorted(res["bands"].items(), key=lambda kv: int(kv[0].split("=")[1])):
        print(
            f"{b:<16}{s['n']:>4}{s['mean_us_run1']:>10.2f}{s['std_log_ratio']:>10.4f}{s['p95_abs_log_ratio']:>11.4f}"
        )
    o = res["overall"]
    print(
        f"{'ALL':<16}{o['n']:>4}{'':>10}{o['std_log_ratio']:>10.4f}{o['p95_abs_log_ratio']:>11.4f}   (targets <= 0.01 / <= 0.02)"
    )


def _workspace(ws: str):
    from fibtui.core.workspace import open_workspace

    return open_workspace(ws)


def _profile_request(ws: str, solution_dir: str | None, uuids: list[str], req_path: Path) -> None:
    from fibtui.core.plan import solution_from_config, solution_from_path
    from fibtui.runners.session import default_cache_dir

    w = _workspace(ws)
    ds = w.dataset()
    definition = ds.definition(w.active.definition)
    sol = (
        solution_from_path(solution_dir, w.active)
        if solution_dir
        else solution_from_config(w.active)
    )
    workloads = ds.workloads(definition.name)
    req = {
        "config": {
            "backend": "local",
            "device": "cuda:0",
            "cache_dir": default_cache_dir(),
            "dataset_root": str(w.dataset_root),
        },
        "definition": definition.raw,
        "solutions": [
            {
                "id": "candidate-0",
                "name": sol.name,
                "spec": {
                    "language": sol.language,
                    "entry_point": sol.entry_point,
                    "destination_passing_style": sol.dps,
                },
                "sources": sol.sources,
            }
        ],
        "workloads": [workloads.get(u).to_json() for u in uuids],
        "warmup_calls": 5,
        "profiled_calls": 1,
    }
    req_path.write_text(json.dumps(req))


def _ncu(args: list[str], req: Path, rep: Path, timeout: float = 600) -> None:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cmd = [
        ncu,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        *args,
        "--export",
        str(rep),
        "--force-overwrite",
        sys.executable,
        "-m",
        "fibtui.worker",
        "profile",
        "--request",
        str(req),
    ]
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(
            f"ncu failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )


def _ncu_export(rep: Path) -> dict[str, Path]:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    out = {}
    for page, suffix, csv in (
        ("details", "_details.csv", True),
        ("raw", "_raw.csv", True),
        ("details", "_details.txt", False),
    ):
        target = rep.with_name(rep.stem + suffix)
        cmd = [ncu, "--import", str(rep), "--page", page] + (["--csv"] if csv else [])
        with open(target, "w") as fh:
            subprocess.run(
                cmd, stdout=fh, stderr=subprocess.PIPE, text=True, timeout=300, check=True
            )
        out[suffix] = target
    return out


def cmd_fidelity(a: argparse.Namespace) -> None:
    """fibtui latency vs Nsight Compute's gpu__time_duration (both cold L2, clocks as found)."""
    import csv

    out = Path(a.out)
    w = _workspace(a.ws)
    record = json.loads((w.archive_root / "runs" / a.run / "run.json").read_text())
    jobs = [j for j in record["jobs"] if j["status"] == "PASSED" and j["repeat"] == 0]
    uuids = [j["uuid"] for j in jobs]
    tag = f"fidelity_{a.cache_control}"
    req = out / f"{tag}_request.json"
    _profile_request(a.ws, None, uuids, req)
    rep = out / f"{tag}.ncu-rep"
    _ncu(
        [
            "--metrics",
            "gpu__time_duration.sum",
            "--kernel-name",
            "regex:gdn",
            "--cache-control",
            a.cache_control,
        ],
        req,
        rep,
    )
    raw = rep.with_name(f"{tag}_raw.csv")
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    with open(raw, "w") as fh:
        subprocess.run(
            [ncu, "--import", str(rep), "--page", "raw", "--csv"],
            stdout=fh,
            check=True,
            timeout=300,
        )
    rows = list(csv.reader(open(raw)))
    header, units, data = rows[0], rows[1], rows[2:]
    col = header.index("gpu__time_duration.sum")
    unit = units[col]
    scale = {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(
        unit, None
    )
    if scale is None:
        raise SystemExit(f"unexpected unit {unit!r} for gpu__time_duration.sum")
    durations_us = [float(r[col].replace(",", "")) * scale for r in data]
    if len(durations_us) != len(jobs):
        raise SystemExit(f"ncu profiled {len(durations_us)} kernels for {len(jobs)} workloads")
    per = []
    for j, d in zip(jobs, durations_us, strict=True):
        per.append(
            {
                "uuid": j["uuid"],
                "band": band_of(j),
                "fibtui_us": j["latency_ms"] * 1000,
                "ncu_us": d,
                "ratio": j["latency_ms"] * 1000 / d,
            }
        )
    bands = {}
    for p in per:
        bands.setdefault(p["band"], []).append(p)
    summary = {
        b: {
            "n": len(ps),
            "fibtui_us": statistics.median(x["fibtui_us"] for x in ps),
            "ncu_us": statistics.median(x["ncu_us"] for x in ps),
            "ratio_median": statistics.median(x["ratio"] for x in ps),
            "ratio_min": min(x["ratio"] for x in ps),
            "ratio_max": max(x["ratio"] for x in ps),
        }
        for b, ps in bands.items()
    }
    (out / f"{tag}.json").write_text(
        json.dumps(
            {
                "run": a.run,
                "l2_policy": record["l2_policy"],
                "ncu_cache_control": a.cache_control,
                "unit": unit,
                "workloads": per,
                "bands": summary,
                "target": [0.95, 1.05],
            },
            indent=1,
        )
    )
    print(f"fibtui run {a.run} (L2 {record['l2_policy']}) vs ncu --cache-control {a.cache_control}")
    print(f"{'band':<16}{'n':>4}{'fibtui us':>11}{'ncu us':>10}{'ratio':>8}{'min':>8}{'max':>8}")
    for b, s in sorted(summary.items(), key=lambda kv: int(kv[0].split("=")[1])):
        print(
            f"{b:<16}{s['n']:>4}{s['fibtui_us']:>11.3f}{s['ncu_us']:>10.3f}{s['ratio_median']:>8.3f}{s['ratio_min']:>8.3f}{s['ratio_max']:>8.3f}"
        )


def cmd_sweep(a: argparse.Namespace) -> None:
    rec, wall, err = fibtui(*a.rest, "--workspace", a.ws, timeout=a.timeout)
    out = Path(a.out)
    (out / f"{a.name}.json").write_text(json.dumps(rec, indent=1))
    cache = [j["timing"].get("reference_cache") for j in rec["jobs"] if j.get("timing")]
    info = {
        "name": a.name,
        "args": a.rest,
        "run_id": rec["run_id"],
        "wall_s": wall,
        "jobs": rec["summary"]["total"],
        "passed": rec["summary"]["passed"],
        "state": rec["state"],
        "reference_cache_last": cache[-1] if cache else None,
    }
    (out / f"{a.name}_wall.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info))
    for k, v in rec["summary"]["per_solution"].items():
        print(
            f"  {k}: {v['passed']}/{v['jobs']} PASSED mean {1000 * (v['mean_latency_ms'] or float('nan')):.3f} us"
        )


def cmd_profile(a: argparse.Namespace) -> None:
    out = Path(a.out)
    req = out / f"{a.name}_request.json"
    _profile_request(a.ws, a.solution, a.workloads.split(","), req)
    rep = out / f"{a.name}.ncu-rep"
    _ncu(["--set", a.set, "--kernel-name", "regex:gdn"], req, rep)
    paths = _ncu_export(rep)
    print(f"{a.name}: {rep} + {', '.join(p.name for p in paths.values())}")


HOSTILE = """import triton
import triton.language as tl


@triton.jit
def _oob(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs + (1 << 40), tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    _oob[(4,)](new_state, new_state.numel(), BLOCK=256)
"""


def cmd_hostile(a: argparse.Namespace) -> None:
    """An illegal memory access in a Triton kernel poisons only its worker."""
    out = Path(a.out)
    folder = Path(a.ws) / "candidates" / "hostile_illegal_address"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.py").write_text(HOSTILE)
    w = _workspace(a.ws)
    uuids = w.dataset().workloads(w.active.definition).uuids[:3]
    rec, wall, err = fibtui(
        "run",
        "--backend",
        "local",
        "--workloads",
        ",".join(uuids),
        "--solution",
        str(folder),
        "--solution",
        str(Path(a.ws) / "solution" / "triton"),
        "--workspace",
        a.ws,
    )
    (out / "hostile.json").write_text(json.dumps(rec, indent=1))
    (out / "hostile_progress.txt").write_text(err)
    for j in rec["jobs"]:
        print(f"{j['solution']:<28} {j['uuid'][:8]} {j['status']:<14} {str(j.get('error'))[:100]}")
    print(f"restarts: {err.count('restarted')}  wall {wall:.1f} s")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("noise")
    s.add_argument("--ws", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--l2", default="cold", choices=("cold", "warm"))
    s = sub.add_parser("fidelity")
    s.add_argument("--ws", required=True)
    s.add_argument("--run", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--cache-control", default="all", choices=("all", "none"))
    s = sub.add_parser("sweep")
    s.add_argument("--ws", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--timeout", type=float, default=900)
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s = sub.add_parser("profile")
    s.add_argument("--ws", required=True)
    s.add_argument("--solution")
    s.add_argument("--workloads", required=True)
    s.add_argument("--set", default="detailed")
    s.add_argument("--out", required=True)
    s.add_argument("--name", required=True)
    s = sub.add_parser("hostile")
    s.add_argument("--ws", required=True)
    s.add_argument("--out", required=True)
    a = p.parse_args()
    if getattr(a, "rest", None) and a.rest[0] == "--":
        a.rest = a.rest[1:]
    Path(a.out).mkdir(parents=True, exist_ok=True)
    {
        "noise": cmd_noise,
        "fidelity": cmd_fidelity,
        "sweep": cmd_sweep,
        "profile": cmd_profile,
        "hostile": cmd_hostile,
    }[a.cmd](a)


if __name__ == "__main__":
    main()
