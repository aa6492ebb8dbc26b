"""``fibtui check --deep``: build every solution in a worker subprocess before a run does.

Python/Triton solutions are imported as the worker imports them (no GPU needed: Triton's
interpreter mode when there is none); CUDA/C++ ones are compiled into the build cache where this
machine can (so the run that follows compiles nothing), and are reported as UNSUPPORTED_HERE with
the reason where it cannot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fibtui.runners.local import scrubbed_environment
from fibtui.runners.session import default_build_cache_dir
from fibtui.worker.wire import Event, event_of


def check_builds(solutions: list[Any], gpu: bool, timeout_s: float = 900.0) -> list[dict[str, Any]]:
    """Per solution, in order: ``{"ok": True, ...}`` or ``{"ok": False, "status", "error", "where"}``.
    ``solutions``: :class:`fibtui.core.plan.SolutionSource` objects."""
    if not solutions:
        return []
    ids = {f"s{i}": sol for i, sol in enumerate(solutions)}
    request = {
        "device_type": "cuda" if gpu else "cpu",
        "build_cache_dir": default_build_cache_dir(),
        "solutions": [
            {
                "id": sid,
                "name": sol.name,
                "spec": {
                    "language": sol.language,
                    "entry_point": sol.entry_point,
                    "destination_passing_style": sol.dps,
                    "binding": sol.binding,
                },
                "sources": sol.sources,
            }
            for sid, sol in ids.items()
        ],
    }
    env = scrubbed_environment(dict(os.environ))
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if not gpu:
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    with tempfile.TemporaryDirectory(prefix="fibtui-buildcheck-") as tmp:
        path = Path(tmp) / "request.json"
        path.write_text(json.dumps(request), encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "fibtui.worker", "buildcheck", "--request", str(path)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
                cwd=tmp,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return [
                {"ok": False, "status": "TIMEOUT", "error": f"building took over {timeout_s:.0f} s"}
                for _ in solutions
            ]
    event = None
    for line in proc.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if event_of(obj) == Event.BUILDCHECK:
            event = obj
    if event is None:
        tail = " | ".join(line.strip() for line in proc.stderr.strip().splitlines()[-3:])
        why = f"the worker could not check the builds (exit {proc.returncode}): {tail[:400]}"
        return [{"ok": False, "status": "UNSUPPORTED_HERE", "error": why} for _ in solutions]
    results = event.get("results") or {}
    return [
        results.get(sid, {"ok": False, "status": "UNSUPPORTED_HERE", "error": "no result"})
        for sid in ids
    ]
