"""The worker service: ``python -m fibtui.runners.service --socket PATH [--idle-timeout S]``.

It keeps ready ``python -m fibtui.worker serve`` processes, one per key (the pool slot and a
digest of the environment the client would start it with), and answers one JSON request line per
connection on a Unix socket:

- ``hello``: its facts (fibtui version and sources digest, Python, torch, triton, the GPU set),
  pid and idle timeout; a client whose facts differ stops it and starts a new one;
- ``take`` (device, interpreter, env, wait_s): a ready worker for that key is handed over (its
  stdin, stdout and stderr pipes and a pidfd, as SCM_RIGHTS) and given to no one else unless
  that run gives it back (``return``).
  Without one, the service starts one and the answer says ``starting`` (ask again: the client
  waits for it rather than start a second), ``none`` (none can start now, see below: the client
  starts its own) or ``failed`` (why the last start failed);
- ``warm``: start one for that key unless one is ready or starting (the TUI, ahead of a gate);
- ``return`` (pid, device, interpreter, env, runs; the worker's stdin, stdout and stderr as
  SCM_RIGHTS): the run that was handed that worker gives it back after its last job, the worker
  having answered ``release`` fit for another run. Only the process it was handed to may return
  it; the service makes it its own again (``adopt``: it must answer at once) and keeps it ready,
  first in line for the next ``take`` of its key, instead of starting a replacement;
- ``status``, ``stop``;
- ``exit_status`` (pid): how a worker it handed over ended (its parent is this service, so only
  it can reap it and know), kept for ``EXIT_MEMORY_S``.

A GPU worker is never started while a worker this service handed over for the same GPU is alive:
that run is measuring, and a process importing torch, creating a CUDA context and opening a CUPTI
session beside it is not something its timings should share the GPU with. Such a start waits
until the handed-over worker has ended (the run is over), then goes ahead; the replacement for a
worker just handed over starts that way too. Interpreter workers start at once (their timings
give no speed verdict).

Only the user running the service may connect (the folder is 0700, the socket 0600, and every
connection's peer uid is checked with SO_PEERCRED); anything else is refused and logged. The env a
client sends is scrubbed of secrets again. An idle service (no request and no handed-over worker
alive for ``idle_timeout_s``) stops its ready workers, removes its socket and exits.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fibtui.runners.service.common import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_WORKER_IDLE_S,
    OPS,
    PROTOCOL,
    READ_TIMEOUT_S,
    LineTooLong,
    ServiceRefused,
    check_device,
    check_env,
    check_folder,
    close_fds,
    facts,
    lock_path,
    peer_credentials,
    read_line,
    send_line,
    worker_key,
)
from fibtui.worker.wire import (
    OP,
    RUNNER_PID_ENV,
    SCRATCH_ENV,
    WORK_OPS,
    Adopt,
    Event,
    HandOver,
    ServiceOp,
    event_of,
    op_of,
)

#: how long the service remembers how a handed-over worker ended
EXIT_MEMORY_S = 900.0
#: how long a worker may take to say ready
START_TIMEOUT_S = 600.0
#: the longest a ``take`` waits for a starting worker before it answers ``starting``
MAX_TAKE_WAIT_S = 5.0
#: connections served at once (more are closed unanswered)
MAX_CONNECTIONS = 64
#: bytes of one starting worker's stderr copied into the service's log
_STDERR_LOG_CAP = 20_000


def log(msg: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        sys.stderr.write(f"{stamp} [{os.getpid()}] {msg}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@dataclass
class Ready:
    key: str
    device: str
    interpreter: bool
    proc: subprocess.Popen[bytes]
    scratch: str
    since: float
    #: runs it served before (a worker given back after a run: ``return``)
    runs: int = 0


@dataclass
class Handed:
    pid: int
    key: str
    device: str
    owner_pid: int
    since: float
    interpreter: bool = False
    proc: subprocess.Popen[bytes] | None = None
    scratch: str = ""


#: how long a worker given back has to answer ``adopt``
RETURN_ADOPT_TIMEOUT_S = 10.0
#: workers kept ready for one key at most: a worker given back while one is ready replaces it
#: (the one given back is the warmer), so a key never holds an idle spare beyond one
MAX_READY_PER_KEY = 1


class ProtocolMismatch(ValueError):
    """A request of another protocol: refused, with this service's protocol and pid in the reply
    (a client of another fibtui learns what it talks to, and can end it by its pid)."""


def rss_bytes(pid: int) -> int | None:
    """The resident memory of a process (VmRSS in /proc), or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _read_event_line(fd: int, deadline: float) -> bytes:
    """One line from a worker's stdout, read straight from the descriptor (nothing past the
    line is taken: the worker says one line per request), or what came before the deadline."""
    line = b""
    while b"\n" not in line:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    return line.split(b"\n", 1)[0]


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


