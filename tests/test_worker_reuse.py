"""A worker serves the next run (issue 20: a warm worker for every command): after a run's last job
the runner asks it to ``release`` the run, and gives it back to where it came from (the worker
service, or the TUI's own warm workers) when it says it is fit for another run. What it keeps
(torch, CUDA, CUPTI, its reference outputs in memory) and what it must not keep (the run's
solutions, their build folder, a changed torch setting or environment) are checked here, as is the
service's ``return``: only the run it was handed to may give a worker back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the worker needs torch (gpu extra)")

from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners.local import GIVE_BACKS, WarmWorkers  # noqa: E402
from fibtui.runners.service.client import AdoptedWorker, Client, ServiceWorkers  # noqa: E402
from fibtui.runners.service.common import PROTOCOL, log_path  # noqa: E402
from fibtui.services.runs import RunOptions, prepare_run  # noqa: E402
from fibtui.worker.engine import Engine, EngineConfig  # noqa: E402
from tests.runner_helpers import TINY_DEFINITION, make_tiny_workspace  # noqa: E402
from tests.test_worker_service import (  # noqa: E402
    POOL,
    _slot,
    raw_request,
    ready_pids,
    svc,  # noqa: F401 - the fixture
    wait_for,
    warm_one,
)

WORKLOAD = {
    "uuid": "w",
    "axes": {"n": 4},
    "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
}
PYTHON_SOLUTION = {
    "id": "candidate-0",
    "name": "py",
    "spec": {"language": "python", "entry_point": "kernel.py::scale"},
    "sources": [
        {
            "path": "kernel.py",
            "content": "import torch\n\ndef scale(x, a, y):\n    y.copy_(x * a)\n",
        }
    ],
}


def _config(tmp_path: Path) -> EngineConfig:
    return EngineConfig.from_json(
        {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
            "cache_dir": str(tmp_path / "ref"),
            "workdir": str(tmp_path / "build"),
        }
    )


def test_a_released_engine_forgets_its_solutions_and_keeps_its_reference_outputs(
    tmp_path: Path,
) -> None:
    engine = Engine(_config(tmp_path))
    assert engine.load(TINY_DEFINITION, [PYTHON_SOLUTION])["candidate-0"]["ok"]
    first = engine.run_job({"job_id": "0|w", "workload": WORKLOAD, "repeat": 0})
    assert first["results"][0]["status"] == "PASSED"
    assert engine.reference is not None and engine.reference.misses == 1
    assert any(n.startswith("fibtui_solution_") for n in sys.modules)
    assert (tmp_path / "build").is_dir()

    said = engine.release()
    assert said == {"keep": True}
    assert not any(n.startswith("fibtui_solution_") for n in sys.modules)
    assert not (tmp_path / "build").exists() and engine.solutions == {}
    kept = engine.kept_reference
    assert kept is not None and kept.memory_bytes() > 0

    # the next run's engine: the same definition, so the same reference runner, counted afresh;
    # the cache files are gone, so only memory can answer the reference
    for f in (tmp_path / "ref").rglob("*.pt"):
        f.unlink()
    again = Engine(_config(tmp_path), kept_reference=kept)
    assert again.load(TINY_DEFINITION, [PYTHON_SOLUTION])["candidate-0"]["ok"]
    assert again.reference is kept
    second = again.run_job({"job_id": "0|w", "workload": WORKLOAD, "repeat": 0})
    assert second["results"][0]["status"] == "PASSED"
    # from memory once: the correctness trial (the checked timed call on that input set uses the
    # trial's own outputs)
    assert second["results"][0]["timing"]["reference_cache"] == {
        "hits": 0,
        "misses": 0,
        "memory_hits": 1,
    }

    # another definition: a runner of its own (the kept outputs are let go)
    assert again.release() == {"keep": True}
    third = Engine(_config(tmp_path), kept_reference=again.kept_reference)
    third.load(dict(TINY_DEFINITION, name="tiny_other"), [PYTHON_SOLUTION])
    assert third.reference is not kept and third.kept_reference is None


def _tiny_run(root: Path, warm, **options):
    prepared = prepare_run(
        open_workspace(root), RunOptions(backend="interpreter", workloads="all", **options)
    )
    prepared.runner.warm = warm
    record = prepared.runner.run(lambda _e: None)
    GIVE_BACKS.wait()
    return prepared, record


def test_the_tuis_own_warm_workers_serve_the_next_run_with_the_same_worker(
    tmp_path: Path,
) -> None:
    """The service off: the TUI's WarmWorkers keep the worker of a finished run for the next."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    warm = WarmWorkers(tmp_path / "warm")
    try:
        taken: list[int] = []
        original = warm.take

        def take(*args, **kwargs):
            w = original(*args, **kwargs)
            taken.append(w.proc.pid if w is not None else 0)
            return w

        warm.take = take  # type: ignore[method-assign]
        first, record = _tiny_run(root, warm)
        assert record.summary.passed == 1 and taken == [0]  # nothing ready: started its own
        assert warm.count() == 1  # ... and kept it
        second, record = _tiny_run(root, warm)
        assert record.summary.passed == 1 and len(taken) == 2 and taken[1] != 0
        log = (second.folder / "worker-0.log").read_text()
        assert f"worker {taken[1]} kept for another run (2 served so far)" in log
        assert (
            "kept for another run (1 served so far)" in (first.folder / "worker-0.log").read_text()
        )
    finally:
        warm.close()


