"""What ``fibtui run --workloads rep`` costs outside the worker: before RunStarted, and from the
last job to the verdict. Each phase is timed in fresh Python processes, several times; medians.

    python3 scripts/bench/bench_gate_overhead.py                      # interpreter backend, 7 repetitions
    python3 scripts/bench/bench_gate_overhead.py --backend local      # a GPU machine
    python3 scripts/bench/bench_gate_overhead.py --reps 11 --json out.json

On a fresh demo workspace (``fibtui demo DIR --no-tui``):

* **start** runs ``fibtui run --backend B --workloads rep --baseline solution/triton --solution
  candidates/v2_smallb_splitv --no-daemon`` through a thin wrapper (this script with ``--as-cli``)
  that stamps, on the system-wide monotonic clock, when the CLI's code starts and when RunStarted
  comes (the plan is resolved, the solutions snapshotted, the journal's header written); there the
  wrapper removes the new run's folder (so every call sees the same workspace) and exits without
  running a job. Printed: python+imports (process start to the CLI's code), plan+snapshot (the
  CLI's code to RunStarted) and their sum.
* **verdict** replays a paired run's ending (this script with ``--as-verdict``): a copy of the
  demo's archived paired representative run (its journal without the end line, run.json gone, as
  a run stands when its last job was recorded) becomes the workspace's newest run; a fresh process
  does what ``fibtui run`` did before its jobs (the workspace, the representatives), then is
  timed from there as the CLI goes on after the last job: the recorder's finish (the end line,
  run.json), the verdict (services.decide.run_verdict), the summary and the verdict's lines.
  Printed: finish, verdict, print and their sum (what bench_cli_gate.py's "record+summary" holds
  besides the worker's close).

``--history N`` first adds N earlier finished gates to the workspace (copies of that paired run), as
a workspace holds them after a loop of N edits: what the command reads grows with them.

The timing starts 2.5 s after the workspace is made, so that its runs are settled as earlier
runs are in use (fibtui keeps what it read of a run in the user's cache folder only once the
run's files stopped changing: docs/architecture.md, "What a command keeps between runs"). The
first call of each phase is a warm-up (not counted: it writes the byte-code caches and fills
that cache; a command after runs changed reads them once, as before).
``--tree DIR`` times the fibtui of another checkout (say, the commit before a change, from ``git
archive``) with this same script; ``--profile DIR`` also writes a cProfile listing of one more call
of each phase there (start.prof.txt, verdict.prof.txt).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: the demo's archived paired representative run (3 workloads x 3 repeats x 2 solutions, H200)
PAIRED_RUN = "20261129-103529_demo_local"
#: seconds to wait after making the workspace, past fibtui.core.cachefile.SETTLE_S
SETTLE_WAIT_S = 2.5
GATE = ["--baseline", "solution/triton", "--solution", "candidates/v2_smallb_splitv"]
_STAMPS: dict[str, float] = {}


def _stamp(name: str) -> None:
    _STAMPS[name] = time.monotonic()


def _emit() -> None:
    sys.stderr.write("BENCH " + json.dumps(_STAMPS) + "\n")
    sys.stderr.flush()


def _profiler():
    """A running cProfile when FIBTUI_BENCH_PROFILE names the listing to write, else None."""
    if not os.environ.get("FIBTUI_BENCH_PROFILE"):
        return None
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    return prof


def _write_profile(prof) -> None:
    if prof is None:
        return
    import io
    import pstats

    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(70)
    Path(os.environ["FIBTUI_BENCH_PROFILE"]).write_text(out.getvalue())


def _as_cli(tree: str, argv: list[str]) -> int:
    """``fibtui ARGV`` up to RunStarted: stamp it, remove the run's folder, exit."""
    _stamp("cli_start")
    sys.path.insert(0, tree)
    prof = _profiler()
    from fibtui.cli import main
    from fibtui.runners.events import RunStarted
    from fibtui.verbs import run as run_verb

    printer_call = run_verb._Printer.__call__

    def at_run_started(self, event):
        if isinstance(event, RunStarted):
            _stamp("run_started")
            _write_profile(prof)
            shutil.rmtree(event.folder, ignore_errors=True)
            _emit()
            os._exit(0)
        return printer_call(self, event)

    run_verb._Printer.__call__ = at_run_started
    code = main(argv)
    _emit()
    return 3 if code == 0 else code  # RunStarted never came