class Service:
    def __init__(
        self,
        path: Path,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        max_ready: int = 8,
        fact_overrides: dict[str, Any] | None = None,
        worker_idle_s: float = DEFAULT_WORKER_IDLE_S,
    ) -> None:
        self.path = path
        self.idle_timeout_s = idle_timeout_s
        #: a ready worker nobody took for this long is stopped (its memory is given back)
        self.worker_idle_s = worker_idle_s
        self.max_ready = max(1, max_ready)
        self.facts = {**facts(), **(fact_overrides or {})}
        self.started = time.time()
        self._cond = threading.Condition()
        self._ready: dict[str, list[Ready]] = {}
        self._starting: dict[str, float] = {}
        self._failed: dict[str, str] = {}
        self._handed: dict[int, Handed] = {}
        self._exited: dict[int, tuple[int, float]] = {}
        #: pids of workers handed over at least once, whose reaper thread waits for their end
        self._reaping: set[int] = set()
        self._asked: dict[str, float] = {}
        #: starts waiting for a GPU to be free of handed-over workers: key -> (device, interpreter, env)
        self._deferred: dict[str, tuple[str, bool, dict[str, str]]] = {}
        #: workers being started: key -> (process, scratch folder), and the threads starting them
        self._booting: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
        self._boots: list[threading.Thread] = []
        self._activity = time.monotonic()
        self._busy_refusals = 0
        self._stop = threading.Event()
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._inode: int | None = None

    # -- life --------------------------------------------------------------------------------

    def bind(self) -> bool:
        """Take the installation's lock and its socket; False when another service holds them."""
        check_folder(self.path.parent)
        self._lock_fd = os.open(lock_path(self.path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log("another worker service holds this socket: exiting")
            os.close(self._lock_fd)
            self._lock_fd = None
            return False
        try:  # a socket left by a service that was killed (the lock proves none is alive)
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._inode = os.stat(self.path).st_ino
        sock.listen(32)
        sock.settimeout(0.5)
        self._listener = sock
        return True

    def serve(self) -> int:
        if not self.bind():
            return 0
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: self._stop.set())
        log(
            f"worker service started: socket {self.path}, idle timeout {self.idle_timeout_s:g} s, "
            f"ready workers stopped after {self.worker_idle_s:g} s idle, "
            f"fibtui {self.facts.get('fibtui')} sources {self.facts.get('sources')}, "
            f"torch {self.facts.get('torch')}"
        )
        assert self._listener is not None
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    conn = None
                except OSError:
                    if self._stop.is_set():
                        break
                    raise
                if conn is not None:  # its op, when it is work, counts as activity (_handle)
                    self._dispatch(conn)
                self._housekeeping()
        finally:
            self.shutdown()
        return 0

    def _dispatch(self, conn: socket.socket) -> None:
        if not self._connections.acquire(blocking=False):
            # alive, but serving as many connections as it may: said, so that a client (``fibtui
            # workers status``) tells a busy service from none
            try:
                conn.settimeout(0.2)
                send_line(
                    conn,
                    {
                        "ok": False,
                        "state": "busy",
                        "pid": os.getpid(),
                        "protocol": PROTOCOL,
                        "error": f"busy: {MAX_CONNECTIONS} connections at once, ask again",
                    },
                )
            except OSError:
                pass
            finally:
                conn.close()
            self._busy_refusals += 1
            if self._busy_refusals in (1, 10, 100) or self._busy_refusals % 1000 == 0:
                log(
                    f"more than {MAX_CONNECTIONS} connections at once: "
                    f"{self._busy_refusals} answered busy so far"
                )
            return

        def run() -> None:
            try:
                self._handle(conn)
            finally:
                self._connections.release()

        threading.Thread(target=run, daemon=True, name="fibtui-service-conn").start()

    def _housekeeping(self) -> None:
        now = time.monotonic()
        dead: list[Ready] = []
        idle: list[Ready] = []
        wall = time.time()
        with self._cond:
            for key, workers in list(self._ready.items()):
                alive = [w for w in workers if w.proc.poll() is None]
                dead += [w for w in workers if w.proc.poll() is not None]
                idle += [w for w in alive if wall - w.since > self.worker_idle_s]
                alive = [w for w in alive if w not in idle]
                if alive:
                    self._ready[key] = alive
                else:
                    del self._ready[key]
            for pid, (_, at) in list(self._exited.items()):
                if now - at > EXIT_MEMORY_S:
                    del self._exited[pid]
            if self._handed:  # a run is using one of its workers: not idle
                self._activity = now
        for w in dead:
            log(f"ready worker {w.proc.pid} ({w.key}) ended by itself ({w.proc.returncode})")
            self._discard(w)
        for w in idle:
            log(f"ready worker {w.proc.pid} ({w.key}) idle for {self.worker_idle_s:g} s: stopped")
            threading.Thread(target=self._discard, args=(w,), daemon=True).start()
        if now - self._activity > self.idle_timeout_s:
            log(f"idle for {self.idle_timeout_s:g} s: exiting")
            self._stop.set()

    def shutdown(self) -> None:
        self._stop.set()
        if self._listener is not None:
            try:
                self._listener.close()
            except OSError:
                pass
            self._listener = None
            try:
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass
        with self._cond:
            ready = [w for ws in self._ready.values() for w in ws]
            self._ready.clear()
            booting = list(self._booting.values())
            boots = list(self._boots)
            self._cond.notify_all()
        for w in ready:
            self._discard(w)
        # workers still starting: stopped here, and their threads given the time to clean up
        # (this process exiting would end those threads before they removed the scratch folders)
        for proc, scratch in booting:
            _kill_group(proc)
            shutil.rmtree(scratch, ignore_errors=True)
        for t in boots:
            t.join(timeout=5)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            log("worker service stopped")

    def _discard(self, w: Ready) -> None:
        _kill_group(w.proc)
        _close_pipes(w.proc)
        shutil.rmtree(w.scratch, ignore_errors=True)

    # -- requests ----------------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(READ_TIMEOUT_S)
            try:
                peer_pid, uid, _ = peer_credentials(conn)
            except OSError:
                return
            try:
                if uid != os.getuid():
                    log(f"refused a connection from uid {uid} (pid {peer_pid}): not this user")
                    send_line(conn, {"ok": False, "error": "refused: not this service's user"})
                    return
                req, fds = self._request(conn, peer_pid)
                op = req[OP]
                if op in WORK_OPS:
                    self._activity = time.monotonic()
                if op == ServiceOp.RETURN:
                    self._op_return(conn, req, peer_pid, fds)
                else:
                    close_fds(fds)  # descriptors come with ``return`` alone
                    getattr(self, f"_op_{op}")(conn, req, peer_pid)
            except ValueError as exc:
                log(f"refused a request from pid {peer_pid}: {exc}")
                reply: dict[str, Any] = {"ok": False, "error": f"refused: {exc}"}
                if isinstance(exc, ProtocolMismatch):
                    reply |= {"state": "protocol", "protocol": PROTOCOL, "pid": os.getpid()}
                send_line(conn, reply)
            except OSError:
                return  # the client went away (or timed out): nothing to answer

    def _request(self, conn: socket.socket, peer_pid: int) -> tuple[dict[str, Any], list[int]]:
        """The request and the descriptors that came with it; ValueError (refused) when it is
        too long, not JSON or an unknown op (its descriptors closed)."""
        fds: list[int] = []
        try:
            raw, fds = read_line(conn, maxfds=3)
            req = json.loads(raw)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except LineTooLong as exc:
            raise ValueError(str(exc)) from None
        except (ValueError, UnicodeDecodeError):
            close_fds(fds)
            raise ValueError("a request is one JSON object on one line") from None
        op = op_of(req)
        if op not in OPS:
            close_fds(fds)
            raise ValueError(f"unknown op {str(op)[:40]!r} (known: {', '.join(OPS)})")
        # every op, hello and stop included: a client of another protocol is told which this
        # one speaks (and its pid), and changes nothing here
        protocol = req.get("protocol")
        if protocol != PROTOCOL or isinstance(protocol, bool):
            close_fds(fds)
            raise ProtocolMismatch(
                f"protocol {str(protocol)[:20]}: this worker service speaks protocol {PROTOCOL}"
            )
        return req, fds

    def _op_hello(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        send_line(conn, {"ok": True, **self._identity()})

    def _identity(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "facts": self.facts,
            "idle_timeout_s": self.idle_timeout_s,
            "worker_idle_s": self.worker_idle_s,
            "rss_bytes": rss_bytes(os.getpid()),
            "socket": str(self.path),
            "uptime_s": round(time.time() - self.started, 1),
        }

    def _op_status(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        with self._cond:
            ready = [
                {
                    "key": w.key,
                    "device": w.device,
                    "interpreter": w.interpreter,
                    "pid": w.proc.pid,
                    "ready_for_s": round(time.time() - w.since, 1),
                    "idle_s": round(time.time() - w.since, 1),
                    "stops_in_s": round(max(0.0, self.worker_idle_s - (time.time() - w.since)), 1),
                    "rss_bytes": rss_bytes(w.proc.pid),
                    "runs": w.runs,
                }
                for ws in self._ready.values()
                for w in ws
                if w.proc.poll() is None
            ]
            starting = [
                {"key": k, "for_s": round(time.time() - t, 1)} for k, t in self._starting.items()
            ]
            handed = [
                {
                    "pid": h.pid,
                    "key": h.key,
                    "device": h.device,
                    "owner_pid": h.owner_pid,
                    "for_s": round(time.time() - h.since, 1),
                    "rss_bytes": rss_bytes(h.pid),
                }
                for h in self._handed.values()
            ]
            waiting = [{"key": k, "device": d} for k, (d, _, _) in self._deferred.items()]
        send_line(
            conn,
            {
                "ok": True,
                **self._identity(),
                "ready": ready,
                "starting": starting,
                "handed": handed,
                "waiting": waiting,
                "idle_s": round(time.monotonic() - self._activity, 1),
            },
        )

    def _op_stop(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        log(f"stop asked by pid {peer}")
        send_line(conn, {"ok": True, "pid": os.getpid()})
        self._stop.set()

    def _op_exit_status(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        pid = req.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise ValueError("exit_status needs an integer pid")
        with self._cond:
            if pid in self._exited:
                answer = {"state": "exited", "returncode": self._exited[pid][0]}
            elif pid in self._handed:
                answer = {"state": "running"}
            else:
                answer = {"state": "unknown"}
        send_line(conn, {"ok": True, "pid": pid, **answer})

    def _key_of(self, req: dict[str, Any]) -> tuple[str, str, bool, dict[str, str]]:
        from fibtui.runners.local import scrubbed_environment

        device = check_device(req.get("device"))
        interpreter = req.get("interpreter")
        if not isinstance(interpreter, bool):
            raise ValueError("interpreter must be true or false")
        env = scrubbed_environment(check_env(req.get("env")))
        return worker_key(device, interpreter, env), device, interpreter, env

    def _op_warm(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        key, device, interpreter, env = self._key_of(req)
        with self._cond:
            self._asked[key] = time.time()
            self._start_locked(key, device, interpreter, env)
            state = (
                "ready"
                if self._alive_ready_locked(key)
                else ("starting" if key in self._starting else "waiting")
            )
        send_line(conn, {"ok": True, "state": state, "key": key})

    def _op_take(self, conn: socket.socket, req: dict[str, Any], peer: int) -> None:
        key, device, interpreter, env = self._key_of(req)
        try:
            wait_s = min(max(float(req.get("wait_s") or 0.0), 0.0), MAX_TAKE_WAIT_S)
        except (TypeError, ValueError):
            raise ValueError("wait_s must be a number") from None
        deadline = time.monotonic() + wait_s
        reply: dict[str, Any] = {}
        with self._cond:
            self._asked[key] = time.time()
            while True:
                w = self._pop_ready_locked(key)
                if w is not None:
                    self._handed[w.proc.pid] = Handed(
                        w.proc.pid, key, device, peer, time.time(), interpreter, w.proc, w.scratch
                    )
                    # the next one's: on a GPU it waits until this one's run is over
                    self._start_locked(key, device, interpreter, env)
                    break
                if key not in self._starting:
                    why = self._failed.pop(key, None)
                    if why is not None:
                        reply = {"ok": False, "state": "failed", "key": key, "error": why}
                        break
                    self._start_locked(key, device, interpreter, env)
                    if key not in self._starting:  # a run measures on this GPU: no start now
                        reply = {"ok": False, "state": "none", "key": key}
                        break
                    continue  # wait for the one just started
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stop.is_set():
                    reply = {"ok": False, "state": "starting", "key": key}
                    break
                self._cond.wait(remaining)
        if w is None:
            send_line(conn, reply)
        else:
            self._hand_over(conn, w, peer)

    def _hand_over(self, conn: socket.socket, w: Ready, peer: int) -> None:
        """Pass the worker's pipes (and a pidfd) to the client, then close this process's copies:
        from now on only the client talks to it. The service stays its parent, to reap it."""
        proc = w.proc
        pidfd: int | None = None
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        fds = [proc.stdin.fileno(), proc.stdout.fileno(), proc.stderr.fileno()]
        reply = HandOver(proc.pid, w.scratch, w.key, w.device, pidfd is not None).to_dict()
        sent = False
        try:
            send_line(conn, reply, fds + ([pidfd] if pidfd is not None else []))
            sent = True
        except OSError as exc:
            log(f"handing worker {proc.pid} to pid {peer} failed ({exc}): it is stopped")
        finally:
            if pidfd is not None:
                os.close(pidfd)
            _close_pipes(proc)
        if sent:
            served = f", {w.runs} run(s) served" if w.runs else ""
            log(f"handed worker {proc.pid} ({w.key}{served}) to pid {peer}")
        else:
            _kill_group(proc)
            shutil.rmtree(w.scratch, ignore_errors=True)
        with self._cond:
            reaped = proc.pid in self._reaping
            self._reaping.add(proc.pid)
        if not reaped:  # a worker handed over again already has its reaper
            threading.Thread(target=self._reap, args=(proc,), daemon=True).start()

    def _op_return(
        self, conn: socket.socket, req: dict[str, Any], peer: int, fds: list[int]
    ) -> None:
        """A run gives back the worker it was handed (see the module's docstring)."""
        try:
            ready = self._take_back(req, peer, fds)
        except ValueError:
            close_fds(fds)
            raise
        with self._cond:
            if ready is not None:
                held = self._ready.setdefault(ready.key, [])
                if not self._stop.is_set():
                    held.insert(0, ready)  # the warmest: first in line
                    # no spare beyond MAX_READY_PER_KEY: the colder ones (a replacement started
                    # when this one was handed over) are stopped
                    surplus = held[MAX_READY_PER_KEY:]
                    del held[MAX_READY_PER_KEY:]
                    for w in surplus:
                        log(f"ready worker {w.proc.pid} ({w.key}) not needed: stopped")
                        threading.Thread(target=self._discard, args=(w,), daemon=True).start()
                    self._deferred.pop(ready.key, None)  # no replacement needed now
                    self._cond.notify_all()
                else:
                    ready, surplus_one = None, ready
                    threading.Thread(target=self._discard, args=(surplus_one,), daemon=True).start()
        send_line(conn, {"ok": ready is not None})

    def _take_back(self, req: dict[str, Any], peer: int, fds: list[int]) -> Ready | None:
        """The worker of a ``return`` made this service's again, or None (it is stopped then);
        ValueError: the request is refused (not that worker's run, not its pipes)."""
        key, device, interpreter, _env = self._key_of(req)
        pid = req.get("pid")
        runs = req.get("runs", 0)
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise ValueError("return needs the worker's integer pid")
        if not isinstance(runs, int) or isinstance(runs, bool) or runs < 0:
            raise ValueError("runs must be a whole number")
        with self._cond:
            handed = self._handed.get(pid)
            if handed is None or handed.proc is None or handed.owner_pid != peer:
                raise ValueError(f"worker {pid} was not handed to pid {peer}")
            if handed.key != key:
                raise ValueError(f"worker {pid} belongs to another key")
        if len(fds) != 3 or not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in fds):
            raise ValueError("return comes with the worker's stdin, stdout and stderr")
        proc = handed.proc
        if proc.poll() is not None:
            close_fds(fds)
            return None
        proc.stdin = os.fdopen(fds[0], "wb")  # the service's ends again
        proc.stdout = os.fdopen(fds[1], "rb")
        proc.stderr = os.fdopen(fds[2], "rb")
        scratch = self._readopt(proc)
        with self._cond:
            self._handed.pop(pid, None)
        if scratch is None:
            log(f"worker {pid} given back by pid {peer} did not answer adopt: stopped")
            _kill_group(proc)
            _close_pipes(proc)
            shutil.rmtree(handed.scratch, ignore_errors=True)
            return None
        log(f"worker {pid} ({key}) given back by pid {peer} after {runs} run(s)")
        return Ready(key, device, interpreter, proc, scratch, time.time(), runs)

    def _readopt(self, proc: subprocess.Popen[bytes]) -> str | None:
        """Make a worker given back this service's own again (``adopt`` with this pid): its
        scratch folder's new path, or None when it does not answer as it should in time."""
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(Adopt(os.getpid()).to_dict()) + "\n").encode())
            proc.stdin.flush()
        except OSError:
            return None
        line = _read_event_line(proc.stdout.fileno(), time.monotonic() + RETURN_ADOPT_TIMEOUT_S)
        try:
            ev = json.loads(line) if line else None
        except ValueError:
            ev = None
        if event_of(ev) != Event.ADOPTED:
            return None
        assert isinstance(ev, dict)
        scratch = ev.get("scratch")
        return scratch if isinstance(scratch, str) else None

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        with self._cond:
            self._reaping.discard(proc.pid)
            in_use = self._handed.pop(proc.pid, None) is not None
            self._exited[proc.pid] = (code, time.monotonic())
            for key, (device, interpreter, env) in list(self._deferred.items()):
                if not self._gpu_busy_locked(device, interpreter):
                    del self._deferred[key]
                    self._start_locked(key, device, interpreter, env)
            self._cond.notify_all()
        if in_use:  # a run's worker ended (its run is over): not a ready one stopped for idling
            self._activity = time.monotonic()
        log(f"worker {proc.pid} ended ({code})")

    # -- workers -----------------------------------------------------------------------------

    def _alive_ready_locked(self, key: str) -> bool:
        return any(w.proc.poll() is None for w in self._ready.get(key, []))

    def _pop_ready_locked(self, key: str) -> Ready | None:
        workers = self._ready.get(key, [])
        while workers:
            w = workers.pop(0)
            if w.proc.poll() is None:
                return w
            threading.Thread(target=self._discard, args=(w,), daemon=True).start()
        return None

    def _gpu_busy_locked(self, device: str, interpreter: bool) -> bool:
        """A worker handed over for this GPU is alive (its run may be measuring)."""
        return not interpreter and any(h.device == device for h in self._handed.values())

    def _start_locked(self, key: str, device: str, interpreter: bool, env: dict[str, str]) -> None:
        """Start a worker for ``key`` unless one is ready or starting (call with the lock held);
        on a GPU a handed-over worker is using, once it has ended (``_reap``)."""
        if self._stop.is_set() or key in self._starting or self._alive_ready_locked(key):
            return
        if self._gpu_busy_locked(device, interpreter):
            self._deferred[key] = (device, interpreter, env)
            return
        self._deferred.pop(key, None)
        self._evict_locked(key)
        self._starting[key] = time.time()
        boot = threading.Thread(
            target=self._boot,
            args=(key, device, interpreter, env),
            daemon=True,
            name="fibtui-service-boot",
        )
        self._boots = [t for t in self._boots if t.is_alive()] + [boot]
        boot.start()

    def _evict_locked(self, key: str) -> None:
        """At most ``max_ready`` workers ready or starting: stop the one asked for longest ago."""
        held = [k for k, ws in self._ready.items() if ws] + list(self._starting)
        while len(held) >= self.max_ready:
            victims = [k for k in self._ready if self._ready[k] and k != key]
            if not victims:
                return
            oldest = min(victims, key=lambda k: self._asked.get(k, 0.0))
            for w in self._ready.pop(oldest):
                threading.Thread(target=self._discard, args=(w,), daemon=True).start()
            held = [k for k, ws in self._ready.items() if ws] + list(self._starting)

    def _boot(self, key: str, device: str, interpreter: bool, env: dict[str, str]) -> None:
        from fibtui.runners.local import SCRATCH_PREFIX

        t0 = time.monotonic()
        scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        # the worker removes its scratch folder itself if this service is killed
        full = {**env, SCRATCH_ENV: scratch, RUNNER_PID_ENV: str(os.getpid())}
        proc: subprocess.Popen[bytes] | None = None
        why: str | None
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "fibtui.worker", "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full,
                cwd=scratch,
                start_new_session=True,
            )
            with self._cond:
                self._booting[key] = (proc, scratch)
                stopping = self._stop.is_set()
            why = (
                "the service is stopping"
                if stopping
                else self._wait_ready(proc, time.monotonic() + START_TIMEOUT_S)
            )
        except OSError as exc:
            why = f"the worker could not be started: {exc}"
        with self._cond:
            self._starting.pop(key, None)
            self._booting.pop(key, None)
            if why is None and proc is not None and not self._stop.is_set():
                self._ready.setdefault(key, []).append(
                    Ready(key, device, interpreter, proc, scratch, time.time())
                )
                self._cond.notify_all()
                log(f"worker {proc.pid} ready for {key} in {time.monotonic() - t0:.2f} s")
                return
            if why is not None:
                self._failed[key] = why
            self._cond.notify_all()
        log(f"worker for {key} not kept: {why or 'the service is stopping'}")
        if proc is not None:
            _kill_group(proc)
            _close_pipes(proc)
        shutil.rmtree(scratch, ignore_errors=True)

    def _wait_ready(self, proc: subprocess.Popen[bytes], deadline: float) -> str | None:
        """None once the worker said ready; else why not. Its stderr meanwhile goes to the log;
        its stdout is read unbuffered, so nothing after the ready line is taken from the client."""
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.fileno(), proc.stderr.fileno()
        watched = [out, err]
        line = b""
        logged = 0
        while time.monotonic() < deadline and not self._stop.is_set():
            readable, _, _ = select.select(watched, [], [], 0.5)
            if err in readable:
                chunk = os.read(err, 65536)
                if not chunk:
                    watched.remove(err)
                elif logged < _STDERR_LOG_CAP:
                    text = chunk[: _STDERR_LOG_CAP - logged].decode("utf-8", "replace").rstrip()
                    logged += len(chunk)
                    log(f"worker {proc.pid} (starting): {text}")
            if out in readable:
                chunk = os.read(out, 65536)
                if not chunk:
                    time.sleep(0.05)
                    return f"the worker ended before it was ready (exit {proc.poll()})"
                line += chunk
                if b"\n" in line:
                    first = line.split(b"\n", 1)[0]
                    try:
                        ev = json.loads(first)
                    except ValueError:
                        ev = None
                    if event_of(ev) == Event.READY:
                        return None
                    return f"the worker said {first[:300].decode('utf-8', 'replace')}"
        return (
            "the service is stopping" if self._stop.is_set() else "the worker did not start in time"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fibtui.runners.service")
    ap.add_argument("--socket", required=True, help="the Unix socket to serve on")
    ap.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="S")
    ap.add_argument("--max-ready", type=int, default=8, metavar="N")
    ap.add_argument("--worker-idle", type=float, default=DEFAULT_WORKER_IDLE_S, metavar="S")
    # tests only: pretend a fact differs (a service of another version)
    ap.add_argument("--test-fact", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.test_fact if "=" in item)
    try:
        service = Service(
            Path(args.socket), args.idle_timeout, args.max_ready, overrides, args.worker_idle
        )
        return service.serve()
    except ServiceRefused as exc:
        log(f"not started: {exc.one_line()}")
        return 2
