"""A job's side effects, bounded (standard library only: the worker imports it).

While a job runs, what the kernel prints on file descriptors 1 and 2 (from Python, from C, from a
child it starts) goes to a scratch file outside the run folder. When the job ends:

- the processes the kernel started that are still there are ended (SIGKILL, their own process
  groups too) and reaped; the worker is a child subreaper (Linux), so a grandchild whose parent
  exited is found as well. Each is reported in the row (``side_effects.leftover_processes``);
- of the output, the first and last :data:`CAP` bytes are kept with the total byte count: in the
  row (``side_effects.output_head`` / ``output_tail`` / ``output_bytes``) and, the same cut, in the
  worker's log in the run folder. The scratch file is removed.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

#: bytes of a job's output kept from its start, and as many from its end
CAP = 64 * 1024
#: the longest command line reported for a leftover process
COMMAND_CHARS = 200
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphans of this process's descendants become its children (Linux; False elsewhere)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process this one can see."""
    out: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                rest = fh.read().rsplit(b")", 1)[1].split()
            out[int(name)] = (int(rest[1]), rest[0].decode("ascii", "replace"))
        except (OSError, IndexError, ValueError):
            continue
    return out


def descendants(pid: int | None = None) -> set[int]:
    """Every live process below ``pid`` (default: this one)."""
    root = os.getpid() if pid is None else pid
    table = _parents()
    children: dict[int, list[int]] = {}
    for p, (ppid, _state) in table.items():
        children.setdefault(ppid, []).append(p)
    out: set[int] = set()
    stack = [root]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text[:COMMAND_CHARS] or "?"


def end_leftovers(before: set[int]) -> list[dict[str, Any]]:
    """End the processes below this one that were not there before the job; what they were."""
    me = os.getpid()
    my_group = os.getpgrp()
    found = sorted(descendants() - before)
    report = []
    for pid in found:
        report.append({"pid": pid, "command": _command(pid)})
    for pid in found:
        try:
            group = os.getpgid(pid)
            if group != my_group and group == pid:
                os.killpg(group, signal.SIGKILL)  # a child that made a group of its own
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    # reap them: each is this worker's child by now (directly, or as the subreaper)
    deadline = time.monotonic() + 2.0
    left = set(found)
    while left and time.monotonic() < deadline:
        table = _parents()
        for pid in list(left):
            entry = table.get(pid)
            if entry is None:
                left.discard(pid)
                continue
            if entry[0] == me:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        left.discard(pid)
                except ChildProcessError:
                    left.discard(pid)
        if left:
            time.sleep(0.01)
    return report


class JobCapture:
    """``with JobCapture(folder) as cap: run the job``; then ``cap.report()``."""

    def __init__(self, folder: str) -> None:
        self.path = os.path.join(folder, f"job-output-{os.getpid()}-{time.monotonic_ns()}")
        self.bytes = 0
        self.head = b""
        self.tail = b""
        self.leftovers: list[dict[str, Any]] = []
        self._fd = -1
        self._saved: tuple[int, int] = (-1, -1)
        self._before: set[int] = set()

    def __enter__(self) -> JobCapture:
        self._before = descendants()
        _flush()
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            self._saved = (os.dup(1), os.dup(2))
            os.dup2(self._fd, 1)
            os.dup2(self._fd, 2)
        except OSError:
            self._close()
        return self

    def __exit__(self, *exc: Any) -> None:
        _flush()
        if self._saved[0] >= 0:
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
        # children end before the output is read: nothing writes to it any more
        self.leftovers = end_leftovers(self._before)
        if self._fd >= 0:
            try:
                self.bytes = os.fstat(self._fd).st_size
                self.head = os.pread(self._fd, CAP, 0)
                if self.bytes > CAP:
                    start = max(CAP, self.bytes - CAP)
                    self.tail = os.pread(self._fd, self.bytes - start, start)
            except OSError:
                pass
        self._close()
        self._log()

    def _close(self) -> None:
        for fd in (self._fd, *self._saved):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd, self._saved = -1, (-1, -1)
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _log(self) -> None:
        """The same cut of the output in the worker's log (its stderr), and the leftovers."""
        parts = [self.head]
        left_out = self.bytes - len(self.head) - len(self.tail)
        if left_out > 0:
            parts.append(
                f"\nfibtui: {left_out} bytes of this job's output left out "
                f"({self.bytes} in all; the first and last {CAP // 1024} KiB are kept)\n".encode()
            )
        parts.append(self.tail)
        for p in self.leftovers:
            parts.append(
                f"\nfibtui: ended process {p['pid']} the kernel left running: {p['command']}\n".encode()
            )
        data = b"".join(parts)
        if data:
            try:
                os.write(2, data)
            except OSError:
                pass

    def report(self) -> dict[str, Any] | None:
        """The row's ``side_effects``, or None when the job printed nothing and left nothing."""
        if not self.bytes and not self.leftovers:
            return None
        out: dict[str, Any] = {"output_bytes": self.bytes}
        if self.bytes:
            out["output_head"] = self.head.decode("utf-8", "replace")
            out["output_tail"] = self.tail.decode("utf-8", "replace") if self.tail else None
            out["output_truncated"] = self.bytes > len(self.head) + len(self.tail)
        if self.leftovers:
            out["leftover_processes"] = self.leftovers
        return out


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
