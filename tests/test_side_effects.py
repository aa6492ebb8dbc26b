"""A kernel's side effects are bounded (issue 37 item 5): what it prints is kept to its first and
last 64 KiB with the byte count (in the row and the worker's log in the run folder), and the
processes it leaves running are ended with the job and named in the row."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fibtui.core.runs import read_journal
from fibtui.core.workspace import open_workspace
from fibtui.services.runs import RunOptions, prepare_run
from fibtui.worker import sidefx
from tests.runner_helpers import PY_TEMPLATE, make_tiny_workspace

#: 30 MB on stdout in one call (and a line on stderr), then the right answer
FLOOD = PY_TEMPLATE.format(
    body=(
        "    sys.stdout.write('BEGIN' + 'x' * 30_000_000 + 'END')\n"
        "    sys.stdout.flush()\n"
        "    sys.stderr.write('from stderr\\n')\n"
        "    y.copy_(x * alpha)"
    )
)
#: a child and an orphaned grandchild (its parent shell exits at once), both left running
ORPHANS = PY_TEMPLATE.format(
    body=(
        "    import subprocess\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "    subprocess.Popen(['sh', '-c', 'sleep 121 & exit 0']).wait()\n"
        "    y.copy_(x * alpha)"
    )
)


def run_kernel(tmp_path: Path, kernel: str):
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")
    (root / "solution" / "triton" / "kernel.py").write_text(kernel)
    prepared = prepare_run(open_workspace(root), RunOptions(backend="interpreter", workloads="all"))
    record = prepared.runner.run(lambda _e: None).to_json()
    return record, prepared.folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_30_mb_of_output_is_kept_to_its_first_and_last_64_kib(tmp_path: Path) -> None:
    record, folder = run_kernel(tmp_path, FLOOD)
    (job,) = record["jobs"]
    assert job["status"] == "PASSED"
    fx = job["side_effects"]
    # every call printed 30 MB: all of it counted, 128 KiB of it kept
    assert fx["output_bytes"] >= 30_000_008 and fx["output_truncated"] is True
    assert fx["output_head"].startswith("BEGINxxx") and len(fx["output_head"]) == sidefx.CAP
    assert fx["output_tail"].endswith("from stderr\n") and len(fx["output_tail"]) == sidefx.CAP
    journal = read_journal(folder / "journal.jsonl")
    assert next(iter(journal.results.values())).side_effects == fx
    # the run folder holds the cut, not the flood
    assert folder_bytes(folder) < 2_000_000
    log = (folder / "worker-0.log").read_bytes()
    assert b"bytes of this job's output left out" in log and str(fx["output_bytes"]).encode() in log


@pytest.mark.slow
def test_processes_a_kernel_leaves_running_are_ended_and_reported(tmp_path: Path) -> None:
    record, folder = run_kernel(tmp_path, ORPHANS)
    (job,) = record["jobs"]
    assert job["status"] == "PASSED"
    left = job["side_effects"]["leftover_processes"]
    commands = " | ".join(p["command"] for p in left)
    assert "time.sleep(120)" in commands and "sleep 121" in commands, left
    deadline = time.monotonic() + 5
    for p in left:
        while _alive(p["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(p["pid"]), p
    assert b"the kernel left running" in (folder / "worker-0.log").read_bytes()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def test_a_capture_keeps_head_tail_and_count(tmp_path: Path, capfd) -> None:
    with sidefx.JobCapture(str(tmp_path)) as cap:
        os.write(1, b"a" * (sidefx.CAP + 10))
        os.write(2, b"b" * (sidefx.CAP + 20) + b"last line\n")
    report = cap.report()
    assert report is not None
    assert report["output_bytes"] == 2 * sidefx.CAP + 30 + 10
    assert report["output_head"] == "a" * sidefx.CAP
    tail = report["output_tail"]
    assert len(tail) == sidefx.CAP and tail.endswith("b" * 100 + "last line\n")
    assert report["output_truncated"] is True and "leftover_processes" not in report
    assert list(tmp_path.iterdir()) == []  # the scratch file is gone
    logged = capfd.readouterr().err  # the worker's log gets the same cut
    assert "40 bytes of this job's output left out" in logged
    with sidefx.JobCapture(str(tmp_path)) as quiet:
        pass
    assert quiet.report() is None