def _as_verdict(tree: str, root: str, folder: str) -> int:
    """The ending of ``fibtui run`` on the run in ``folder`` (see the module's docstring)."""
    _stamp("cli_start")
    sys.path.insert(0, tree)
    import argparse as _argparse

    from fibtui.core.runs import read_journal
    from fibtui.runners.journaling import JobRecorder, SolutionIds
    from fibtui.verbs import run as run_verb
    from fibtui.verbs._common import workspace_from
    from fibtui.verbs.compare import print_verdict

    args = _argparse.Namespace(workspace=root, json=False, definition=None)
    ws = workspace_from(args)
    assert ws is not None
    run_verb._representatives(ws, _argparse.Namespace(workloads="rep", definition=None))
    header = read_journal(Path(folder) / "journal.jsonl").header
    recorder = JobRecorder(
        Path(folder), header, SolutionIds(header, {r.key: {} for r in header.solutions}).ref_of
    )
    recorder.resume()
    printer = run_verb._Printer(stream=open(os.devnull, "w"))
    _stamp("last_job")
    prof = _profiler()
    record = recorder.finish(False, printer)
    _stamp("finished")
    outcome = run_verb._verdict(args, record)
    _stamp("verdict")
    printer.summary(record)
    if outcome is not None:
        print_verdict(printer.con, outcome)
    _stamp("printed")
    _write_profile(prof)
    _STAMPS["word"] = 0.0 if outcome is None else 1.0
    if outcome is not None:
        sys.stdout.write(json.dumps(outcome.to_json(), sort_keys=True) + "\n")
    _emit()
    return 0


def _stamps_of(stderr: str) -> dict[str, float]:
    for line in stderr.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])
    return {}


def start_call(
    tree: Path, root: Path, argv: list[str], env: dict[str, str]
) -> dict[str, float] | None:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--as-cli", str(tree), *argv],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    s = _stamps_of(proc.stderr)
    if proc.returncode != 0 or "run_started" not in s:
        sys.stderr.write(proc.stdout + proc.stderr)
        return None
    return {
        "python+imports": s["cli_start"] - t0,
        "plan+snapshot": s["run_started"] - s["cli_start"],
        "to RunStarted": s["run_started"] - t0,
    }


