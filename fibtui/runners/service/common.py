"""What the worker service and its clients share: the socket's place and its permission checks,
the facts that must match between them, the key of a worker, and the wire format (one JSON line
per request and per reply; a handed-over worker's pipes ride along a reply as SCM_RIGHTS).

Standard library only (and :mod:`fibtui.core.errors`), so the service starts fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from fibtui.core.errors import UsageError
from fibtui.worker.wire import PROTOCOL as PROTOCOL
from fibtui.worker.wire import SERVICE_OPS

#: the protocol and the requests a service answers (anything else is refused): fibtui.worker.wire
OPS = SERVICE_OPS
#: the longest request line (bytes) a service reads; a longer one is refused
MAX_LINE = 1 << 20
#: how long a service waits for a request line once a client connected
READ_TIMEOUT_S = 10.0
#: how long an idle service (no request, no handed-over worker alive) lives (``[workers]
#: idle_timeout_s`` in fibtui.toml, ``FIBTUI_WORKERS_IDLE_S``)
DEFAULT_IDLE_TIMEOUT_S = 600.0
#: how long a ready worker nobody takes is kept before it is stopped (``[workers] worker_idle_s``
#: in fibtui.toml, ``FIBTUI_WORKERS_WORKER_IDLE_S``): an interpreter worker holds about 350 MB
DEFAULT_WORKER_IDLE_S = 120.0
#: the longest path a Unix socket may have (sun_path holds 108 bytes with its NUL)
_MAX_SOCKET_PATH = 100
#: environment variables that differ between two shells of one user without changing what a
#: worker does: left out of a worker's key (a ready worker keeps the values of the client that
#: asked for it first)
VOLATILE_ENV = frozenset(
    {
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TERM",
        "COLUMNS",
        "LINES",
        "COLORTERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "TERM_SESSION_ID",
        "WINDOWID",
        "TMUX",
        "TMUX_PANE",
        "STY",
        "WINDOW",
        "KITTY_WINDOW_ID",
        "ITERM_SESSION_ID",
        "VTE_VERSION",
        "LC_TERMINAL",
        "LC_TERMINAL_VERSION",
        "SSH_CLIENT",
        "SSH_CONNECTION",
        "SSH_TTY",
        "SSH_AUTH_SOCK",
        # polars appends its allocator settings to this at import: a process started by one that
        # imported polars has them twice (the worker imports no polars)
        "_RJEM_MALLOC_CONF",
    }
)
#: display variables: how a terminal, a pager or colours are set up, which a worker (it prints
#: nothing to a terminal) never reads. Never part of a worker's key, so ``NO_COLOR=1 fibtui run``
#: or ``FIBTUI_FORCE_TERMINAL=1`` takes the worker a plain ``fibtui run`` left ready
DISPLAY_ENV = frozenset(
    {
        "FIBTUI_FORCE_TERMINAL",
        "NO_COLOR",
        "FORCE_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
        "COLORFGBG",
        "TERMINFO",
        "TERMINFO_DIRS",
        "TERMCAP",
        "TTY_COMPATIBLE",
        "TTY_INTERACTIVE",
        "JUPYTER_COLUMNS",
        "JUPYTER_LINES",
        "LS_COLORS",
        "GREP_COLOR",
        "GREP_COLORS",
        "PAGER",
        "LESS",
        "LESSOPEN",
        "LESSCLOSE",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "PS1",
        "PS2",
        "PROMPT_COMMAND",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "GPG_TTY",
        "HISTFILE",
        "HISTSIZE",
        "HISTCONTROL",
        "MAIL",
    }
)
#: name prefixes of display and session variables (as :data:`DISPLAY_ENV`)
DISPLAY_ENV_PREFIXES = ("TEXTUAL_", "XDG_SESSION_", "TERM_", "KONSOLE_", "GNOME_TERMINAL_")
#: a pool slot: the interpreter's ``cpu``, or ``cuda:`` and a CUDA_VISIBLE_DEVICES entry (an
#: index, a GPU UUID, a MIG id such as ``MIG-GPU-<uuid>/1/0``)
_DEVICE = re.compile(r"^(cpu|cuda:[A-Za-z0-9:_./-]{1,120})$")


class ServiceRefused(UsageError):
    """The service's folder or socket is not safe to use (owned by another user, open to others)."""


