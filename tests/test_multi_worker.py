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
from fibtui.services.runs import RunOptions, prepare_run
from tests.runner_helpers import make_candidate, make_tiny_workspace

pytestmark = pytest.mark.slow


def test_three_workers_share_one_queue_and_keep_pairs_together(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, 9)), kernel="slow_py")
    base = make_candidate(root, "base_py", "good_py")
    prepared = prepare_run(
        open_workspace(root),
        RunOptions(
            backend="interpreter", workloads="all", workers=3, baseline=str(base), repeats=2
        ),
    )
    record = prepared.runner.run(lambda e: None).to_json()
    assert record["summary"]["complete"] and record["summary"]["total"] == 32
    slots: dict[tuple[str, int], set[int]] = defaultdict(set)
    for job in record["jobs"]:
        slots[(job["uuid"], job["repeat"])].add(job["timing"]["slot"])
    assert all(len(s) == 1 for s in slots.values()), (
        "baseline and candidate of a workload ran on different workers"
    )
    used = {next(iter(s)) for s in slots.values()}
    assert used == {0, 1, 2}, f"work was not spread over the workers: {used}"
    for slot in used:
        assert (prepared.folder / f"worker-{slot}.log").is_file()
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 32 and not contents.duplicate_lines


def test_a_killed_worker_is_replaced_and_the_others_go_on(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=tuple(range(1, 11)), kernel="slow_py")
    base = make_candidate(root, "base_py", "good_py")
    prepared = prepare_run(
        open_workspace(root),
        RunOptions(backend="interpreter", workloads="all", workers=2, baseline=str(base)),
    )
    runner = prepared.runner
    killed = threading.Event()
    restarts: list[WorkerRestarted] = []

    def on_event(event: object) -> None:
        if isinstance(event, WorkerRestarted):
            restarts.append(event)
        # When worker 0 finishes its first job, kill worker 1 (busy with its own job by then).
        if (
            isinstance(event, JobFinished)
            and event.result.timing.get("slot") == 0
            and not killed.is_set()
        ):
            victim = runner._workers.get(1)
            if victim is not None and victim.proc.poll() is None:
                os.killpg(victim.proc.pid, signal.SIGKILL)
                killed.set()

    record = runner.run(on_event).to_json()
    assert killed.is_set()
    assert record["summary"]["complete"] and record["summary"]["passed"] == 20
    on_one = [r for r in restarts if r.slot == 1]
    assert on_one and "killed by SIGKILL" in on_one[0].reason, (
        restarts
    )  # how it ended, not "still running"
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 20 and not contents.duplicate_lines
    assert {j["timing"]["slot"] for j in record["jobs"]} == {
        0,
        1,
    }  # the replaced worker kept working


GPUS = [
    ("0", "GPU-aaaa1111-0000", "NVIDIA H200"),
    ("1", "GPU-bbbb2222-0000", "NVIDIA H200"),
    ("2", "GPU-cccc3333-0000", "NVIDIA H100 80GB HBM3"),
]


@pytest.mark.parametrize(
    ("cvd", "expected"),
    [
        (None, ["0", "1", "2"]),
        ("1", ["1"]),
        ("2,0", ["2", "0"]),
        ("GPU-bbbb", ["GPU-bbbb"]),  # a UUID prefix, as CUDA accepts
        ("1,7,2", ["1"]),  # CUDA stops at the first entry that names no GPU
        ("", []),
        ("MIG-1234abcd", ["MIG-1234abcd"]),
    ],
)
def test_gpus_visible_to_fibtui_follow_cuda_visible_devices(
    cvd: str | None, expected: list[str]
) -> None:
    from fibtui.core.backends import visible_gpus

    env = {} if cvd is None else {"CUDA_VISIBLE_DEVICES": cvd}
    assert [entry for entry, _ in visible_gpus(GPUS, env)] == expected
    if cvd == "2,0":
        assert [name for _, name in visible_gpus(GPUS, env)] == [
            "NVIDIA H100 80GB HBM3",
            "NVIDIA H200",
        ]


def test_each_gpu_worker_gets_the_users_own_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_VISIBLE_DEVICES=2,0 on a 3-GPU box: two workers, on GPU 2 and GPU 0 (never 0 and 1)."""
    from fibtui.core import backends
    from fibtui.runners.local import worker_pool

    monkeypatch.setattr(backends, "_gpus", lambda: GPUS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    found = backends.detect()
    assert found.gpu and found.gpu_ids == ["2", "0"] and len(found.gpu_names) == 2
    pool = worker_pool("local", found, {"device": "cuda:0"}, RunOptions(backend="local"))
    assert [pool.env_for(slot)["CUDA_VISIBLE_DEVICES"] for slot in range(len(pool.devices))] == [
        "2",
        "0",
    ]
    assert all(pool.config_for(slot)["device"] == "cuda:0" for slot in range(len(pool.devices)))
    one = worker_pool("local", found, {"device": "cuda:0"}, RunOptions(backend="local", workers=1))
    assert [one.env_for(0)["CUDA_VISIBLE_DEVICES"]] == ["2"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    every = worker_pool(
        "local", backends.detect(), {"device": "cuda:0"}, RunOptions(backend="local")
    )
    assert [every.env_for(slot)["CUDA_VISIBLE_DEVICES"] for slot in range(3)] == ["0", "1", "2"]
