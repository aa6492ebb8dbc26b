#!/usr/bin/env python3
"""flashinfer-bench's own build time for a solution folder (config.toml + solution/<language>/):
``BuilderRegistry.build`` in a fresh process with an empty FIB_CACHE_PATH (the first build), then
in a second fresh process over the same cache (what its next run pays). Prints one JSON line.

    python3 scripts/bench/bench_fib_build.py --solution DIR --dataset DATASET [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

CHILD = r"""
import json, sys, time
from flashinfer_bench.compile import BuilderRegistry
from flashinfer_bench.data import Definition, Solution
req = json.load(open(sys.argv[1]))
definition = Definition.model_validate(req["definition"])
solution = Solution.model_validate(req["solution"])
t0 = time.perf_counter()
try:
    BuilderRegistry.get_instance().build(definition, solution)
    ok, err = True, None
except Exception as exc:
    ok, err = False, f"{type(exc).__name__}: {str(exc)[:300]}"
print(json.dumps({"ok": ok, "build_s": time.perf_counter() - t0, "error": err}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solution", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument(
        "--cache", help="FIB_CACHE_PATH to use (default: a new temp folder, removed after)"
    )
    args = ap.parse_args()
    folder = Path(args.solution)
    cfg = tomllib.loads((folder / "config.toml").read_text())
    build = cfg["build"]
    src = folder / "solution" / build["language"]
    sources = [
        {"path": p.relative_to(src).as_posix(), "content": p.read_text()}
        for p in sorted(src.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    ]
    spec = {
        "language": build["language"],
        "target_hardware": ["cuda"],
        "entry_point": build["entry_point"],
        "destination_passing_style": build.get("destination_passing_style", True),
    }
    if build.get("binding"):
        spec["binding"] = build["binding"]
    name = cfg["solution"]["definition"]
    definition = json.loads(
        next(Path(args.dataset).glob(f"definitions/**/{name}.json")).read_text()
    )
    solution = {
        "name": cfg["solution"]["name"],
        "definition": name,
        "author": cfg["solution"].get("author") or "?",
        "spec": spec,
        "sources": sources,
    }
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="fib-build-cache-"))
    req = cache.parent / f"{cache.name}-request.json"
    req.write_text(json.dumps({"definition": definition, "solution": solution}))
    out = {
        "solution": solution["name"],
        "language": spec["language"],
        "binding": spec.get("binding"),
    }
    env = dict(os.environ, FIB_CACHE_PATH=str(cache))
    for phase in ("first", "again"):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(req)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=900,
        )
        line = (proc.stdout.strip().splitlines() or [""])[-1]
        try:
            out[phase] = json.loads(line)
        except ValueError:
            out[phase] = {
                "ok": False,
                "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}",
            }
    print(json.dumps(out))
    req.unlink(missing_ok=True)
    if not args.cache:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
