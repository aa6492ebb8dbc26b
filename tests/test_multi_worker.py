"""Fan-out over several workers (CPU-interpreter workers standing in for GPUs): one queue, one
journal, pairs kept on one worker, a killed worker replaced while the others go on."""

from __future__ import annotations

import os
import signal
import threading
from collections import defaultdict
from pathlib import Path

import pytest

from fibtui.core.runs import read_journal
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, WorkerRestarted
from fibtui.runners.session import RunOptions, prepare_run
from tests.runner_helpers import make_candidate, make_tiny_workspace

pytestmark = pytest.mark.slow


def test_three_workers_share_one_queue_and_keep_pairs_together(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, 9)), kernel="slow_py")
    base = make_candidate(root, "base_py", "good_py")
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all", workers=3,
                                                            baseline=str(base), repeats=2))
    record = prepared.runner.run(lambda e: None)
    assert record["summary"]["complete"] and record["summary"]["total"] == 32
    slots: dict[tuple[str, int], set[int]] = defaultdict(set)
    for job in record["jobs"]:
        slots[(job["uuid"], job["repeat"])].add(job["timing"]["slot"])
    assert all(len(s) == 1 for s in slots.values()), "baseline and candidate of a workload ran on different workers"
    used = {next(iter(s)) for s in slots.values()}
    assert used == {0, 1, 2}, f"work was not spread over the workers: {used}"
    for slot in used:
        assert (prepared.folder / f"worker-{slot}.log").is_file()
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 32 and not contents.duplicate_lines


def test_a_killed_worker_is_replaced_and_the_others_go_on(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, 11)), kernel="slow_py")
    base = make_candidate(root, "base_py", "good_py")
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all", workers=2,
                                                            baseline=str(base)))
    runner = prepared.runner
    killed = threading.Event()
    restarts: list[WorkerRestarted] = []

    def on_event(event: object) -> None:
        if isinstance(event, WorkerRestarted):
            restarts.append(event)
        # When worker 0 finishes its first job, kill worker 1 (busy with its own job by then).
        if isinstance(event, JobFinished) and event.result.timing.get("slot") == 0 and not killed.is_set():
            victim = runner._workers.get(1)
            if victim is not None and victim.proc.poll() is None:
                os.killpg(victim.proc.pid, signal.SIGKILL)
                killed.set()

    record = runner.run(on_event)
    assert killed.is_set()
    assert record["summary"]["complete"] and record["summary"]["passed"] == 20
    assert any(r.slot == 1 for r in restarts) or any(j["timing"].get("slot") == 1 for j in record["jobs"])
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 20 and not contents.duplicate_lines
    assert {j["timing"]["slot"] for j in record["jobs"]} == {0, 1}  # the replaced worker kept working
