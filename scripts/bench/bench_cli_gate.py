"""A CLI gate with and without the worker service: wall time from command start to the verdict.

    python3 scripts/bench/bench_cli_gate.py --backend interpreter            # this CPU machine
    python3 scripts/bench/bench_cli_gate.py --backend local                  # a GPU machine
    python3 scripts/bench/bench_cli_gate.py --backend local -- --baseline solution/triton \\
        --solution candidates/v2_smallb_splitv                          # a paired gate

On a fresh demo workspace (``fibtui demo DIR --no-tui``) it runs ``fibtui run --workloads rep``
(plus any arguments after ``--``, run from the workspace) first ``--no-daemon`` (``--plain N``
times), then with the worker service ``--daemon N`` times (3 by default): the first of those
starts the service, the later ones find a worker ready. The service starts a run's next worker
only once that run is over (never beside a measurement), so before each later call the script
waits until ``fibtui workers status`` shows one ready (the time an edit between two gates takes;
the wait is printed), and then makes ``--at-once N`` more calls (1 by default) straight after
the previous one, which wait inside ``fibtui run`` for the worker still starting. The service runs in a private runtime
folder (XDG_RUNTIME_DIR) made for this benchmark and is stopped at the end, so a service of
yours is neither used nor disturbed.

Each call is ``fibtui run`` in a fresh Python process, through a thin wrapper (this script with
``--as-cli``) that stamps, on the system-wide monotonic clock, when the CLI's code starts, when
the run starts (RunStarted: the plan is resolved and the solutions are snapshotted), when slot
0's worker is acquired (taken from the service, or started and ready) and loaded, the first and
last job, and the verdict (the summary line). Printed per call: the wall times from command start
and where they went.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_STAMPS: dict[str, float] = {}


def _stamp(name: str, first: bool = True) -> None:
    if not first or name not in _STAMPS:
        _STAMPS[name] = time.monotonic()


def _as_cli(argv: list[str]) -> int:
    """``fibtui ARGV`` with time stamps (JSON on stderr, one ``BENCH`` line at the end)."""
    _stamp("cli_start")
    sys.path.insert(0, str(REPO))
    from fibtui.cli import main
    from fibtui.runners import local
    from fibtui.runners.events import JobFinished, JobStarted, RunStarted
    from fibtui.verbs import run as run_verb

    start_worker = local.LocalRunner._start_worker
    take_warm = local.LocalRunner._take_warm
    send = local.WorkerProcess.send
    printer_call = run_verb._Printer.__call__
    summary = run_verb._Printer.summary

    def timed_start_worker(self, slot, on_event, cancel):
        if slot == 0:
            _stamp("worker_asked")
        w = start_worker(self, slot, on_event, cancel)
        if slot == 0:
            _stamp("worker_loaded")
        return w

    def timed_take_warm(self, slot, log, on_event, cancel):
        w = take_warm(self, slot, log, on_event, cancel)
        if slot == 0:
            _STAMPS.setdefault("taken_from_service", 1.0 if w is not None else 0.0)
        return w

    close = local.WorkerProcess.close

    def timed_close(self):
        _stamp("worker_close")
        close(self)
        _stamp("worker_closed")

    local.WorkerProcess.close = timed_close

    def timed_send(self, obj):
        if obj.get("op") == "load":
            _stamp("load_sent")
        return send(self, obj)

    def timed_printer(self, event):
        if isinstance(event, RunStarted):
            _stamp("run_started")
        elif isinstance(event, JobStarted):
            _stamp("first_job_started")
        elif isinstance(event, JobFinished):
            _stamp("last_job_finished", first=False)
        return printer_call(self, event)

    def timed_summary(self, record):
        out = summary(self, record)
        _stamp("verdict")
        return out

    local.LocalRunner._start_worker = timed_start_worker
    local.LocalRunner._take_warm = timed_take_warm
    local.WorkerProcess.send = timed_send
    run_verb._Printer.__call__ = timed_printer
    run_verb._Printer.summary = timed_summary
    try:
        return main(argv)
    finally:
        sys.stderr.write("BENCH " + json.dumps(_STAMPS) + "\n")
        sys.stderr.flush()


def one_call(root: Path, argv: list[str], env: dict[str, str], log: Path) -> dict:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--as-cli", *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    t_end = time.monotonic()
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    stamps: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if line.startswith("BENCH "):
            stamps = json.loads(line[6:])
    rel = {k: round(v - t0, 3) for k, v in stamps.items() if k != "taken_from_service"}
    lines = proc.stdout.splitlines()
    summary = [ln.strip() for ln in lines if " PASSED (" in ln or " PASSED  mean " in ln]
    return {
        "exit_code": proc.returncode,
        "wall_s": round(t_end - t0, 3),
        "stamps_s": rel,
        "taken_from_service": bool(stamps.get("taken_from_service")),
        "summary": " | ".join(summary) if summary else None,
    }


def phases(call: dict) -> dict[str, float | None]:
    s = call["stamps_s"]

    def span(a: str, b: str) -> float | None:
        return round(s[b] - s[a], 3) if a in s and b in s else None

    return {
        "python+imports": s.get("cli_start"),
        "plan+snapshot": span("cli_start", "run_started"),
        "worker acquired": span("worker_asked", "load_sent"),
        "load": span("load_sent", "worker_loaded"),
        "jobs": span("first_job_started", "last_job_finished"),
        "record+summary": span("last_job_finished", "verdict"),
        "to verdict": s.get("verdict"),
        "to exit": call["wall_s"],
    }


def _wait_ready(env: dict[str, str], timeout_s: float = 120.0) -> float | None:
    """Seconds until the service shows a ready worker (None: none within ``timeout_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        out = subprocess.run(
            [sys.executable, "-m", "fibtui", "workers", "status", "--json"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        try:
            if json.loads(out).get("ready"):
                return round(time.monotonic() - t0, 2)
        except json.JSONDecodeError:
            pass
        time.sleep(0.25)
    return None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-cli":
        return _as_cli(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="interpreter", choices=("interpreter", "local"))
    ap.add_argument("--workloads", default="rep")
    ap.add_argument("--plain", type=int, default=1, help="calls with --no-daemon first")
    ap.add_argument("--daemon", type=int, default=3, help="calls with the worker service")
    ap.add_argument(
        "--at-once", type=int, default=1, help="service calls right after the previous, no wait"
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the demo workspace and logs")
    ap.add_argument("extra", nargs="*", help="after --: more `fibtui run` arguments")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="fbg", dir="/tmp"))
    runtime = base / "run"
    runtime.mkdir(mode=0o700)
    root = base / "demo"
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), FIBTUI_WORKERS_DAEMON="1")
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    subprocess.run(
        [sys.executable, "-m", "fibtui", "demo", str(root), "--no-tui"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    argv = ["run", "--backend", args.backend, "--workloads", args.workloads, *args.extra]
    print(f"fibtui {' '.join(argv)}   (workspace {root}; load average {os.getloadavg()})")
    calls = []
    try:
        plan = (
            [("--no-daemon", True)] * args.plain
            + [("service", False)] * args.daemon
            + [("at once", False)] * args.at_once
        )
        for i, (label, plain) in enumerate(plan):
            waited = None
            if label == "service" and any(c["mode"] == "service" for c in calls):
                waited = _wait_ready(env)
                print(f"    (waited {waited} s for the service's next worker to be ready)")
            call = one_call(
                root, argv + (["--no-daemon"] if plain else []), env, base / f"call{i}.log"
            )
            call["mode"] = label
            call["waited_for_ready_s"] = waited
            call["load_average"] = os.getloadavg()
            calls.append(call)
            p = phases(call)
            how = "own worker" if plain or not call["taken_from_service"] else "service worker"
            print(
                f"call {i + 1} {label:<11} ({how}): verdict at {p['to verdict']} s, exit "
                f"{p['to exit']} s, exit code {call['exit_code']}"
            )
            print(
                "    "
                + "  ".join(f"{k} {v if v is not None else '-'}" for k, v in p.items())
                + f"   [{call['summary']}]"
            )
        status = subprocess.run(
            [sys.executable, "-m", "fibtui", "workers", "status"],
            env=env,
            capture_output=True,
            text=True,
        ).stdout
        print("worker service after the calls:\n" + status.rstrip())
    finally:
        subprocess.run(
            [sys.executable, "-m", "fibtui", "workers", "stop"],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")
    print(f"load average at the end {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps({"argv": argv, "calls": calls}, indent=1) + "\n")
    return 0 if all(c["exit_code"] == 0 for c in calls) else 1


if __name__ == "__main__":
    raise SystemExit(main())