def _copy_run(runs: Path, run_id: str, finished: bool) -> Path:
    """A copy of the paired run named ``run_id``: finished (its end line and run.json), or as it
    stands when its last job was recorded (no end line, no run.json)."""
    src = runs / PAIRED_RUN
    dst = runs / run_id
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src / "snapshots", dst / "snapshots")
    lines = (src / "journal.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["run_id"] = run_id
    kept = [json.dumps(header)] + [ln for ln in lines[1:] if finished or '"kind": "end"' not in ln]
    (dst / "journal.jsonl").write_text("\n".join(kept) + "\n")
    if finished:
        record = json.loads((src / "run.json").read_text())
        record["run_id"] = run_id
        (dst / "run.json").write_text(json.dumps(record))
    return dst


def _add_history(root: Path, gates: int) -> None:
    """``gates`` earlier finished representative gates (copies of the paired run), newer than the
    demo's archived runs and older than any run the benchmark makes: a workspace after a loop."""
    runs = root / "optimize_ops" / "runs"
    for i in range(gates):
        stamp = f"20261130-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}"
        _copy_run(runs, f"{stamp}_demo_local", finished=True)


def _replay_folder(root: Path) -> Path:
    """A copy of the paired run as it stands after its last job, as the workspace's newest run."""
    run_id = (
        time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "_demo_local"
    )  # as new_run_dir names it
    return _copy_run(root / "optimize_ops" / "runs", run_id, finished=False)


def verdict_call(
    tree: Path, root: Path, env: dict[str, str]
) -> tuple[dict[str, float] | None, str]:
    folder = _replay_folder(root)
    script = str(Path(__file__).resolve())
    try:
        proc = subprocess.run(
            [sys.executable, script, "--as-verdict", str(tree), str(root), str(folder)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    s = _stamps_of(proc.stderr)
    if proc.returncode != 0 or "printed" not in s:
        sys.stderr.write(proc.stdout + proc.stderr)
        return None, ""
    return {
        "finish": s["finished"] - s["last_job"],
        "verdict": s["verdict"] - s["finished"],
        "print": s["printed"] - s["verdict"],
        "last job to verdict": s["printed"] - s["last_job"],
    }, proc.stdout.strip().replace(folder.name, "<run>")


def _summary(name: str, calls: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    print(f"{name}: {len(calls)} calls (medians; min-max)")
    for key in calls[0]:
        values = [c[key] for c in calls]
        out[key] = {
            "median_s": round(statistics.median(values), 4),
            "min_s": round(min(values), 4),
            "max_s": round(max(values), 4),
        }
        print(
            f"    {key:<20} {statistics.median(values):.3f} s  "
            f"({min(values):.3f}-{max(values):.3f})"
        )
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-cli":
        return _as_cli(sys.argv[2], sys.argv[3:])
    if len(sys.argv) > 1 and sys.argv[1] == "--as-verdict":
        return _as_verdict(sys.argv[2], sys.argv[3], sys.argv[4])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="interpreter", choices=("interpreter", "local"))
    ap.add_argument("--reps", type=int, default=7, help="counted calls per phase")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--tree", type=Path, default=REPO, help="the checkout whose fibtui is timed")
    ap.add_argument("--profile", type=Path, help="write cProfile listings of one call here")
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        metavar="N",
        help="first add N earlier finished gates to the workspace (copies of the paired run)",
    )
    args = ap.parse_args()
    tree = args.tree.resolve()

    base = Path(tempfile.mkdtemp(prefix="fbo", dir="/tmp"))
    root = base / "demo"
    env = dict(os.environ, XDG_RUNTIME_DIR=str(base), FIBTUI_WORKERS_DAEMON="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # else every import compiles again
    env["PYTHONPATH"] = str(tree) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "fibtui", "demo", str(root), "--no-tui"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _add_history(root, args.history)
        # the workspace's runs are as old as they are in use (not written this second): fibtui
        # keeps what it read of a run only once its files are settled (fibtui.core.cachefile)
        time.sleep(SETTLE_WAIT_S)
        argv = ["run", "--backend", args.backend, "--workloads", "rep", *GATE, "--no-daemon"]
        print(f"fibtui {' '.join(argv)}   (workspace {root}; fibtui of {tree})")
        if args.history:
            print(f"the workspace holds {args.history} earlier gates (copies of {PAIRED_RUN})")
        print(f"load average at the start {os.getloadavg()}")
        starts = [start_call(tree, root, argv, env) for _ in range(args.reps + 1)][1:]
        verdicts = [verdict_call(tree, root, env) for _ in range(args.reps + 1)][1:]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for name, call in (("start", start_call), ("verdict", verdict_call)):
                penv = dict(env, FIBTUI_BENCH_PROFILE=str(args.profile / f"{name}.prof.txt"))
                call(tree, root, argv, penv) if name == "start" else call(tree, root, penv)
        if any(c is None for c in starts) or any(v[0] is None for v in verdicts):
            print("a call failed (its output is above)")
            return 1
        result = {
            "argv": argv,
            "history_gates": args.history,
            "python": sys.executable,
            "start": _summary("start (process start to RunStarted)", starts),  # type: ignore[arg-type]
            "verdict": _summary(
                "verdict (replayed: the last job recorded to the verdict printed)",
                [v[0] for v in verdicts],  # type: ignore[misc]
            ),
        }
        outcomes = {v[1] for v in verdicts}
        print(f"verdicts: {len(outcomes)} distinct outcome(s) over the calls")
        result["verdict_outcome"] = json.loads(next(iter(outcomes))) if outcomes else None
        print(f"load average at the end {os.getloadavg()}")
        result["load_average_end"] = os.getloadavg()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
