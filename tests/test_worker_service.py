"""The worker service (fibtui/runners/service): its protocol, its permissions, its lifetime, and
runs that take their workers from it.

Each test gets a runtime folder and a temp folder of its own (XDG_RUNTIME_DIR, TMPDIR), so its
service, socket and scratch folders are its own; every process it starts carries
FIBTUI_TEST_MARK, and whatever is left is killed at the end. tests/conftest.py turns the service
off for every other test (FIBTUI_WORKERS_DAEMON=0); these turn it on.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from fibtui.core.workspace import open_workspace
from fibtui.runners.events import WorkerRestarted
from fibtui.runners.local import GIVE_BACKS, SCRATCH_PREFIX, WarmWorkers, WorkerPool
from fibtui.runners.service.client import (
    AdoptedWorker,
    Client,
    ServiceWorkers,
    warm_workers_for,
)
from fibtui.runners.service.common import (
    MAX_LINE,
    PROTOCOL,
    ServiceRefused,
    facts,
    log_path,
    socket_path,
)
from fibtui.services.runs import RunOptions, prepare_run
from tests.conftest import run_cli
from tests.runner_helpers import make_candidate, make_tiny_workspace
from tests.test_reliability import HOSTILE, add_kernel, kill_marked, marked_pids

REPO = Path(__file__).resolve().parent.parent
POOL = WorkerPool(devices=["cpu"], engine_config={}, interpreter=True)

pytestmark = pytest.mark.slow


@pytest.fixture
def svc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A private runtime folder (short: a socket path has at most 108 bytes) and temp folder
    (``tmp_path`` is made first, so pytest's own temp folders stay where they were)."""
    base = Path(tempfile.mkdtemp(prefix="fws", dir="/tmp"))
    os.chmod(base, 0o700)
    tmp = base / "tmp"
    tmp.mkdir()
    mark = uuidlib.uuid4().hex
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.setenv("FIBTUI_WORKERS_DAEMON", "1")
    monkeypatch.setenv("FIBTUI_TEST_MARK", mark)
    monkeypatch.delenv("FIBTUI_WORKERS_IDLE_S", raising=False)
    yield SimpleNamespace(base=base, tmp=tmp, mark=mark, folder=base / "fibtui")
    try:
        Client().stop(wait_s=5)
    except (ServiceRefused, OSError):
        pass
    kill_marked(mark)
    shutil.rmtree(base, ignore_errors=True)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for(predicate, timeout: float = 60.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def ready_pids(client: Client) -> list[int]:
    status = client.ask({"op": "status"}) or {}
    return [w["pid"] for w in status.get("ready", [])]


def warm_one(client: Client) -> int:
    """Have the service start a worker for POOL's slot 0; its pid once it is ready."""
    reply = client.ask({"op": "warm", **_slot()})
    assert reply is not None and reply["ok"] and reply["state"] in ("starting", "ready")
    pids = wait_for(lambda: ready_pids(client))
    assert pids, "the service's worker never became ready"
    return pids[0]


def _slot() -> dict:
    return {"device": "cpu", "interpreter": True, "env": POOL.env_for(0)}


def raw_request(path: Path, payload: bytes, fds: list[int] | None = None) -> dict:
    """Send ``payload`` (with ``fds`` as SCM_RIGHTS) and read the one reply line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(str(path))
        if fds:
            sent = socket.send_fds(s, [payload], fds)
            payload = payload[sent:]
        s.sendall(payload)
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def scratch_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(SCRATCH_PREFIX + "*"))


# --------------------------------------------------------------------------------------------
# protocol
# --------------------------------------------------------------------------------------------


def test_hello_take_status_exit_status_and_stop(svc) -> None:
    client = Client()
    hello = client.ensure(60)
    assert hello["ok"] and hello["facts"] == facts() and hello["idle_timeout_s"] == 60
    service_pid = hello["pid"]
    assert alive(service_pid)

    # nothing ready: the answer says so (the client starts its own), one starts for next time
    reply, fds = client.request({"op": "take", **_slot(), "wait_s": 0}, maxfds=4)
    assert reply["ok"] is False and reply["state"] in ("none", "starting") and fds == []
    first = wait_for(lambda: ready_pids(client))[0]

    w = ServiceWorkers(60).take(POOL, 0, log=svc.tmp / "w.log")
    assert isinstance(w, AdoptedWorker) and w.proc.pid == first
    # adopted: its scratch folder carries this process's pid now
    assert w.cwd.is_dir() and w.cwd.name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-")
    w.send({"op": "ping"})
    assert w.next_event(time.monotonic() + 20) == {"event": "pong"}
    status = client.ask({"op": "status"})
    assert [(h["pid"], h["owner_pid"]) for h in status["handed"]] == [(first, os.getpid())]
    # a replacement starts at once; the handed-over worker is never offered again
    second = wait_for(lambda: ready_pids(client))[0]
    assert second != first
    assert first not in ready_pids(client)

    scratch = w.cwd
    w.kill()
    assert w.exit_description() == "killed by SIGKILL"
    assert client.ask({"op": "exit_status", "pid": first}) == {
        "ok": True,
        "pid": first,
        "state": "exited",
        "returncode": -signal.SIGKILL,
    }
    assert client.ask({"op": "exit_status", "pid": 1})["state"] == "unknown"
    assert not scratch.exists()

    assert client.stop() == service_pid
    assert not client.path.exists()
    assert wait_for(lambda: not alive(service_pid) and not alive(second), 20)
    assert wait_for(lambda: not scratch_folders(svc.tmp), 10), scratch_folders(svc.tmp)
    assert client.hello() is None


def test_no_gpu_worker_starts_while_a_run_uses_that_gpu(svc) -> None:
    """A run measuring on a GPU never shares it with a worker the service is starting: the
    replacement of a handed-over GPU worker waits until that worker has ended. (No GPU here: a
    worker for "cuda:0" imports torch, finds no CUDA and says ready, which is all this needs.)"""
    gpu = WorkerPool(devices=["cuda:0"], engine_config={}, interpreter=False)
    slot = {"device": "cuda:0", "interpreter": False, "env": gpu.env_for(0)}
    client = Client()
    client.ensure(60)
    assert client.ask({"op": "warm", **slot})["state"] in ("starting", "ready")
    first = wait_for(lambda: ready_pids(client))[0]
    w = ServiceWorkers(60).take(gpu, 0, log=svc.tmp / "w.log")
    assert isinstance(w, AdoptedWorker) and w.proc.pid == first
    status = client.ask({"op": "status"})
    assert status["ready"] == [] and status["starting"] == []
    assert [x["device"] for x in status["waiting"]] == ["cuda:0"]
    # asking for another one meanwhile: none can start now, so the client starts its own
    reply, fds = client.request({"op": "take", **slot, "wait_s": 2}, maxfds=4)
    assert (reply["ok"], reply["state"], fds) == (False, "none", [])
    assert client.ask({"op": "warm", **slot})["state"] == "waiting"
    time.sleep(1.0)
    assert client.ask({"op": "status"})["starting"] == []
    # the run is over: now the replacement starts
    w.close()
    second = wait_for(lambda: ready_pids(client))[0]
    assert second != first
    assert client.ask({"op": "status"})["waiting"] == []


def test_a_worker_in_use_outlives_its_service_and_then_its_exit_status_is_unknown(svc) -> None:
    client = Client()
    client.ensure(60)
    warm_one(client)
    w = ServiceWorkers(60).take(POOL, 0, log=svc.tmp / "w.log")
    assert isinstance(w, AdoptedWorker)
    assert client.stop() is not None  # the service and its ready workers go; this one goes on
    w.send({"op": "ping"})
    assert w.next_event(time.monotonic() + 20) == {"event": "pong"}
    os.kill(w.proc.pid, signal.SIGSEGV)
    assert "exit status is unknown" in w.exit_description(wait_s=10)
    w.kill()
    assert not w.cwd.exists()


def test_bad_requests_are_refused_and_the_service_lives_on(svc) -> None:
    client = Client()
    pid = client.ensure(60)["pid"]
    path = client.path
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(str(path))  # says nothing: it holds up nobody else
    try:
        cases = {
            b'{"op": "exec", "cmd": "id"}\n': "unknown op 'exec'",
            b"\xff\xfe\x00garbage\n": "one JSON object",
            b"[1, 2, 3]\n": "one JSON object",
            b"a" * (MAX_LINE + 1000): f"longer than {MAX_LINE} bytes",
            json.dumps(
                {"op": "take", **_slot(), "device": "cuda:0;rm -rf /", "protocol": PROTOCOL}
            ).encode()
            + b"\n": ("bad device"),
            json.dumps(
                {
                    "op": "take",
                    "device": "cpu",
                    "interpreter": True,
                    "env": {"A": 1},
                    "protocol": PROTOCOL,
                }
            ).encode()
            + b"\n": "env must be an object of strings",
            b'{"op": "exit_status", "pid": "1", "protocol": %d}\n' % PROTOCOL: "integer pid",
            # the protocol is checked for every op: none of these changes anything
            b'{"op": "stop", "protocol": 999}\n': "this worker service speaks protocol",
            b'{"op": "stop"}\n': "protocol None",
            b'{"op": "status", "protocol": "2"}\n': "protocol 2:",
            json.dumps({"op": "warm", **_slot(), "protocol": PROTOCOL - 1}).encode()
            + b"\n": "this worker service speaks protocol",
        }
        for payload, why in cases.items():
            reply = raw_request(path, payload)
            assert reply["ok"] is False and why in reply["error"], (payload[:60], reply)
            if "protocol" in why:  # a client of another fibtui is told what it talks to
                assert (reply["state"], reply["protocol"], reply["pid"]) == (
                    "protocol",
                    PROTOCOL,
                    pid,
                )
        hello = client.hello()
        assert hello is not None and hello["pid"] == pid
        assert client.ask({"op": "status"})["ready"] == []  # nothing was started by any of them
    finally:
        silent.close()
    log = log_path(path).read_text()
    assert "unknown op 'exec'" in log and f"longer than {MAX_LINE} bytes" in log


# --------------------------------------------------------------------------------------------
# permissions
# --------------------------------------------------------------------------------------------


def test_folder_and_socket_modes(svc) -> None:
    client = Client()
    client.ensure(60)
    assert stat.S_IMODE(os.stat(svc.folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(client.path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(client.path).st_mode)
    assert stat.S_IMODE(os.stat(log_path(client.path)).st_mode) == 0o600


def test_a_folder_open_to_others_or_owned_by_another_user_is_refused(svc, capsys) -> None:
    svc.folder.mkdir(mode=0o700)
    os.chmod(svc.folder, 0o755)
    with pytest.raises(ServiceRefused, match="mode 0755"):
        socket_path()
    code, out, err = run_cli(capsys, "workers", "status")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "mode 0755" in err and "Traceback" not in err
    os.chmod(svc.folder, 0o700)
    if os.getuid() != 0:
        return  # only root can give a folder away: the rest needs root
    os.chown(svc.folder, 65534, 65534)
    code, out, err = run_cli(capsys, "workers", "stop")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "belongs to uid 65534" in err
    os.chown(svc.folder, 0, 0)
    assert socket_path().parent == svc.folder


def _connect_as(uid: int, path: Path) -> str:
    """Fork a child that drops to ``uid`` and sends hello: what it got, in words."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest, no threads of ours; only a socket and a pipe
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(10)
                    s.connect(str(path))
                    try:
                        s.sendall(b'{"op": "hello"}\n')
                    except OSError:
                        pass  # refused before it asked anything: the refusal is still there
                    got = s.recv(65536).decode("utf-8", "replace")
            except OSError as exc:
                got = f"error {type(exc).__name__}"
            os.write(w, got.encode()[:4000])
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        got = fh.read().decode()
    os.waitpid(pid, 0)
    return got


@pytest.mark.skipif(os.getuid() != 0, reason="dropping to another uid needs root")
def test_another_user_cannot_connect(svc) -> None:
    client = Client()
    client.ensure(60)
    # as set up, the folder (0700) keeps another user from even reaching the socket
    assert _connect_as(65534, client.path) == "error PermissionError"
    # opened up by hand (a mistake): the service itself still refuses that uid, and logs it
    os.chmod(svc.base, 0o711)
    os.chmod(svc.folder, 0o711)
    os.chmod(client.path, 0o666)
    try:
        got = _connect_as(65534, client.path)
    finally:
        os.chmod(svc.folder, 0o700)
        os.chmod(svc.base, 0o700)
        os.chmod(client.path, 0o600)
    reply = json.loads(got)
    assert reply["ok"] is False and "refused" in reply["error"] and "facts" not in reply
    assert "refused a connection from uid 65534" in log_path(client.path).read_text()
    assert client.hello() is not None  # and it goes on serving its own user


# --------------------------------------------------------------------------------------------
# lifetime
# --------------------------------------------------------------------------------------------


def test_a_service_with_other_facts_is_stopped_and_replaced(svc) -> None:
    path = socket_path()
    old = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fibtui.runners.service",
            "--socket",
            str(path),
            "--test-fact",
            "torch=0.0-old",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = Client()
    before = wait_for(client.hello, 15)
    assert before["pid"] == old.pid and before["facts"]["torch"] == "0.0-old"
    after = client.ensure(60)
    assert old.wait(timeout=15) == 0  # it was asked to stop, and did
    assert after["pid"] != old.pid and after["facts"] == facts()


def test_an_idle_service_exits_and_removes_its_socket(svc) -> None:
    workers = ServiceWorkers(idle_timeout_s=1.5)
    assert workers.prewarm(POOL, 0)  # starts the service, then a worker in it
    client = Client()
    hello = client.hello()
    assert hello is not None and hello["idle_timeout_s"] == 1.5
    assert wait_for(lambda: not client.path.exists(), 30)
    assert wait_for(lambda: not alive(hello["pid"]), 10)
    # its worker (ready or starting) went with it, and so did its scratch folder
    assert wait_for(lambda: marked_pids(svc.mark) == [], 15), marked_pids(svc.mark)
    assert wait_for(lambda: not scratch_folders(svc.tmp), 10), scratch_folders(svc.tmp)


def test_a_stale_socket_of_a_killed_service_is_replaced(svc) -> None:
    client = Client()
    first = client.ensure(60)["pid"]
    worker = warm_one(client)
    os.kill(first, signal.SIGKILL)
    assert wait_for(lambda: not alive(first), 10)
    assert client.path.exists() and client.hello() is None  # left behind, nobody answers
    # its ready worker sees its parent go and ends, removing its scratch folder
    assert wait_for(lambda: not alive(worker), 15)
    assert wait_for(lambda: not scratch_folders(svc.tmp), 10), scratch_folders(svc.tmp)
    second = client.ensure(60)["pid"]
    assert second != first and client.hello()["pid"] == second


# --------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------


def test_no_daemon_starts_no_service_and_runs_as_before(
    svc, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    argv = ["run", "--backend", "interpreter", "--workloads", "all", "-w", str(root)]
    code, out, err = run_cli(capsys, *argv, "--no-daemon")
    assert code == 0 and "1/1 PASSED" in out, err
    assert not svc.folder.exists() and marked_pids(svc.mark) == []
    monkeypatch.delenv("FIBTUI_WORKERS_DAEMON")  # the setting decides (the variable would)
    (root / "fibtui.toml").write_text("[workers]\ndaemon = false\n")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and "1/1 PASSED" in out, err
    assert not svc.folder.exists() and marked_pids(svc.mark) == []
    # a setting of the wrong kind: one line naming it, before any run folder is made
    runs = sorted((root / "optimize_ops" / "runs").iterdir())
    (root / "fibtui.toml").write_text('[workers]\ndaemon = "maybe"\n')
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "workers.daemon" in err
    assert sorted((root / "optimize_ops" / "runs").iterdir()) == runs
    # the default: the first run starts the service and waits for its worker (one start, not
    # two) and gives it back after its last job; the second run is handed that same worker
    (root / "fibtui.toml").unlink()
    for _ in range(2):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0 and "1/1 PASSED" in out, err
    GIVE_BACKS.wait()
    log = log_path(socket_path()).read_text()
    handed = re.findall(r"handed worker (\d+)", log)
    assert len(handed) == 2 and len(set(handed)) == 1, log
    assert re.findall(r"worker (\d+) \(\S+\) given back by pid \d+ after (\d) run", log) == [
        (handed[0], "1"),
        (handed[0], "2"),
    ], log
    ready = Client().ask({"op": "status"})["ready"]
    assert [(w["pid"], w["runs"]) for w in ready if w["pid"] == int(handed[0])] == [
        (int(handed[0]), 2)
    ]


def test_a_crash_in_a_handed_over_worker_is_attributed_as_today(svc, tmp_path: Path) -> None:
    """A segfault and an os._exit in workers handed over by the service: each is its kernel's
    RUNTIME_ERROR with the signal or code (the exit status comes from the service), the baseline
    PASSES, and no worker is handed over twice."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    sols = [
        str(add_kernel(root, "segfault", HOSTILE["segfault"])),
        str(add_kernel(root, "exits", "    os._exit(7)")),
    ]
    base = make_candidate(root, "base_py", "good_py")
    client = Client()
    client.ensure(60)
    warm_one(client)
    prepared = prepare_run(
        open_workspace(root),
        RunOptions(
            backend="interpreter",
            workloads="all",
            solutions=sols,
            baseline=str(base),
            job_timeout_s=120,
        ),
    )
    prepared.runner.warm = ServiceWorkers(60)
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    status = {j["solution"]: (j["status"], j["error"] or "") for j in record["jobs"]}
    assert status["base_py"][0] == "PASSED"
    assert status["segfault"][0] == "RUNTIME_ERROR" and "killed by SIGSEGV" in status["segfault"][1]
    assert status["exits"][0] == "RUNTIME_ERROR" and "exited with code 7" in status["exits"][1]
    assert any(isinstance(e, WorkerRestarted) for e in events)
    GIVE_BACKS.wait()
    log = log_path(client.path).read_text()
    handed = re.findall(r"handed worker (\d+)", log)
    assert len(handed) >= 2 and len(handed) == len(set(handed)), handed
    # a worker that crashed never comes back (the one serving at the end of the run may)
    given_back = re.findall(r"worker (\d+) \(\S+\) given back by", log)
    ended = re.findall(r"worker (\d+) ended \(", log)
    assert len(ended) >= 2 and not set(given_back) & set(ended), log
    assert len(given_back) <= 1 and set(given_back) <= set(handed), log
    status_now = client.ask({"op": "status"})
    assert status_now["handed"] == []
    assert [str(w["pid"]) for w in status_now["ready"] if str(w["pid"]) in handed] == given_back


def test_a_runner_killed_with_sigkill_leaves_no_worker_and_no_scratch(svc, tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="sleeps")
    client = Client()
    service_pid = client.ensure(60)["pid"]
    worker = warm_one(client)
    runner = subprocess.Popen(
        [sys.executable, "-m", "fibtui", "run", "--backend", "interpreter", "--workloads", "all"]
        + ["--timeout", "600", "--workspace", str(root)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # adopted: the worker renamed its scratch folder after the runner
        mine = wait_for(lambda: list(svc.tmp.glob(f"{SCRATCH_PREFIX}{runner.pid}-*")), 60)
        assert mine, "the runner never adopted a worker"
        handed = client.ask({"op": "status"})["handed"]
        assert [(h["pid"], h["owner_pid"]) for h in handed] == [(worker, runner.pid)]
        time.sleep(1.5)  # into the job: the kernel sleeps
        assert alive(worker)
    finally:
        runner.kill()
        runner.wait()
    assert wait_for(lambda: not alive(worker), 15), "the adopted worker outlived its runner"
    assert wait_for(lambda: not mine[0].exists(), 10)
    # the service reaps it in a thread of its own: its exit status comes a moment after the end
    exit_status = wait_for(
        lambda: (
            (reply := client.ask({"op": "exit_status", "pid": worker}))["state"] == "exited"
            and reply
        ),
        10,
    )
    assert exit_status and exit_status["returncode"] == 4  # the orphan watch
    # the service goes on, with a fresh worker for the next run
    assert client.hello()["pid"] == service_pid
    leftover = set(marked_pids(svc.mark)) - {service_pid, *ready_pids(client)}
    starting = client.ask({"op": "status"})["starting"]
    assert not leftover or starting, leftover


def test_the_tui_keeps_its_warm_worker_in_the_service_unless_it_is_off(
    svc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    warm = warm_workers_for(root, root / ".fibtui")
    assert isinstance(warm, ServiceWorkers)
    assert warm.prewarm(POOL, 0)  # the service starts, then a worker in it
    assert wait_for(lambda: ready_pids(Client()))
    monkeypatch.setenv("FIBTUI_WORKERS_DAEMON", "0")
    assert isinstance(warm_workers_for(root, root / ".fibtui"), WarmWorkers)
    monkeypatch.delenv("FIBTUI_WORKERS_DAEMON")
    (root / "fibtui.toml").write_text("[workers]\ndaemon = false\n")
    assert isinstance(warm_workers_for(root, root / ".fibtui"), WarmWorkers)


def test_the_service_modules_import_no_textual_or_gpu_stack() -> None:
    code = (
        "import json, sys\n"
        "import fibtui.runners.service.server, fibtui.runners.service.client\n"
        "import fibtui.verbs.workers\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    for banned in ("textual", "torch", "triton", "modal"):
        assert banned not in loaded, banned


def test_a_worker_key_ignores_the_terminal_it_was_asked_from() -> None:
    """A CLI run in one tmux pane and the TUI in another (or over SSH) find the same ready
    worker: the terminal's own variables are not part of a worker's key; what a kernel can see
    (PATH, CUDA_VISIBLE_DEVICES, PYTHONPATH...) is."""
    from fibtui.runners.service.common import worker_key

    base = {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root"}
    here = {**base, "TMUX": "/tmp/tmux-0/default,1,0", "TMUX_PANE": "%1", "TERM": "xterm"}
    there = {**base, "TMUX": "/tmp/tmux-0/other,9,2", "TMUX_PANE": "%7", "TERM": "screen"}
    ssh = {**base, "SSH_TTY": "/dev/pts/3", "SSH_CONNECTION": "a b c d", "COLUMNS": "80"}
    keys = {worker_key("cuda:0", False, env) for env in (base, here, there, ssh)}
    assert len(keys) == 1
    assert worker_key("cuda:0", False, {**base, "CUDA_VISIBLE_DEVICES": "1"}) not in keys
    assert worker_key("cuda:0", False, {**base, "PATH": "/opt/bin"}) not in keys


# --------------------------------------------------------------------------------------------
# issue 37 item 7 and issue 38 item 8: protocol, busy, folder, what the service keeps
# --------------------------------------------------------------------------------------------


def test_a_service_of_another_protocol_is_ended_by_its_pid_and_replaced(svc) -> None:
    """It refuses this client's stop as every op of another protocol; the client ends it with
    SIGTERM (the pid at the other end of the socket) and starts its own."""
    path = socket_path()
    code = (
        "import sys; import fibtui.runners.service.common as c; c.PROTOCOL = 999; "
        "import fibtui.runners.service.server as s; s.PROTOCOL = 999; "
        "sys.exit(s.main(sys.argv[1:]))"
    )
    old = subprocess.Popen(
        [sys.executable, "-c", code, "--socket", str(path)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = Client()
    hello = wait_for(client.hello, 15)
    assert hello["ok"] is False and hello["protocol"] == 999 and hello["pid"] == old.pid
    after = client.ensure(60)
    assert old.wait(timeout=15) == 0
    assert after["ok"] and after["pid"] != old.pid and after["facts"] == facts()


def test_status_tells_a_busy_service_from_none_under_many_connections(svc, capsys) -> None:
    client = Client()
    pid = client.ensure(60)["pid"]
    idle = []
    try:
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(client.path))
            idle.append(s)
        code, out, err = run_cli(capsys, "workers", "status", "--json")
        data = json.loads(out)
        assert code == 0 and data["running"] is True and data["busy"] is True, data
        # why: its own "busy" answer, or no answer yet when the connections are still queued
        assert "busy" in data["why"] or "did not answer" in data["why"], data
        code, out, _ = run_cli(capsys, "workers", "status")
        assert code == 0 and "running but did not answer" in out and "busy" in out
    finally:
        for s in idle:
            s.close()
    status = wait_for(lambda: client.ask({"op": "status"}) or {}, 20)  # it answers again
    assert status["pid"] == pid
    assert alive(pid)


def test_polling_status_keeps_no_service_alive_and_its_idle_time_is_true(svc, capsys) -> None:
    workers = ServiceWorkers(idle_timeout_s=2.0)
    assert workers.prewarm(POOL, 0)
    client = Client()
    hello = client.hello()
    assert hello is not None
    seen = []
    while client.path.exists() and len(seen) < 400:
        code, out, _ = run_cli(capsys, "workers", "status", "--json")
        data = json.loads(out)
        if data.get("answered"):
            seen.append(data["idle_s"])
        time.sleep(0.05)
    assert not client.path.exists(), "polling kept the service alive"
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] > seen[0], seen
    assert wait_for(lambda: not alive(hello["pid"]), 10)


def test_a_ready_worker_unused_for_worker_idle_s_is_stopped_and_status_shows_its_memory(
    svc, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client()
    client.ensure(60, worker_idle_s=3.0)
    pid = warm_one(client)
    code, out, _ = run_cli(capsys, "workers", "status", "--json")
    data = json.loads(out)
    (ready,) = data["ready"]
    assert data["worker_idle_s"] == 3.0 and ready["pid"] == pid
    assert isinstance(ready["rss_bytes"], int) and ready["rss_bytes"] > 10 * 2**20
    assert 0 <= ready["stops_in_s"] <= 3.0 and ready["idle_s"] >= 0
    code, out, _ = run_cli(capsys, "workers", "status")
    assert f"pid {pid} (" in out and " MB)" in out and "ready workers hold" in out
    assert wait_for(lambda: not alive(pid), 30), "the idle worker was kept"
    assert ready_pids(client) == [] and client.hello() is not None  # the service goes on
    assert "idle for 3 s: stopped" in log_path(client.path).read_text()


def test_a_worker_given_back_leaves_no_spare_beyond_one(svc) -> None:
    client = Client()
    client.ensure(60)
    warm_one(client)
    sw = ServiceWorkers(60)
    w = sw.take(POOL, 0, log=svc.tmp / "w.log")
    assert isinstance(w, AdoptedWorker)
    spare = wait_for(lambda: ready_pids(client))[0]  # the replacement started at the take
    assert w.release()
    assert sw._return(POOL, 0, w)
    assert ready_pids(client) == [w.proc.pid]  # the warmer one is kept, the spare stopped
    assert wait_for(lambda: not alive(spare), 20)


def test_display_variables_never_make_a_new_pool() -> None:
    from fibtui.runners.service.common import worker_key

    base = {"PATH": "/usr/bin", "TRITON_INTERPRET": "1", "HOME": "/root"}
    shown = [
        {"FIBTUI_FORCE_TERMINAL": "1"},
        {"NO_COLOR": "1"},
        {"FORCE_COLOR": "1", "COLORTERM": "truecolor"},
        {"TERM": "dumb", "COLUMNS": "80", "LINES": "24"},
        {"TEXTUAL_DRIVER": "x", "PAGER": "less", "LESS": "-R"},
    ]
    keys = {worker_key("cpu", True, {**base, **extra}) for extra in [{}, *shown]}
    assert len(keys) == 1
    assert worker_key("cpu", True, {**base, "TRITON_INTERPRET": "0"}) not in keys
    assert worker_key("cpu", True, {**base, "CUDA_VISIBLE_DEVICES": "1"}) not in keys
    assert worker_key("cpu", False, base) not in keys


def test_a_refused_folder_is_said_with_its_fix_and_stop_names_its_socket(svc, capsys) -> None:
    svc.folder.mkdir(mode=0o700)
    code, out, err = run_cli(capsys, "workers", "stop")  # a folder, no service
    assert code == 0 and "socket None" not in out and str(socket_path()) in out
    os.chmod(svc.folder, 0o777)
    code, out, err = run_cli(capsys, "workers", "status")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "mode 0777" in err and f"fix: chmod 700 {svc.folder}" in err
    notes: list[str] = []
    assert ServiceWorkers(60).take(POOL, 0, say=notes.append) is None
    assert len(notes) == 1 and "this run starts its own workers" in notes[0]
    assert f"chmod 700 {svc.folder}" in notes[0]
