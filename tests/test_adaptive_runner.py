"""Adaptive repeats in the local runner, end to end on the CPU (Triton's interpreter): the task
queue gets a workload's next repeat only while the rule says undecided, the journal says why each
workload and the run stopped, and an interrupted adaptive run resumes without redoing a job."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fibtui.core import stats
from fibtui.core.runs import list_runs, read_journal, run_state
from fibtui.core.sequential import Assessment, SequentialPlan, WorkloadState
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, LogLine
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.runner_helpers import make_candidate, make_tiny_workspace

pytestmark = pytest.mark.slow


class Scripted:
    """A rule that decides the workloads in ``decided`` at their first look, never the others."""

    def __init__(self, cap: int, decided) -> None:
        self.plan = SequentialPlan(cap)
        self.decided = set(decided)
        self.looks: list[dict[str, int]] = []

    def assess(self, rows, repeats):
        self.looks.append(dict(repeats))
        states = {
            u: WorkloadState(
                u, n, "faster" if u in self.decided else "undecided", u in self.decided
            )
            for u, n in repeats.items()
        }
        return Assessment(max(repeats.values()), False, "scripted", states)


def _fibtui(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fibtui", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_a_decided_workload_gets_no_more_repeats_and_a_resume_keeps_it(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3))
    ws = open_workspace(root)
    options = RunOptions(
        backend="interpreter", workloads="all", baseline=str(root / "solution" / "triton"),
        repeats=3, adaptive=True,
    )  # fmt: skip
    prepared = prepare_run(ws, options)
    header = prepared.header
    assert header.settings["adaptive"]["cap"] == 3 and len(header.jobs) == 18
    n1 = next(j.uuid for j in header.jobs if j.axes["n"] == 1)
    prepared.runner.adaptive = Scripted(3, {n1})
    cancel = threading.Event()
    events: list[object] = []

    def on_event(e):
        events.append(e)
        if isinstance(e, JobFinished) and e.done >= 8:  # into the second pass
            cancel.set()

    record = prepared.runner.run(on_event, cancel).to_json()
    assert record["state"] == "cancelled"
    assert record["adaptive"]["workloads"][n1]["reason"] == "decided"
    assert any(
        isinstance(e, LogLine) and "1 workload(s) stop (1 decided)" in e.text for e in events
    )
    # resumed: the stopped workload stays stopped, the others run to the cap
    resumed = prepare_resume(ws, prepared.run_id)
    rule = Scripted(3, {n1})
    resumed.runner.adaptive = rule
    record = resumed.runner.run(lambda e: None).to_json()
    assert record["state"] == "complete" and record["summary"]["complete"]
    repeats = {}
    for j in record["jobs"]:
        repeats.setdefault(j["uuid"], set()).add(j["repeat"])
    assert repeats[n1] == {0} and all(r == {0, 1, 2} for u, r in repeats.items() if u != n1)
    s = record["summary"]
    assert (s["planned"], s["skipped"], s["total"], s["done"]) == (18, 4, 14, 14)
    stops = record["adaptive"]["workloads"]
    assert stops[n1]["repeats"] == 1 and {stops[u]["reason"] for u in stops if u != n1} == {"cap"}
    assert record["adaptive"]["stopped"] == "cap reached"
    contents = read_journal(resumed.folder / "journal.jsonl")
    assert not contents.duplicate_lines and not contents.corrupt_lines
    assert run_state(resumed.folder, contents) == "complete"
    listing = next(r for r in list_runs(ws.archive_root) if r.run_id == prepared.run_id)
    assert (listing.jobs_done, listing.jobs_total) == (14, 14)


def test_cli_adaptive_gate_stops_when_its_workloads_are_decided(tmp_path: Path) -> None:
    """A candidate 100x slower (it sleeps), judged by the rule as if its wall times were a GPU's
    (a test-only switch): every workload stops after one repeat, decided; the record says so;
    ``fibtui compare`` still gives no speed verdict on interpreter timings."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3))
    slow = make_candidate(root, "slow", "slow_py")
    proc = _fibtui(
        "run", "--backend", "interpreter", "--workloads", "all", "--baseline",
        str(root / "solution" / "triton"), "--solution", str(slow), "--adaptive", "--repeats",
        "3", "--json", "--workspace", str(root),
        env={"FIBTUI_TEST_JUDGE_INTERPRETER": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads(proc.stdout)
    s = rec["summary"]
    # each workload's own interval is decided (the interval of G across three workloads this
    # different is not, at the first look): every one stops before the cap of 3, nearly always
    # after its first repeat (the noise comes from the interpreter's wall times on a machine
    # that may be loaded: one workload was seen to need a second look in a full parallel run)
    stops = rec["adaptive"]["workloads"]
    assert len(stops) == 3 and {v["reason"] for v in stops.values()} <= {"gate decided", "decided"}
    assert {v["word"] for v in stops.values()} == {"slower"}
    assert {v["repeats"] for v in stops.values()} <= {1, 2}
    ran = 2 * sum(v["repeats"] for v in stops.values())
    assert (s["done"], s["total"], s["planned"], s["skipped"], s["complete"]) == (
        ran, ran, 18, 18 - ran, True,
    )  # fmt: skip
    assert rec["state"] == "complete" and rec["adaptive"]["stopped"] == "decided"
    assert "decided" in rec["adaptive"]["reason"]
    assert rec["comparison"]["verdict"] == stats.NO_SPEED_VERDICT
    assert "workload(s) stop" in proc.stderr
    journal = Path(root / "optimize_ops" / "runs" / rec["run_id"] / "journal.jsonl")
    kinds = [json.loads(line)["kind"] for line in journal.read_text().splitlines()]
    assert kinds.count("stop") == 3 and kinds[-1] == "end"


def test_cli_adaptive_without_a_speed_verdict_runs_to_the_cap(tmp_path: Path) -> None:
    """Interpreter timings decide nothing: every workload runs to the cap, the text says why."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    proc = _fibtui(
        "run", "--backend", "interpreter", "--workloads", "all", "--baseline",
        str(root / "solution" / "triton"), "--adaptive", "--repeats", "2", "--workspace",
        str(root),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "8/8 PASSED" in proc.stdout
    assert "adaptive (cap 2 repeats): cap reached" in proc.stdout
    assert "NO_SPEED_VERDICT" in proc.stdout


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "--adaptive needs a paired run"),
        (["--baseline", "solution/triton", "--repeats", "0"], "--repeats"),
        (["--baseline", "solution/triton", "--repeats", "51"], "--repeats under --adaptive"),
    ],
)
def test_adaptive_refusals_are_one_line(tmp_path: Path, extra, needle) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    proc = _fibtui(
        "run", "--backend", "interpreter", "--workloads", "all", "--adaptive", *extra,
        "--workspace", str(root),
    )  # fmt: skip
    assert proc.returncode == 2 and needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_retried_job_reopens_its_stopped_workload(tmp_path: Path) -> None:
    """Journal lines alone: a stop settles a workload's missing jobs; a retry of one of its jobs
    reopens the workload (a resume asks the rule again)."""
    from fibtui.core.runs import JobSpec, Journal, RunHeader

    folder = tmp_path / "run"
    folder.mkdir()
    jobs = [
        JobSpec(u, {"n": 1}, name, role, r)
        for r in range(2)
        for u in ("a", "b")
        for name, role in (("base", "baseline"), ("cand", "candidate"))
    ]
    header = RunHeader(
        "r1", "d", "interpreter", "cpu-interpreter", "n/a", [], jobs, 2, "all", "",
        {"adaptive": SequentialPlan(2).to_json()},
    )  # fmt: skip
    journal = Journal(folder)
    journal.write_header(header)
    journal.append_stop({"uuid": "a", "repeats": 0, "reason": "failed"})
    contents = read_journal(folder / "journal.jsonl")
    assert set(contents.stops) == {"a"} and len(contents.skipped_keys()) == 4
    journal.append_retry([jobs[0].key])
    contents = read_journal(folder / "journal.jsonl")
    assert contents.stops == {} and contents.skipped_keys() == set()


class Broken:
    plan = SequentialPlan(2)

    def assess(self, rows, repeats):
        raise RuntimeError("planted")


def test_a_failing_rule_falls_back_to_the_fixed_design(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    ws = open_workspace(root)
    options = RunOptions(
        backend="interpreter", workloads="all", baseline=str(root / "solution" / "triton"),
        repeats=2, adaptive=True,
    )  # fmt: skip
    prepared = prepare_run(ws, options)
    prepared.runner.adaptive = Broken()
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    assert record["state"] == "complete" and record["summary"]["done"] == 8
    assert record["adaptive"]["stopped"] == "every repeat ran"
    assert any(
        isinstance(e, LogLine) and "the rule failed (RuntimeError: planted)" in e.text
        for e in events
    )
