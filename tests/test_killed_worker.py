"""Who killed the worker is known (issue 37 item 2): a worker killed from outside mid-job (SIGKILL,
as the OOM killer sends it) is an infrastructure failure of the job, run again once in a fresh
worker; killed again, it is the kernel's RUNTIME_ERROR, "killed, likely out of memory"; and
``--resume`` redoes the jobs whose record is an infrastructure failure."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from fibtui.core.runs import read_journal
from fibtui.core.workspace import open_workspace
from fibtui.runners import killed
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.runner_helpers import PY_TEMPLATE, make_tiny_workspace

#: a correct kernel that writes its worker's pid, then takes a while (the test kills it meanwhile)
MARKED = PY_TEMPLATE.format(
    body=(
        "    with open(os.environ['FIBTUI_TEST_MARKS'], 'a') as f:\n"
        "        f.write(f'{os.getpid()}\\n')\n"
        "    time.sleep(0.3)\n"
        "    y.copy_(x * alpha)"
    )
)
#: a kernel whose worker is always SIGKILLed during its job (as by the OOM killer)
ALWAYS_KILLED = PY_TEMPLATE.format(body="    os.kill(os.getpid(), 9)")


def workspace(tmp_path: Path, kernel: str, monkeypatch) -> Path:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")
    (root / "solution" / "triton" / "kernel.py").write_text(kernel)
    monkeypatch.setenv("FIBTUI_TEST_MARKS", str(tmp_path / "marks"))
    return root


def marks(tmp_path: Path) -> list[int]:
    try:
        return [int(x) for x in (tmp_path / "marks").read_text().split()]
    except FileNotFoundError:
        return []


@pytest.mark.slow
def test_a_worker_killed_mid_job_is_retried_then_resume_redoes_infra(
    tmp_path: Path, monkeypatch
) -> None:
    root = workspace(tmp_path, MARKED, monkeypatch)
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all"))
    done: dict = {}
    t = threading.Thread(target=lambda: done.update(prepared.runner.run(lambda _e: None).to_json()))
    t.start()
    deadline = time.monotonic() + 60
    while not marks(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.01)
    first = marks(tmp_path)[0]
    os.kill(first, signal.SIGKILL)  # from outside, mid-job
    t.join(timeout=120)
    (job,) = done["jobs"]
    assert job["status"] == "PASSED" and job["attempt"] == 2, job
    pids = marks(tmp_path)
    assert len(pids) >= 2 and pids[-1] != first  # the retry ran in a fresh worker
    # a record that says infrastructure (an older run's, say) is redone by --resume
    journal = prepared.folder / "journal.jsonl"
    lines = journal.read_text().splitlines()
    for i, line in enumerate(lines):
        obj = json.loads(line)
        if obj.get("kind") == "result":
            obj.update(status="INFRA_ERROR", latency_ms=None, error="container lost")
            lines[i] = json.dumps(obj)
    journal.write_text(
        "\n".join(
            line for line in lines if '"kind":"end"' not in line and '"kind": "end"' not in line
        )
        + "\n"
    )
    resumed = prepare_resume(open_workspace(root), prepared.header.run_id)
    record = resumed.runner.run(lambda _e: None).to_json()
    (job,) = record["jobs"]
    assert job["status"] == "PASSED"
    contents = read_journal(journal)
    assert [r.status for r in contents.results.values()] == ["PASSED"]
    assert "infrastructure failure: redone on resume" in journal.read_text()


@pytest.mark.slow
def test_killed_again_in_a_fresh_worker_is_likely_out_of_memory(
    tmp_path: Path, monkeypatch
) -> None:
    root = workspace(tmp_path, ALWAYS_KILLED, monkeypatch)
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all"))
    record = prepared.runner.run(lambda _e: None).to_json()
    (job,) = record["jobs"]
    assert job["status"] == "RUNTIME_ERROR" and job["attempt"] == 2, job
    assert "killed by SIGKILL" in job["error"] and "likely out of memory" in job["error"]
    assert "peak resident memory" in job["error"]  # the memory figure, sampled while it ran


def test_outside_signals_and_the_memory_words(tmp_path: Path) -> None:
    assert killed.killed_from_outside(-signal.SIGKILL)
    assert killed.killed_from_outside(-signal.SIGTERM)
    assert not killed.killed_from_outside(-signal.SIGSEGV)  # a crash is the kernel's
    assert not killed.killed_from_outside(7) and not killed.killed_from_outside(None)
    before = killed.CgroupMemory(oom_kills=2)
    after = killed.CgroupMemory(oom_kills=3, peak_bytes=6 * 2**30, limit_bytes=6 * 2**30)
    text = killed.describe_kill("killed by SIGKILL", 5 * 2**30, before, after, twice=True)
    assert "killed, likely out of memory" in text
    assert "5.0 GiB" in text and "OOM killer ran 1 time(s)" in text and "limit is 6.0 GiB" in text
    once = killed.describe_kill("killed by SIGKILL", None, None, None, twice=False)
    assert once == "the worker was killed by SIGKILL during the job (not the kernel's doing)"
    assert isinstance(killed.cgroup_memory(), killed.CgroupMemory)  # never raises here
    assert killed.peak_rss_bytes(os.getpid()) > 0
