"""The worker service as a run sees it, and as ``fibtui workers`` asks it.

:class:`ServiceWorkers` stands where :class:`fibtui.runners.local.WarmWorkers` stands (a runner's
``warm``): ``take`` asks the service for a ready worker of the pool slot and gets its pipes; the
worker becomes an :class:`AdoptedWorker`, the same :class:`~fibtui.runners.local.WorkerProcess`
to the runner (load, jobs, timeouts, crash attribution and kill are unchanged). Anything wrong
with the service (refused folder, a crash of it, a slow answer) makes ``take`` return None: the
run starts its own worker, as with ``--no-daemon``.
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fibtui.core.errors import FibError, InputError
from fibtui.runners.local import (
    GIVE_BACKS,
    SCRATCH_PREFIX,
    WarmWorkers,
    WorkerPool,
    WorkerProcess,
    scrubbed_environment,
)
from fibtui.runners.service.common import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_WORKER_IDLE_S,
    PROTOCOL,
    ServiceRefused,
    close_fds,
    facts,
    log_path,
    package_root,
    peer_credentials,
    read_line,
    send_line,
    socket_path,
)
from fibtui.worker.wire import Adopt, Event, ExitStatus, ServiceOp, SlotRequest, bare, event_of

#: how long a client waits for a service it started to answer
SPAWN_WAIT_S = 15.0
#: how long a handed-over worker has to answer ``adopt``
ADOPT_TIMEOUT_S = 10.0
#: the service's log is set aside (``.log.1``) when it is larger than this at a start
_LOG_ROTATE_BYTES = 4 << 20


class ServiceBusy(BlockingIOError):
    """The service's queue of waiting connections is full (connect gave EAGAIN): it runs but
    cannot take this request now. An OSError, as every other failure to reach it."""


class ServiceError(Exception):
    """The service did not answer as it should (it is then not used)."""


def _off(value: str) -> bool:
    return value.strip().lower() in ("0", "false", "no", "off")


def daemon_enabled(root: Path | None, no_daemon: bool = False) -> bool:
    """Do runs use the worker service? Not with ``--no-daemon``, ``FIBTUI_WORKERS_DAEMON=0`` or
    ``[workers] daemon = false`` in the workspace's fibtui.toml."""
    if no_daemon:
        return False
    env = os.environ.get("FIBTUI_WORKERS_DAEMON")
    if env is not None:
        return not _off(env)
    if root is None:
        return True
    from fibtui.core.settings import get_setting, settings_path

    value = get_setting(root, "workers.daemon", True)
    if not isinstance(value, bool):
        raise InputError(settings_path(root), "must be true or false", field="workers.daemon")
    return value


def idle_timeout_for(root: Path | None) -> float:
    """``FIBTUI_WORKERS_IDLE_S``, else ``[workers] idle_timeout_s``, else 10 minutes."""
    return _seconds_setting(
        root, "FIBTUI_WORKERS_IDLE_S", "workers.idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S
    )


def worker_idle_for(root: Path | None) -> float:
    """How long a ready worker nobody takes is kept: ``FIBTUI_WORKERS_WORKER_IDLE_S``, else
    ``[workers] worker_idle_s``, else 2 minutes."""
    return _seconds_setting(
        root, "FIBTUI_WORKERS_WORKER_IDLE_S", "workers.worker_idle_s", DEFAULT_WORKER_IDLE_S
    )


def _seconds_setting(root: Path | None, env_name: str, setting: str, default: float) -> float:
    raw: Any = os.environ.get(env_name)
    where: Any = env_name
    field = None
    if raw is None and root is not None:
        from fibtui.core.settings import get_setting, settings_path

        raw = get_setting(root, setting, None)
        where, field = settings_path(root), setting
    if raw is None:
        return default
    try:
        value = float(raw)
        if isinstance(raw, bool) or not value > 0:
            raise ValueError
    except (TypeError, ValueError):
        raise InputError(where, "must be a positive number of seconds", field=field) from None
    return value


