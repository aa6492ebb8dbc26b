"""Who killed the worker: a signal from outside (SIGKILL, as the OOM killer sends it, or SIGTERM)
is not the kernel's doing.

A worker that dies of one mid-job is an infrastructure failure of that job: the runner retries it
once in a fresh worker. Only when the retry dies the same way is it the kernel's RUNTIME_ERROR,
said as "killed, likely out of memory" with what is known of the memory: the worker's peak
resident memory as last seen (``/proc/<pid>/status`` VmHWM, sampled while the job ran) and the
cgroup's memory limit, peak and OOM kills where readable (cgroup v2 ``memory.events``,
``memory.peak``, ``memory.max``; v1 ``memory.oom_control``, ``memory.max_usage_in_bytes``,
``memory.limit_in_bytes``).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

#: the signals a worker never raises on itself when a kernel fails (a crash is SIGSEGV, SIGBUS,
#: SIGABRT, SIGFPE...): these come from outside
OUTSIDE_SIGNALS = (signal.SIGKILL, signal.SIGTERM)

_CGROUP_ROOT = Path("/sys/fs/cgroup")
#: limits above this are "no limit" (cgroup v1 says 2**63 rounded down to a page)
_NO_LIMIT = 2**60


def killed_from_outside(returncode: int | None) -> bool:
    return returncode is not None and returncode < 0 and -returncode in OUTSIDE_SIGNALS


def peak_rss_bytes(pid: int) -> int | None:
    """The process's peak resident memory (VmHWM), None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass
class CgroupMemory:
    oom_kills: int | None = None
    peak_bytes: int | None = None
    limit_bytes: int | None = None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _NO_LIMIT else value


def _keyed(path: Path, key: str) -> int | None:
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    except (OSError, ValueError):
        return None
    return None


def _own_cgroup_folders() -> list[Path]:
    """This process's memory cgroup folders, most specific first (the root of the mount last:
    inside a container the path in /proc/self/cgroup may not exist, the mount is the group)."""
    out: list[Path] = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        rel = rel.lstrip("/")
        if controllers == "":  # v2
            out.append(_CGROUP_ROOT / rel)
            out.append(_CGROUP_ROOT / "unified" / rel)
        elif "memory" in controllers.split(","):
            out.append(_CGROUP_ROOT / "memory" / rel)
    out += [_CGROUP_ROOT, _CGROUP_ROOT / "memory"]
    return [p for p in dict.fromkeys(out) if p.is_dir()]


def cgroup_memory() -> CgroupMemory:
    """What the cgroup says of its memory, as far as it can be read (None fields otherwise)."""
    for folder in _own_cgroup_folders():
        if (folder / "memory.events").is_file():
            return CgroupMemory(
                _keyed(folder / "memory.events", "oom_kill"),
                _read_int(folder / "memory.peak"),
                _read_int(folder / "memory.max"),
            )
        if (folder / "memory.oom_control").is_file():
            return CgroupMemory(
                _keyed(folder / "memory.oom_control", "oom_kill"),
                _read_int(folder / "memory.max_usage_in_bytes"),
                _read_int(folder / "memory.limit_in_bytes"),
            )
    return CgroupMemory()


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def memory_words(
    peak_rss: int | None, before: CgroupMemory | None, after: CgroupMemory | None
) -> str:
    """What is known of the memory when a worker was killed, in words ("" when nothing is)."""
    said: list[str] = []
    if peak_rss:
        said.append(f"the worker's peak resident memory was {_mib(peak_rss)}")
    if after is not None:
        if after.oom_kills is not None and before is not None and before.oom_kills is not None:
            n = after.oom_kills - before.oom_kills
            if n > 0:
                said.append(f"the cgroup's OOM killer ran {n} time(s) during the run")
        if after.limit_bytes:
            peak = f", peak {_mib(after.peak_bytes)}" if after.peak_bytes else ""
            said.append(f"the cgroup's limit is {_mib(after.limit_bytes)}{peak}")
    return "; ".join(said)


def describe_kill(
    how: str,
    peak_rss: int | None,
    before: CgroupMemory | None,
    after: CgroupMemory | None,
    *,
    twice: bool,
) -> str:
    """The error of a job whose worker was killed from outside (``how``: "killed by SIGKILL")."""
    memory = memory_words(peak_rss, before, after)
    if twice:
        return (
            f"the worker was {how} during the job, and again in a fresh worker: killed, likely out "
            f"of memory" + (f" ({memory})" if memory else "")
        )
    return f"the worker was {how} during the job (not the kernel's doing)" + (
        f" ({memory})" if memory else ""
    )