def test_a_worker_serving_the_next_run_runs_that_runs_sources(tmp_path: Path) -> None:
    """The kernel edited between two runs (the same length, so nothing but its content tells
    them apart): the worker that served the first run runs the edited Triton kernel in the
    second, never the one it imported before."""
    from tests.runner_helpers import GOOD_TRITON

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    kernel = root / "solution" / "triton" / "kernel.py"
    warm = WarmWorkers(tmp_path / "warm")
    try:
        first, record = _tiny_run(root, warm)
        assert record.summary.passed == 2
        wrong = GOOD_TRITON.replace("* alpha, mask", "+ alpha, mask")
        assert len(wrong) == len(GOOD_TRITON) and wrong != GOOD_TRITON
        kernel.write_text(wrong)
        second, record = _tiny_run(root, warm)
        assert record.summary.passed == 0
        assert {j.status for j in record.jobs} == {"INCORRECT_NUMERICAL"}
        pid = re.findall(r"worker (\d+) kept", (first.folder / "worker-0.log").read_text())
        assert (
            pid
            and f"worker {pid[0]} kept for another run (2 served"
            in (second.folder / "worker-0.log").read_text()
        )
    finally:
        warm.close()


def test_a_worker_whose_solution_changed_the_environment_is_not_kept(svc, tmp_path: Path) -> None:  # noqa: F811
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    kernel = root / "solution" / "triton" / "kernel.py"
    kernel.write_text("import os\nos.environ['FIBTUI_TEST_LEAK'] = '1'\n" + kernel.read_text())
    client = Client()
    client.ensure(60)
    pid = warm_one(client)
    prepared, record = _tiny_run(root, ServiceWorkers(60))
    assert record.summary.passed == 1
    log = (prepared.folder / "worker-0.log").read_text()
    assert (
        f"worker {pid} not kept for another run: the environment changed: FIBTUI_TEST_LEAK" in log
    )
    assert wait_for(lambda: pid not in ready_pids(client) and not _alive(pid), 20)
    assert "given back" not in log_path(client.path).read_text()