class LineTooLong(ValueError):
    pass


class ServiceAbsent(Exception):
    """No service folder yet, so no service: ``path`` is where its socket would be."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


# -- where -----------------------------------------------------------------------------------


def runtime_folder() -> Path:
    """:func:`fibtui.core.locations.workers_socket_dir`."""
    from fibtui.core.locations import workers_socket_dir

    return workers_socket_dir()


def check_folder(folder: Path) -> None:
    """Refuse (one line) a folder that is a link, not a folder, not this user's, or open to the
    group or others: another user could then plant or reach the socket."""
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise ServiceRefused(f"worker service folder {folder}: {exc.strerror}") from None
    elsewhere = "or set XDG_RUNTIME_DIR to a folder of yours"
    if not stat.S_ISDIR(st.st_mode):
        raise ServiceRefused(
            f"worker service folder {folder} is not a folder (or is a link): not used "
            f"(fix: remove it, {elsewhere})"
        )
    if st.st_uid != os.getuid():
        raise ServiceRefused(
            f"worker service folder {folder} belongs to uid {st.st_uid}, not to you "
            f"(uid {os.getuid()}): not used (fix: {elsewhere})"
        )
    if st.st_mode & 0o077:
        raise ServiceRefused(
            f"worker service folder {folder} has mode {stat.S_IMODE(st.st_mode):04o}: "
            f"others may reach it (it must be 0700): not used (fix: chmod 700 {folder})"
        )


def service_folder(create: bool = True) -> Path:
    """The checked runtime folder (made with mode 0700 when absent)."""
    folder = runtime_folder()
    if create:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise ServiceRefused(
                f"worker service folder {folder}: cannot create it: {exc.strerror}"
            ) from None
    check_folder(folder)
    return folder


def package_root() -> Path:
    """The folder holding the ``fibtui`` package this process imports."""
    return Path(__file__).resolve().parents[3]


def install_id() -> str:
    """One service per Python and fibtui installation: two checkouts never stop each other's."""
    blob = f"{sys.executable}\0{package_root()}".encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def socket_path(folder: Path | None = None, create: bool = True) -> Path:
    """This installation's socket, in ``folder`` or the checked runtime folder (``create``:
    make that folder when it is absent; without, a missing folder is ServiceAbsent)."""
    if folder is None:
        folder = runtime_folder()
        if not create and not os.path.lexists(folder):
            raise ServiceAbsent(folder / f"workers-{install_id()}.sock")
        folder = service_folder(create)
    path = folder / f"workers-{install_id()}.sock"
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        raise ServiceRefused(
            f"worker service socket {path} is longer than a Unix socket path may be "
            f"({_MAX_SOCKET_PATH} bytes): set XDG_RUNTIME_DIR to a shorter folder"
        )
    return path


def log_path(sock: Path) -> Path:
    return sock.with_suffix(".log")


def lock_path(sock: Path) -> Path:
    return sock.with_suffix(".lock")


# -- facts -----------------------------------------------------------------------------------