class Client:
    """One request per connection to the service of this installation (``socket_path()``)."""

    def __init__(self, path: Path | None = None, create: bool = True) -> None:
        self.path = path or socket_path(create=create)
        #: the pid at the other end of the last connection (SO_PEERCRED: the service itself)
        self.peer_pid: int | None = None

    def request(
        self,
        obj: dict[str, Any],
        timeout: float = 10.0,
        maxfds: int = 0,
        fds: list[int] | None = None,
    ) -> tuple[dict[str, Any], list[int]]:
        """The reply and the descriptors that came with it (``fds``: descriptors sent with the
        request). FileNotFoundError or ConnectionRefusedError: no service; ServiceError: it
        answered wrong. Every request carries this client's ``protocol`` (the service refuses
        any op of another)."""
        obj = {**obj, "protocol": obj.get("protocol", PROTOCOL)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(str(self.path))
            except BlockingIOError:
                raise ServiceBusy(
                    errno.EAGAIN, "busy: its queue of waiting connections is full"
                ) from None
            pid, uid, _ = peer_credentials(sock)
            if uid != os.getuid():
                raise ServiceRefused(
                    f"the worker service at {self.path} runs as uid {uid}: not used"
                )
            self.peer_pid = pid
            send_line(sock, obj, fds)
            raw, fds = read_line(sock, maxfds=maxfds)
        try:
            reply = json.loads(raw)
            if not isinstance(reply, dict):
                raise ValueError
        except ValueError:
            close_fds(fds)
            raise ServiceError(f"the worker service answered {raw[:120]!r}") from None
        return reply, fds

    def ask(self, obj: dict[str, Any], timeout: float = 10.0) -> dict[str, Any] | None:
        """The reply, or None when no service is running (or one is going away right now)."""
        try:
            return self.request(obj, timeout)[0]
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            return None

    def alive(self) -> bool:
        """Does a service hold this installation's lock (it is running, answering or not)? Read
        from the lock alone, so a service too busy to answer is still told from none."""
        import fcntl

        from fibtui.runners.service.common import lock_path

        try:
            fd = os.open(lock_path(self.path), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def hello(self) -> dict[str, Any] | None:
        return self.ask(bare(ServiceOp.HELLO))

    def ensure(
        self, idle_timeout_s: float, worker_idle_s: float = DEFAULT_WORKER_IDLE_S
    ) -> dict[str, Any]:
        """The hello of a running service with this process's facts: started when none runs,
        restarted when the running one's facts differ (fibtui, torch or the GPU set changed)."""
        mine = facts()
        found = self.hello()
        if found is not None and found.get("state") == "busy":
            raise ServiceError(f"the worker service (pid {found.get('pid')}) is {found['error']}")
        if found is not None and (not found.get("ok") or found.get("facts") != mine):
            self.stop()  # other facts, or another protocol (it refused the hello)
            found = None
        if found is None:
            found = self._spawn_and_wait(idle_timeout_s, SPAWN_WAIT_S, worker_idle_s)
            if found.get("facts") != mine:
                raise ServiceError("the worker service that answered has other facts")
        return found

    def _spawn_and_wait(
        self, idle_timeout_s: float, wait_s: float, worker_idle_s: float = DEFAULT_WORKER_IDLE_S
    ) -> dict[str, Any]:
        """Start a service and wait for its hello. One that found the lock still held (the old
        service was not quite gone) ends at once: it is started again."""
        deadline = time.monotonic() + wait_s
        proc = self.spawn(idle_timeout_s, worker_idle_s)
        while True:
            found = self.hello()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"the worker service did not answer within {wait_s:g} s "
                    f"(see {log_path(self.path)})"
                )
            if proc.poll() is not None:
                proc = self.spawn(idle_timeout_s, worker_idle_s)
            time.sleep(0.03)

    def spawn(
        self, idle_timeout_s: float, worker_idle_s: float = DEFAULT_WORKER_IDLE_S
    ) -> subprocess.Popen[bytes]:
        """Start a service, detached (a new session, its output to its log), and let a thread
        reap it when it ends (it outlives this process as a rule)."""
        log = log_path(self.path)
        try:
            if log.stat().st_size > _LOG_ROTATE_BYTES:
                os.replace(log, log.with_suffix(".log.1"))
        except OSError:
            pass
        env = scrubbed_environment(dict(os.environ))
        root = str(package_root())
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fibtui.runners.service",
                    "--socket",
                    str(self.path),
                    "--idle-timeout",
                    repr(float(idle_timeout_s)),
                    "--worker-idle",
                    repr(float(worker_idle_s)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                cwd=str(self.path.parent),
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(fd)
        threading.Thread(target=proc.wait, daemon=True, name="fibtui-service-reaper").start()
        return proc

    def stop(self, wait_s: float = 10.0) -> int | None:
        """Ask the service to stop; wait until its socket is gone. Its pid, or None: none ran.

        A service of another protocol refuses the stop (as every op of it): it is ended with
        SIGTERM instead, by the pid at the other end of this very socket (SO_PEERCRED, of this
        user: checked by :meth:`request`), never by a pid it wrote somewhere."""
        reply = self.ask(bare(ServiceOp.STOP))
        if reply is None:
            return None
        pid = reply.get("pid")
        if not reply.get("ok"):
            if reply.get("state") != "protocol" or reply.get("protocol") == PROTOCOL:
                return None  # busy, or refused for another reason: it goes on
            pid = self.peer_pid
            if pid is None:
                return None
            import signal

            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.path.exists():
            time.sleep(0.03)
        return pid if isinstance(pid, int) else None

    def exit_status(self, pid: int) -> tuple[str, int | None]:
        """("exited", code), ("running", None), ("unknown", None) from the service; ("gone",
        None) when no service answers."""
        try:
            reply = self.ask(ExitStatus(pid).to_dict(), timeout=2.0)
        except (OSError, ServiceError, FibError):
            reply = None
        if not reply or not reply.get("ok"):
            return "gone", None
        code = reply.get("returncode")
        return str(reply.get("state")), code if isinstance(code, int) else None


class ForeignProcess:
    """What a runner uses of a Popen (``pid``, ``stdin``, ``stdout``, ``stderr``, ``poll``,
    ``wait``, ``returncode``) for a worker it did not start. Its end is seen on a pidfd the
    service passed (that very process, never a reused pid); its exit status comes from the
    service, its parent, which alone can reap it: ``status_known`` is False when the service
    could not say (it is gone)."""

    def __init__(self, pid: int, fds: list[int], pidfd: int | None, client: Client) -> None:
        self.pid = pid
        self.stdin = os.fdopen(fds[0], "wb")
        self.stdout = os.fdopen(fds[1], "rb")
        self.stderr = os.fdopen(fds[2], "rb")
        self._pidfd = pidfd
        self._client = client
        self.returncode: int | None = None
        self.status_known = True

    def _ended(self, timeout: float | None) -> bool:
        if self._pidfd is not None:
            return bool(select.select([self._pidfd], [], [], timeout)[0])
        deadline = None if timeout is None else time.monotonic() + timeout
        while _running(self.pid):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self._settle()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(["fibtui.worker", "serve"], timeout or 0)
            self._settle()
        assert self.returncode is not None
        return self.returncode

    def _settle(self) -> None:
        deadline = time.monotonic() + 2.0  # the service reaps it a moment after its end
        while True:
            state, code = self._client.exit_status(self.pid)
            if state == "exited" and code is not None:
                self.returncode = code
                return
            if state != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.status_known = False
        self.returncode = 0

    def release(self) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        if self._pidfd is not None:
            close_fds([self._pidfd])
            self._pidfd = None


def _running(pid: int) -> bool:
    from fibtui.core.procs import process_alive

    return process_alive(pid)


class AdoptedWorker(WorkerProcess):
    """A worker the service started and handed over: to the runner the same WorkerProcess
    (events, log, send, close, kill: its process group, as it leads its own session); only how
    it ended is asked of the service."""

    def __init__(self, proc: ForeignProcess, cwd: Path, log_path: Path) -> None:
        self._attach(proc, cwd, log_path)

    def kill(self) -> None:
        super().kill()
        self.proc.release()

    def exit_description(self, wait_s: float = 0.0) -> str:
        text = super().exit_description(wait_s)
        if self.proc.returncode is not None and not self.proc.status_known:
            return "ended (its exit status is unknown: the worker service that started it is gone)"
        return text


def _scratch_ok(path: Any) -> bool:
    return isinstance(path, str) and os.path.basename(path).startswith(SCRATCH_PREFIX)


def adopt(reply: dict[str, Any], fds: list[int], log: Path, client: Client) -> AdoptedWorker | None:
    """Wrap a handed-over worker and make it this process's (``adopt``); None when it does not
    answer as it should (it is killed then; the run starts its own)."""
    pid, scratch = reply.get("pid"), reply.get("scratch")
    pidfd = fds[3] if reply.get("pidfd") and len(fds) >= 4 else None
    if len(fds) < 3 or not isinstance(pid, int) or not isinstance(scratch, str):
        close_fds(fds)
        return None
    if not _scratch_ok(scratch):
        close_fds(fds)
        return None
    close_fds(fds[4:] if pidfd is not None else fds[3:])
    w = AdoptedWorker(ForeignProcess(pid, fds[:3], pidfd, client), Path(scratch), log)
    w.send(Adopt(os.getpid()).to_dict())
    ev = w.next_event(time.monotonic() + ADOPT_TIMEOUT_S)
    if event_of(ev) != Event.ADOPTED:
        w.kill()
        return None
    if _scratch_ok(ev.get("scratch")):
        w.cwd = Path(ev["scratch"])
    return w


class ServiceWorkers:
    """The worker service seen by a run (a runner's ``warm``, like WarmWorkers): ``take``,
    ``prewarm``, ``count``, ``close``. The service is started or restarted on first use."""

    def __init__(
        self,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        worker_idle_s: float = DEFAULT_WORKER_IDLE_S,
    ) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.worker_idle_s = worker_idle_s
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._broken: str | None = None
        self._said = False

    def _service(self, say: Callable[[str], None] | None) -> Client | None:
        with self._lock:
            if self._client is None and self._broken is None:
                try:
                    client = Client()
                    client.ensure(self.idle_timeout_s, self.worker_idle_s)
                    self._client = client
                except (FibError, ServiceError, OSError) as exc:
                    text = exc.one_line() if isinstance(exc, FibError) else str(exc)
                    self._broken = (
                        f"the worker service is not used (this run starts its own workers): {text}"
                    )
            if self._broken is not None and say is not None and not self._said:
                self._said = True
                say(self._broken)
            return self._client

    def _request(
        self, pool: WorkerPool, slot: int, op: ServiceOp, wait_s: float = 0.0
    ) -> SlotRequest:
        return SlotRequest(op, pool.devices[slot], pool.interpreter, pool.env_for(slot), wait_s)

    def take(
        self,
        pool: WorkerPool,
        slot: int,
        log: Path | None = None,
        cancel: threading.Event | None = None,
        say: Callable[[str], None] | None = None,
    ) -> WorkerProcess | None:
        """A ready worker from the service for this slot, or None (start one: the service then
        starts one for next time). While one is starting there, wait for it (cancel stops that)."""
        GIVE_BACKS.wait()  # the worker of this process's last run may be on its way back
        client = self._service(say)
        if client is None:
            return None
        req = self._request(pool, slot, ServiceOp.TAKE, wait_s=1.0).to_dict()
        deadline = time.monotonic() + pool.load_timeout_s
        restarted = False
        while True:
            try:
                reply, fds = client.request(req, timeout=15.0, maxfds=4)
            except (FileNotFoundError, ConnectionRefusedError):
                if restarted:  # it went away (its idle timeout, a stop): start it once more
                    return None
                restarted = True
                with self._lock:
                    self._client = None
                client = self._service(say)
                if client is None:
                    return None
                continue
            except (OSError, ServiceError, FibError) as exc:
                if say is not None:
                    say(f"the worker service did not hand over a worker: {exc}")
                return None
            if reply.get("ok"):
                return adopt(reply, fds, log or Path(os.devnull), client)
            close_fds(fds)
            if reply.get("error") and say is not None:
                what = "could not start" if reply.get("state") == "failed" else "did not hand over"
                say(f"the worker service {what} a worker: {reply.get('error')}")
            if reply.get("state") != "starting" or time.monotonic() > deadline:
                return None
            if cancel is not None and cancel.is_set():
                return None

    def give_back(self, pool: WorkerPool, slot: int, w: WorkerProcess) -> None:
        """After a run's last job on this slot: hand its worker back to the service (``return``),
        which keeps it ready for the next run, when the worker says it is fit for one
        (:meth:`WorkerProcess.release`); else shut it down. In a thread (the verdict does not wait
        for it; the command's end does)."""

        def back() -> None:
            if not (isinstance(w, AdoptedWorker) and w.release() and self._return(pool, slot, w)):
                w.close()

        GIVE_BACKS.start(back)

    def _return(self, pool: WorkerPool, slot: int, w: AdoptedWorker) -> bool:
        client = self._client
        proc = w.proc
        if client is None or proc.stdin is None or proc.stdout is None or proc.stderr is None:
            return False
        req = self._request(pool, slot, ServiceOp.RETURN)
        req.pid, req.runs = proc.pid, w.runs
        fds = [proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()]
        try:
            reply, got = client.request(req.to_dict(), timeout=15.0, fds=fds)
        except (OSError, ServiceError, FibError):
            return False
        close_fds(got)
        if not reply.get("ok"):
            return False
        proc.release()  # this process's ends of its pipes, and the pidfd: the service has them
        return True

    def prewarm(self, pool: WorkerPool, slot: int = 0, timeout_s: float = 120.0) -> bool:
        """Have the service start a worker for this slot (it answers at once) unless one is
        ready there, the last run's given back included (waited for, when it is on its way)."""
        GIVE_BACKS.wait()
        client = self._service(None)
        if client is None:
            return False
        try:
            reply, _ = client.request(self._request(pool, slot, ServiceOp.WARM).to_dict())
        except (OSError, ServiceError, FibError):
            return False
        return bool(reply.get("ok"))

    def count(self) -> int:
        return 0  # the service keeps them: prewarm asks it each time (it starts one at most)

    def close(self) -> None:
        pass  # the service's ready workers outlive this process until its idle timeout


def service_workers(root: Path | None, no_daemon: bool = False) -> ServiceWorkers | None:
    """The worker service for the runs of the workspace at ``root``, or None when it is off."""
    if not daemon_enabled(root, no_daemon):
        return None
    return ServiceWorkers(idle_timeout_for(root), worker_idle_for(root))


def warm_workers_for(root: Path, state_dir: Path) -> ServiceWorkers | WarmWorkers:
    """The TUI's warm workers: the worker service's, else (it is off, or its settings are
    broken: a run reports those) its own, as before."""
    try:
        found = service_workers(root)
    except FibError:
        found = None
    return found if found is not None else WarmWorkers(state_dir / "warm")
