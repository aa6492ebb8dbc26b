"""Watch mode in the real TUI: from a save of the solution's kernel to the paired verdict on screen.

    python3 scripts/bench/bench_watch_verdict.py [--saves 6] [--size 120x40] [--json OUT]

On a fresh copy of the demo workspace (``fibtui demo``), the app runs headless (Textual's
``run_test``) with watch mode on (``w``), the worker service in a private runtime folder, and the
backend the app picks (``local`` on a GPU machine; Triton's CPU interpreter elsewhere, where the
gate is the quick correctness gate and its verdict says there is no speed verdict). Each save
rewrites ``solution/triton/kernel.py`` with one more comment line (the code is the same, so each
gate is the solution against the promoted best on the representatives, as a user's edit loop
would run it); the time is taken from the write to the Runs pane's ``VerdictReady`` message for
the run the save started. The first save is reported apart (it is the first run this worker
serves). Printed per save: save -> watch fired -> run started -> first job done -> run finished ->
verdict, in milliseconds from the write, and the verdict line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


async def measure(saves: int, size: tuple[int, int], wait_s: float = 120.0) -> dict:
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.workspace import open_workspace
    from fibtui.runners.service.client import Client
    from fibtui.ui.app import make_app
    from fibtui.ui.panes.runs import RunsPane

    base = Path(tempfile.mkdtemp(prefix="fbw"))
    runtime = base / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    os.environ["FIBTUI_WORKERS_DAEMON"] = "1"
    root = base / "demo"
    create_demo_workspace(root)
    kernel = root / "solution" / "triton" / "kernel.py"
    source = kernel.read_text()
    messages: list[tuple[float, object]] = []

    def hook(message: object) -> None:
        messages.append((time.monotonic(), message))

    # when the verdict is computed (in the pane's thread), apart from when its message is handled
    computed: list[tuple[float, float]] = []
    plain = RunsPane._verdict_of

    def timed(self, record):
        t = time.monotonic()
        try:
            return plain(self, record)
        finally:
            computed.append((t, time.monotonic()))

    RunsPane._verdict_of = timed
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    rows: list[dict] = []
    try:
        async with app.run_test(size=size, message_hook=hook) as pilot:

            async def until(cond, timeout: float = wait_s, what: str = "") -> None:
                t = time.monotonic()
                while not cond():
                    if time.monotonic() - t > timeout:
                        _report_stall(app, messages, what, timeout)
                        raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
                    await pilot.pause(0.005)

            def service_ready() -> bool:
                status = Client(create=False).ask({"op": "status"}) or {}
                return bool(status.get("ready"))

            runs = app.query_one(RunsPane)
            t_start = time.monotonic()
            await pilot.press("w")
            await until(
                lambda: app.run_control.watch.on and app.pane("regimes").report is not None,
                what="watch mode and the regime analysis",
            )
            print(f"watch mode on after {time.monotonic() - t_start:.1f} s", flush=True)
            for i in range(saves + 1):
                await until(
                    lambda: runs.active_run is None and service_ready(),
                    what="no run in flight and a ready worker",
                )
                if i == 0:
                    print(f"a worker ready after {time.monotonic() - t_start:.1f} s", flush=True)
                await pilot.pause(0.3)  # the watcher settles; nothing in flight
                start = len(messages)
                t0 = time.monotonic()
                kernel.write_text(source + f"\n# save {i}\n")
                n = len(computed)
                row = await _follow(until, messages, start, t0)
                if len(computed) > n:
                    a, b = computed[-1]
                    row["verdict_computed_ms"] = [
                        round((a - t0) * 1000, 1),
                        round((b - t0) * 1000, 1),
                    ]
                row["save"] = i
                rows.append(row)
                print(_line(row), flush=True)
            backend = app.run_control.gates.backend()
    finally:
        Client(create=False).stop()
        shutil.rmtree(base, ignore_errors=True)
    later = rows[1:]
    return {
        "backend": backend,
        "size": f"{size[0]}x{size[1]}",
        "first_save": rows[0],
        "saves": later,
        "median_ms": {
            k: round(statistics.median(r[k] for r in later), 1)
            for k in ("fired_ms", "run_started_ms", "first_job_ms", "run_finished_ms", "verdict_ms")
        },
        "max_verdict_ms": max(r["verdict_ms"] for r in later),
        "load_average": os.getloadavg(),
    }


def _report_stall(app, messages: list, what: str, timeout: float) -> None:
    """What the app did while the bench waited in vain: the kinds of messages since the last
    save, its notifications, its workers."""
    kinds: dict[str, int] = {}
    for _, m in messages[-5000:]:
        kinds[type(m).__name__] = kinds.get(type(m).__name__, 0) + 1
    print(f"stalled {timeout:.0f} s waiting for {what}", flush=True)
    print(f"  messages (last 5000): {kinds}", flush=True)
    for n in list(getattr(app, "_notifications", []))[-10:]:
        print(f"  notification [{n.severity}]: {n.message}", flush=True)
    for w in list(app.workers):
        print(
            f"  worker {w.name} group={w.group} state={w.state.name} error={w.error!r}", flush=True
        )


async def _follow(until, messages: list, start: int, t0: float) -> dict:
    """Times (ms from the save) of the messages that follow it, up to the verdict of its run."""
    from textual.worker import Worker

    from fibtui.runners.events import JobFinished, RunFinished
    from fibtui.ui import messages as ui_messages

    found: dict[str, float] = {}
    run_id: list[str] = []
    seen = [start]
    workers: dict[str, list] = {}  # name -> [started ms, ended ms], from the save

    def scan() -> bool:
        end = len(messages)
        new, seen[0] = messages[seen[0] : end], end
        for at, m in new:
            name = type(m).__name__
            if isinstance(m, Worker.StateChanged):
                span = workers.setdefault(f"{m.worker.name}#{id(m.worker) % 997}", [None, None])
                if m.state.name == "RUNNING":
                    span[0] = round((at - t0) * 1000, 1)
                elif m.state.name in ("SUCCESS", "ERROR", "CANCELLED"):
                    span[1] = round((at - t0) * 1000, 1)
            elif name == "WatchFired":
                found.setdefault("fired_ms", (at - t0) * 1000)
            elif isinstance(m, ui_messages.RunStartedHere):
                found.setdefault("run_started_ms", (at - t0) * 1000)
                if not run_id:
                    run_id.append(m.run_id)
            elif isinstance(m, ui_messages.RunEvent) and run_id and m.run_id == run_id[0]:
                if isinstance(m.event, JobFinished):
                    found.setdefault("first_job_ms", (at - t0) * 1000)
                elif isinstance(m.event, RunFinished):
                    found.setdefault("run_finished_ms", (at - t0) * 1000)
                    found.setdefault("state", m.event.state)
            elif isinstance(m, ui_messages.VerdictReady) and run_id and m.run_id == run_id[0]:
                found["verdict_ms"] = (at - t0) * 1000
                found["verdict"] = m.text
                return True
        return False

    try:
        await until(scan, what="the verdict of the run the save started")
    except SystemExit:
        print(
            f"  seen after the save (ms): {found}; its run: {run_id or 'none started'}", flush=True
        )
        raise
    return {
        "run_id": run_id[0],
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in found.items()},
        # the app's workers seen after the save: where the time between a run's end and its
        # verdict goes (ms from the save; a worker that outlives the verdict has no end)
        "workers": {
            k.split("#")[0]: v for k, v in sorted(workers.items(), key=lambda kv: kv[1][0] or 0)
        },
    }


def _line(r: dict) -> str:
    return (
        f"save {r['save']}: fired {r.get('fired_ms', '-')} ms, run started {r.get('run_started_ms', '-')} ms, "
        f"first job {r.get('first_job_ms', '-')} ms, run finished {r.get('run_finished_ms', '-')} ms, "
        f"verdict {r['verdict_ms']} ms ({r.get('state')}): {r.get('verdict')}\n"
        f"  verdict computed (from, to ms): {r.get('verdict_computed_ms')}; workers (started, ended "
        f"ms): {r.get('workers')}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--saves", type=int, default=6, help="saves measured after the first")
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--wait",
        type=float,
        default=120.0,
        help="seconds to wait for each step before saying where it stalled (the CPU "
        "interpreter's gate of the demo takes minutes: give it 600)",
    )
    args = ap.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    res = asyncio.run(measure(args.saves, (w, h), args.wait))
    m = res["median_ms"]
    print(
        f"{res['backend']} backend, {len(res['saves'])} saves after the first: save -> verdict median "
        f"{m['verdict_ms']} ms (max {res['max_verdict_ms']} ms); fired {m['fired_ms']}, run started "
        f"{m['run_started_ms']}, first job {m['first_job_ms']}, run finished {m['run_finished_ms']} ms; "
        f"first save {res['first_save']['verdict_ms']} ms; load average {res['load_average']}"
    )
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
