"""The worker and the local runner end to end on the CPU (Triton's interpreter): real kernels,
real worker processes, real journals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fibtui.core.runs import list_runs, read_journal
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.runner_helpers import make_candidate, make_tiny_workspace

pytestmark = pytest.mark.slow


def run_ws(root: Path, **opts):
    ws = open_workspace(root)
    options = RunOptions(backend="interpreter", workloads="all", **opts)
    prepared = prepare_run(ws, options)
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    return record, events, prepared


def statuses(record) -> dict[tuple[str, str], str]:
    return {(j["solution"], j["uuid"]): j["status"] for j in record["jobs"]}


def test_paired_run_with_good_wrong_and_unwritten_kernels(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    wrong = make_candidate(root, "wrong_v2", "wrong")
    unwritten = make_candidate(root, "lazy_v3", "unwritten")
    record, events, prepared = run_ws(
        root,
        solutions=[str(root / "solution" / "triton"), str(wrong), str(unwritten)],
        baseline=str(make_candidate(root, "base_py", "good_py")),
    )
    s = statuses(record)
    assert (
        record["state"] == "complete"
        or record["state"] == "failed"
        or record["summary"]["done"] == 12
    )
    assert {v for (sol, _), v in s.items() if sol == "triton"} == {"PASSED"}
    assert {v for (sol, _), v in s.items() if sol == "base_py"} == {"PASSED"}
    assert {v for (sol, _), v in s.items() if sol == "wrong_v2"} == {"INCORRECT_NUMERICAL"}
    assert {v for (sol, _), v in s.items() if sol == "lazy_v3"} == {"INCORRECT_NUMERICAL"}
    assert record["timing_kind"] == "cpu-interpreter"
    good = [j for j in record["jobs"] if j["solution"] == "triton"]
    assert all(j["latency_ms"] > 0 and j["reference_latency_ms"] is not None for j in good)
    assert all(
        j["timing"]["kind"] == "cpu-interpreter"
        and j["timing"]["environment"]["backend"] == "interpreter"
        for j in good
    )
    assert all(
        0 < j["timing"]["job_cpu_s"] for j in good
    )  # the worker's CPU time for the job, beside its wall time
    # and where the job's host time went, phase by phase (fibtui.worker.phases): the phases a
    # checked, timed job passes through, none negative, together the job's wall time
    for j in good:
        phases = j["timing"]["job_phases_ms"]
        assert {"make", "reference", "check", "judge", "setup", "warmup", "launch"} <= set(phases)
        assert all(v >= 0 for v in phases.values())
        assert sum(phases.values()) == pytest.approx(j["wall_s"] * 1000.0, rel=0.02, abs=0.5)
    wrong_jobs = [j for j in record["jobs"] if j["solution"] == "wrong_v2"]
    assert all(j["max_abs_error"] > 0 and "beyond atol" in j["error"] for j in wrong_jobs)
    lazy = next(j for j in record["jobs"] if j["solution"] == "lazy_v3")
    assert "NaN value(s) (unwritten outputs read as NaN)" in lazy["error"]
    # which evaluator judged is part of every judged result
    assert all(j["correctness"]["evaluator"] == "default" for j in good + wrong_jobs + [lazy])
    # the snapshot, not the workspace, is what ran
    snap = prepared.folder / "snapshots"
    assert (snap / "candidate-wrong_v2" / "sources" / "kernel.py").is_file()
    assert json.loads((prepared.folder / "run.json").read_text())["summary"]["total"] == 12
    assert sum(isinstance(e, JobFinished) for e in events) == 12


def test_hostile_kernels_are_contained(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    sols = {
        name: make_candidate(root, name, name)
        for name in ("raises", "exits", "sleeps", "noisy", "syntax")
    }
    record, events, prepared = run_ws(
        root,
        solutions=[str(p) for p in sols.values()] + [str(root / "solution" / "triton")],
        job_timeout_s=10,
    )
    s = {sol: st for (sol, _), st in statuses(record).items()}
    assert s["raises"] == "RUNTIME_ERROR"
    assert s["exits"] == "RUNTIME_ERROR"
    assert s["sleeps"] == "TIMEOUT"
    assert s["noisy"] == "PASSED"  # megabytes on stdout go to the worker log, not the result stream
    assert s["syntax"] == "COMPILE_ERROR"
    assert s["triton"] == "PASSED"  # the good kernel in the same job still gets its own result
    err = {j["solution"]: j["error"] for j in record["jobs"]}
    assert "planted failure" in err["raises"]
    assert "died" in err["exits"] and "7" in err["exits"]
    assert "SyntaxError" in err["syntax"]
    log = (prepared.folder / "worker-0.log").read_bytes()
    # the job's 2 MB of output: its first and last 64 KiB in the log, the byte count said
    assert b"x" * 60_000 in log and b"bytes of this job's output left out" in log
    assert len(log) < 1_000_000
    assert record["summary"]["done"] == 6


def test_a_candidate_that_does_not_build_stops_the_pair_before_the_baseline_is_measured(
    tmp_path: Path,
) -> None:
    """Paired: the candidate's COMPILE_ERROR is known when the worker loads the solutions; every
    job of it is that COMPILE_ERROR at once, and the slow baseline is not measured for nothing
    (its jobs stay pending: the run reads cancelled, with the reason, and can be resumed)."""
    import time

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4), kernel="slow_py")
    broken = make_candidate(root, "broken_v2", "syntax")
    t0 = time.monotonic()
    record, events, prepared = run_ws(root, solutions=[str(broken)], baseline=str(root))
    elapsed = time.monotonic() - t0
    jobs = record["jobs"]
    assert {j["role"] for j in jobs} == {"candidate"}, jobs  # no baseline job ran
    assert len(jobs) == 4 and {j["status"] for j in jobs} == {"COMPILE_ERROR"}
    assert all("SyntaxError" in j["error"] for j in jobs)
    assert record["state"] == "cancelled"
    end = [
        json.loads(line)
        for line in (prepared.folder / "journal.jsonl").read_text().splitlines()
        if '"kind": "end"' in line
    ][-1]
    assert "COMPILE_ERROR" in end["reason"] and "baseline" in end["reason"], end
    # 4 baseline jobs of a 0.25 s-a-call kernel would take far longer than loading the worker
    assert elapsed < 60, elapsed


def test_kill_the_runner_and_resume_exactly_once(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4, 5, 6), kernel="slow_py")
    script = (
        "import sys\n"
        "from fibtui.cli import main\n"
        f"sys.exit(main(['run', '--backend', 'interpreter', '--workloads', 'all', '--workspace', {str(root)!r}]))\n"
    )
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    runs_dir = root / "optimize_ops" / "runs"
    deadline = time.monotonic() + 120
    journal = None
    while time.monotonic() < deadline:
        found = list(runs_dir.glob("*/journal.jsonl")) if runs_dir.is_dir() else []
        if found and len(found[0].read_text().splitlines()) >= 3:  # header + 2 results
            journal = found[0]
            break
        time.sleep(0.05)
    assert journal is not None, "the run never got going"
    assert any(
        scratch.iterdir()
    )  # the worker's scratch folder (its current folder and build folder)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # the orphaned worker exits and removes its scratch folder, which the killed runner could not
    deadline = time.monotonic() + 30
    while any(scratch.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = sorted(str(p.relative_to(scratch)) for p in scratch.rglob("*"))
    assert left == [], (
        f"left behind (the full suite saw this twice; the contents say by whom): {left[:20]}"
    )
    before = read_journal(journal)
    assert 2 <= len(before.results) < 6
    listing = {r.run_id: r for r in list_runs(root / "optimize_ops")}
    run_id = journal.parent.name
    assert listing[run_id].state == "interrupted"
    ws = open_workspace(root)
    prepared = prepare_resume(ws, run_id)
    record = prepared.runner.run(lambda e: None).to_json()
    after = read_journal(journal)
    assert len(after.results) == 6 and not after.duplicate_lines
    assert {k: v.latency_ms for k, v in before.results.items()} == {
        k: after.results[k].latency_ms for k in before.results
    }
    assert record["state"] == "complete" and record["summary"]["passed"] == 6


def test_cancel_stops_and_resume_finishes(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4))
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all"))
    cancel = threading.Event()

    def on_event(e):
        if isinstance(e, JobFinished) and e.done >= 1:
            cancel.set()

    record = prepared.runner.run(on_event, cancel).to_json()
    assert record["state"] == "cancelled" and record["summary"]["done"] < 4
    record = prepare_resume(ws, prepared.run_id).runner.run(lambda e: None).to_json()
    assert record["state"] == "complete" and record["summary"]["done"] == 4


def test_demo_gate_on_the_interpreter(demo_ws: Path) -> None:
    """The bundled demo kernel, real Triton, smallest workloads: every job PASSED."""
    ws = open_workspace(demo_ws)
    workloads = ws.dataset().workloads("demo_gdn_decode_qk4_v8_d128_k_last")
    small = [u for u in workloads.uuids if workloads.axes_of(u)["batch_size"] == 1][:2]
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads=",".join(small)))
    record = prepared.runner.run(lambda e: None).to_json()
    assert record["summary"]["passed"] == 2 and record["summary"]["complete"]
    assert all(j["max_abs_error"] < 0.5 for j in record["jobs"])


def test_cli_run_json_and_runs_list(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fibtui",
            "run",
            "--backend",
            "interpreter",
            "--workloads",
            "all",
            "--json",
            "--workspace",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        list(scratch.iterdir()) == []
    )  # no worker scratch or build folder left in the temp folder
    rec = json.loads(proc.stdout)
    assert {"run_id", "backend", "timing_kind", "jobs", "summary"} <= set(rec)
    assert rec["backend"] == "interpreter" and rec["timing_kind"] == "cpu-interpreter"
    assert {
        "uuid",
        "solution",
        "role",
        "repeat",
        "status",
        "latency_ms",
        "reference_latency_ms",
        "max_abs_error",
        "max_rel_error",
        "error",
    } <= set(rec["jobs"][0])
    assert (
        rec["summary"]["total"] == 2
        and rec["summary"]["passed"] == 2
        and rec["summary"]["complete"]
    )
    assert "[1/2]" in proc.stderr or "[2/2]" in proc.stderr  # live progress on stderr
    proc = subprocess.run(
        [sys.executable, "-m", "fibtui", "runs", "list", "--json", "--workspace", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    runs = json.loads(proc.stdout)["runs"]
    assert runs[0]["run_id"] == rec["run_id"] and runs[0]["state"] == "complete"
    assert {"run_id", "state", "jobs_done", "jobs_total", "backend", "started"} <= set(runs[0])


def test_run_refuses_bad_options(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    for argv, needle in (
        (["--workloads", "nope"], "no workload 'nope'"),
        (["--backend", "warp-drive"], "unknown backend"),
        (["--solution", str(tmp_path / "missing")], "not a solution folder"),
        (["--resume", "no-such-run"], "no run 'no-such-run'"),
    ):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "fibtui",
                "run",
                "--workspace",
                str(root),
                "--backend",
                "interpreter",
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (argv, proc.stderr)
        assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_retry_failed_jobs_merges_back_into_the_same_run(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    kernel = root / "solution" / "triton" / "kernel.py"
    good = kernel.read_text()
    kernel.write_text(good.replace("* alpha, mask=mask)", "* alpha * 1.5, mask=mask)"))
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="interpreter", workloads="all"))
    record = prepared.runner.run(lambda e: None).to_json()
    assert record["summary"]["passed"] == 0
    # A retry reruns the run's own snapshot (never the workspace): still wrong, still one journal.
    from fibtui.services.runs import prepare_retry

    record = prepare_retry(ws, prepared.run_id).runner.run(lambda e: None).to_json()
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 2 and record["summary"]["done"] == 2
    assert all(
        r.status == "INCORRECT_NUMERICAL" and r.attempt == 1 for r in contents.results.values()
    )
    assert (
        sum(
            1
            for line in (prepared.folder / "journal.jsonl").read_text().splitlines()
            if '"kind":"result"' in line
        )
        == 4
    )


def test_stale_scratch_of_a_dead_runner_is_swept_and_a_live_one_kept(tmp_path: Path) -> None:
    from fibtui.runners.local import SCRATCH_PREFIX, sweep_stale_scratch

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{SCRATCH_PREFIX}{dead.pid}-abc"
    (stale / "build").mkdir(parents=True)
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getppid()}-def"
    live.mkdir()
    mine = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-ghi"
    mine.mkdir()
    other = tmp_path / "fibtui-worker-cwd-oldstyle"
    other.mkdir()
    assert sweep_stale_scratch(str(tmp_path)) == 1
    assert not stale.exists() and live.is_dir() and mine.is_dir() and other.is_dir()


def test_eta_is_paced_from_the_first_result_not_from_start_up(tmp_path: Path, monkeypatch) -> None:
    """Workers take 9 s to start, then results come every second or so: the ETA follows that pace (not 9 s
    of start-up spread over every job), and none is shown from results that landed at once."""
    from fibtui.core.runs import JobSpec, Journal, RunHeader, SolutionRef
    from fibtui.runners import journaling

    folder = tmp_path / "run"
    folder.mkdir()
    header = RunHeader(
        run_id="run",
        definition="d",
        backend="local",
        timing_kind="cupti",
        l2_policy="cold",
        solutions=[SolutionRef("k", "candidate", "snapshots/candidate-k")],
        jobs=[JobSpec(f"wl-{i}", {"n": i}, "k", "candidate", 0) for i in range(10)],
        repeats=1,
        workload_selection="all",
        started="2026-01-01T00:00:00+00:00",
    )
    Journal(folder).write_header(header)
    clock = [100.0]
    monkeypatch.setattr(journaling.time, "monotonic", lambda: clock[0])
    recorder = journaling.JobRecorder(folder, header, {"s0": ("candidate", "k")})
    etas = []
    # the first two land together (a pair), then one a second
    for i, t in enumerate((109.0, 109.0, 110.0, 111.0)):
        clock[0] = t
        recorder.record(
            "s0",
            f"wl-{i}",
            0,
            1,
            {"status": "PASSED", "latency_ms": 0.01},
            lambda e: etas.append(e.eta_s) if isinstance(e, JobFinished) else None,
        )
    assert etas == [None, None, 3.5, 4.0]  # 2 results in 1 s, 7 left; then 3 in 2 s, 6 left