def test_a_worker_whose_solution_changed_torch_settings_is_not_kept(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    kernel = root / "solution" / "triton" / "kernel.py"
    # torch's default is "highest": importing this solution changes it in any worker
    kernel.write_text(
        'import torch\ntorch.set_float32_matmul_precision("medium")\n' + kernel.read_text()
    )
    warm = WarmWorkers(tmp_path / "warm")
    try:
        prepared, record = _tiny_run(root, warm)
        assert record.summary.passed == 1
        log = (prepared.folder / "worker-0.log").read_text()
        assert (
            "not kept for another run: torch's global settings changed: matmul, matmul_precision"
            in log
        )
        assert warm.count() == 0
    finally:
        warm.close()


def test_a_cancelled_run_gives_no_worker_back(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3), kernel="sleeps")
    warm = WarmWorkers(tmp_path / "warm")
    try:
        prepared = prepare_run(
            open_workspace(root), RunOptions(backend="interpreter", workloads="all")
        )
        prepared.runner.warm = warm
        cancel = threading.Event()
        started = threading.Event()

        def on_event(ev) -> None:
            if type(ev).__name__ == "JobStarted":
                started.set()

        t = threading.Thread(target=lambda: prepared.runner.run(on_event, cancel))
        t.start()
        assert started.wait(120)
        cancel.set()
        t.join(120)
        GIVE_BACKS.wait()
        assert warm.count() == 0
        assert "kept for another run" not in (prepared.folder / "worker-0.log").read_text()
    finally:
        warm.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _return_request(path: Path, pid: int, fds: list[int]) -> dict:
    request = {"op": "return", "pid": pid, "runs": 1, "protocol": PROTOCOL, **_slot()}
    return raw_request(path, (json.dumps(request) + "\n").encode(), fds)


def test_only_the_run_a_worker_was_handed_to_may_give_it_back(svc, tmp_path: Path) -> None:  # noqa: F811
    client = Client()
    service_pid = client.ensure(60)["pid"]
    pid = warm_one(client)
    w = ServiceWorkers(60).take(POOL, 0, log=svc.tmp / "w.log")
    assert isinstance(w, AdoptedWorker) and w.proc.pid == pid

    # another process of this user, with pipes of its own: refused, the worker stays with its run
    # (standard library only: the request, three pipes of its own as SCM_RIGHTS, the reply line)
    code = (
        "import json, os, socket, sys\n"
        "req = json.dumps({'op': 'return', 'pid': int(sys.argv[2]), 'runs': 1, 'protocol': int(sys.argv[4]),\n"
        "                  **json.loads(sys.argv[3])}).encode() + b'\\n'\n"
        "fds = [os.pipe()[i % 2] for i in range(3)]\n"
        "with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:\n"
        "    s.settimeout(20)\n"
        "    s.connect(sys.argv[1])\n"
        "    socket.send_fds(s, [req], fds)\n"
        "    data = b''\n"
        "    while not data.endswith(b'\\n'):\n"
        "        chunk = s.recv(65536)\n"
        "        if not chunk:\n"
        "            break\n"
        "        data += chunk\n"
        "print(data.decode().strip())\n"
    )
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(client.path),
            str(pid),
            json.dumps(_slot()),
            str(PROTOCOL),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 0 and other.stdout.strip(), other.stderr
    reply = json.loads(other.stdout)
    assert reply["ok"] is False and "was not handed to pid" in reply["error"], other.stderr
    # this process, but no descriptors: refused too
    reply = _return_request(client.path, pid, [])
    assert reply["ok"] is False and "stdin, stdout and stderr" in reply["error"]
    assert [h["pid"] for h in client.ask({"op": "status"})["handed"]] == [pid]

    # the run itself, after release: the service takes it back and makes it its own again
    assert w.release()
    sw = ServiceWorkers(60)
    sw._service(None)
    assert sw._return(POOL, 0, w)
    status = client.ask({"op": "status"})
    assert status["handed"] == [] and status["ready"][0]["pid"] == pid
    assert status["ready"][0]["runs"] == 0  # released before it ever loaded a run
    assert wait_for(lambda: list(svc.tmp.glob(f"fibtui-worker-cwd-{service_pid}-*")), 10)
    # the next take gets it first, and it answers as a worker should
    again = ServiceWorkers(60).take(POOL, 0, log=svc.tmp / "w2.log")
    assert isinstance(again, AdoptedWorker) and again.proc.pid == pid
    again.send({"op": "ping"})
    assert again.next_event(time.monotonic() + 20) == {"event": "pong"}
    assert re.search(
        rf"worker {pid} \(\S+\) given back by pid {os.getpid()} after 0 run",
        log_path(client.path).read_text(),
    )
    again.close()