def sources_digest(root: Path | None = None) -> str:
    """A digest of the installed fibtui sources (each .py file's path, size and mtime)."""
    base = (root or package_root()) / "fibtui"
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    continue
                rel = os.path.relpath(os.path.join(folder, name), base)
                h.update(f"{rel}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def gpu_set() -> list[str]:
    """The driver and the GPUs it sees, from /proc (no nvidia-smi, no CUDA): empty without one."""
    base = Path("/proc/driver/nvidia")
    out: list[str] = []
    try:
        out.append("driver " + (base / "version").read_text().splitlines()[0].strip())
    except (OSError, IndexError):
        return sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*"))
    for info in sorted((base / "gpus").glob("*/information")):
        try:
            lines = info.read_text(errors="replace").splitlines()
        except OSError:
            continue
        keep = [ln.strip() for ln in lines if ln.startswith(("Model:", "GPU UUID:"))]
        out.append(f"{info.parent.name} " + " ".join(keep))
    return out


def facts() -> dict[str, Any]:
    """What a service and its client must share; a client restarts a service whose facts differ
    (fibtui upgraded or edited, another torch or triton, a GPU added or a driver changed)."""
    from fibtui import __version__

    return {
        "protocol": PROTOCOL,
        "fibtui": __version__,
        "sources": sources_digest(),
        "python": sys.executable,
        "torch": _dist_version("torch"),
        "triton": _dist_version("triton"),
        "gpus": gpu_set(),
    }


# -- keys ------------------------------------------------------------------------------------


def check_device(device: Any) -> str:
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValueError(f"bad device {str(device)[:40]!r}")
    return device


def check_env(env: Any) -> dict[str, str]:
    if not isinstance(env, dict):
        raise ValueError("env must be an object of strings")
    for k, v in env.items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or "=" in k:
            raise ValueError("env must be an object of strings")
        if "\0" in k or "\0" in v:
            raise ValueError("env holds a NUL character")
    return env


def keyed_env(env: dict[str, str]) -> dict[str, str]:
    """What of an environment can change what a worker does (and so is part of its key): all
    of it but the volatile shell variables and the display ones (:data:`VOLATILE_ENV`,
    :data:`DISPLAY_ENV`, :data:`DISPLAY_ENV_PREFIXES`)."""
    return {
        k: v
        for k, v in env.items()
        if k not in VOLATILE_ENV and k not in DISPLAY_ENV and not k.startswith(DISPLAY_ENV_PREFIXES)
    }


def worker_key(device: str, interpreter: bool, env: dict[str, str]) -> str:
    """A worker's key: the backend (interpreter or GPU), the pool slot (``cpu`` or ``cuda:N``),
    this service's Python (one service per Python and fibtui: :func:`install_id`) and a digest of
    the environment that can change a solution's results (:func:`keyed_env`)."""
    stable = sorted(keyed_env(env).items())
    digest = hashlib.sha256(
        json.dumps([device, interpreter, sys.executable, stable]).encode()
    ).hexdigest()
    return f"{'interpreter' if interpreter else 'gpu'}|{device}|{digest[:16]}"


# -- the wire --------------------------------------------------------------------------------


def close_fds(fds: list[int]) -> None:
    """Close descriptors that came with a message (ones already closed are let be)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def send_line(sock: socket.socket, obj: dict[str, Any], fds: list[int] | None = None) -> None:
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    if data:
        sock.sendall(data)


def read_line(
    sock: socket.socket, limit: int = MAX_LINE, maxfds: int = 0
) -> tuple[bytes, list[int]]:
    """One line (without its newline; what came before EOF when there is no newline) and the file
    descriptors that came with it (close-on-exec). ``LineTooLong`` past ``limit`` bytes."""
    buf = bytearray()
    fds: list[int] = []
    while b"\n" not in buf:
        if maxfds:
            data, got, _flags, _addr = socket.recv_fds(
                sock, 65536, maxfds, getattr(socket, "MSG_CMSG_CLOEXEC", 0)
            )
            fds.extend(got)
        else:
            data = sock.recv(65536)
        if not data:
            break
        buf += data
        if len(buf) > limit and b"\n" not in buf[: limit + 1]:
            for fd in fds:
                os.close(fd)
            raise LineTooLong(f"a request line longer than {limit} bytes")
    return bytes(buf.split(b"\n", 1)[0]), fds


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    import struct

    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return pid, uid, gid
