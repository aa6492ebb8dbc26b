"""Durable file writes: every write is a temp file in the same folder, fsync, then rename (a
run's lock, which means nothing after a crash, skips the fsync: ``durable=False``).

A reader never sees a half-written file, a failed write (a full disk, say) leaves the old file
as it was, and appends to a journal are one ``write`` of a whole line followed by ``fsync`` (a
failed append is cut back, so the file ends where it ended before). A write the file system
refuses (full disk, quota, read-only, no permission, a file where a folder belongs) is a
:class:`~fibtui.core.errors.WriteFailed`: one line naming the file.

Reading what a user names goes through :func:`read_input`: a path that is not a regular file (a
folder, a FIFO, a socket, a device) is refused before anything reads it, so no reader ever blocks
on a pipe; a UTF-8 byte-order mark at the start of a text file is dropped.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from fibtui.core.errors import WriteFailed

if TYPE_CHECKING:
    from fibtui.core.errors import InputError

BOM = "\ufeff"
BOM_BYTES = BOM.encode("utf-8")


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor (or ``path`` itself) that is not a folder: what stops a folder
    from being made there."""
    for p in (path, *path.parents):
        try:
            st = os.stat(p)
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue  # an ancestor further up is a file: keep climbing
        except OSError:
            return None
        return None if stat.S_ISDIR(st.st_mode) else p
    return None


def _refused(path: str | Path, exc: OSError) -> OSError:
    """``exc`` (any OSError of a write: a full or read-only disk, a quota, no permission, a file
    where a folder belongs...) as a :class:`WriteFailed` naming ``path``, and the file in the way
    when there is one."""
    if isinstance(exc, WriteFailed) or exc.errno is None:
        return exc
    path = Path(path)
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = _blocker(path)
        if blocker is not None:
            return WriteFailed(path, OSError(exc.errno, f"{blocker} is a file, not a folder"))
    return WriteFailed(path, exc)


def make_dirs(path: str | Path) -> Path:
    """``mkdir -p``: a folder that cannot be made (a file in the way, no permission, a read-only or
    full disk) is one :class:`WriteFailed` line naming it."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refused(path, exc) from None
    return path


_FILE_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _not_regular(path: Path, mode: int, folder_message: str) -> InputError:
    from fibtui.core.errors import InputError

    if stat.S_ISDIR(mode):
        return InputError(path, folder_message)
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    return InputError(
        path,
        f"is {kind}, not a regular file; give a file"
        if kind != "not a regular file"
        else "not a regular file; give a file",
    )


def check_input_file(
    path: str | Path, folder_message: str = "is a folder, not a file"
) -> os.stat_result:
    """Refuse, before anything opens it, what is not a regular file: a missing path, a folder, a
    FIFO (opening one blocks until a writer comes), a socket, a device. One InputError naming it."""
    from fibtui.core.errors import InputError

    path = Path(path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(path, "file not found") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, folder_message)
    return st


def read_input(
    path: str | Path,
    *,
    folder_message: str = "is a folder, not a file",
    limit: int | None = None,
    keep_bom: bool = False,
) -> bytes:
    """The bytes of a file a user gave us (the first ``limit`` bytes when given); a missing,
    unreadable, folder or non-regular path (FIFO, socket, device) is one clean InputError naming it,
    never an OSError traceback and never a read that blocks. A UTF-8 byte-order mark at the start
    is dropped (every format read this way is text) unless ``keep_bom``."""
    from fibtui.core.errors import InputError

    path = Path(path)
    check_input_file(path, folder_message)
    try:
        # O_NONBLOCK: should the path have become a FIFO since the check, opening it returns at once
        # (and fstat refuses it) instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, folder_message) from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, folder_message)
        chunks: list[bytes] = []
        left = limit
        while left is None or left > 0:
            chunk = os.read(fd, 1 << 20 if left is None else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        data = b"".join(chunks)
    except IsADirectoryError:
        raise InputError(path, folder_message) from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if not keep_bom and data.startswith(BOM_BYTES):
        data = data[len(BOM_BYTES) :]
    return data


def read_input_text(
    path: str | Path, *, folder_message: str = "is a folder, not a file", errors: str = "strict"
) -> str:
    """The text of a file a user gave us (UTF-8; a leading byte-order mark dropped). With the
    default ``errors="strict"``, bytes that are not UTF-8 are one InputError."""
    from fibtui.core.errors import InputError

    data = read_input(path, folder_message=folder_message)
    try:
        text = data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None
    return text[1:] if text.startswith(BOM) else text


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_via_temp(path: Path, fill: Callable[[BinaryIO], object], durable: bool = True) -> Path:
    """A temp file beside ``path``, filled by ``fill(file object)``, fsynced, renamed over ``path``
    (``durable=False``: no fsync, for files that mean nothing after a crash, a run's lock)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _refused(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise _refused(path, exc) from None
        raise
    if durable:
        _fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes, durable: bool = True) -> Path:
    return _write_via_temp(Path(path), lambda fh: fh.write(data), durable)


def atomic_copy_file(src: str | Path, dest: str | Path) -> Path:
    """Copy ``src`` to ``dest`` through a temp file: ``dest`` appears whole or not at all. A source
    that is not a readable regular file is an InputError naming it (nothing is written)."""
    from fibtui.core.errors import InputError

    check_input_file(src)
    try:
        fsrc = open(src, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InputError(src, f"cannot read: {exc.strerror or exc}") from None
    with fsrc:
        return _write_via_temp(Path(dest), lambda fh: shutil.copyfileobj(fsrc, fh, 1 << 20))


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable)


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


def append_line(path: str | Path, line: str) -> None:
    """Append one line durably: a single write of the whole line, then fsync."""
    if "\n" in line:
        raise ValueError("a journal line must not contain a newline")
    path = Path(path)
    data = (line + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _refused(path, exc) from None
    size = 0
    try:
        # A previous writer killed mid-line leaves a fragment without its newline; start ours on a
        # fresh line so the fragment stays one corrupt line and ours stays whole.
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        try:  # a refused append leaves no fragment behind: the file ends where it ended
            os.ftruncate(fd, size)
        except OSError:
            pass
        raise _refused(path, exc) from None
    finally:
        os.close(fd)


def _split_name(name: str) -> tuple[str, str]:
    """``kernel.tar.gz`` -> (``kernel``, ``.tar.gz``); a dot-less name has no suffix."""
    stem, dot, rest = name.partition(".")
    if not dot or not stem:
        return name, ""
    return stem, "." + rest


def reserve_unique_path(path: str | Path, *, directory: bool = False) -> Path:
    """Claim ``path``, or ``<stem>_run2<suffix>``, ``_run3``...: archiving never overwrites.

    The claim is atomic (``O_EXCL`` for a file, ``mkdir`` for a folder), so two writers racing for
    the same name get two different names. The file is created empty; fill it with
    :func:`atomic_write_bytes` (which replaces it) or copy into the folder.
    """
    path = Path(path)
    make_dirs(path.parent)
    stem, suffix = _split_name(path.name)
    n = 1
    while True:
        candidate = path if n == 1 else path.with_name(f"{stem}_run{n}{suffix}")
        try:
            if directory:
                os.mkdir(candidate)
            else:
                os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return candidate
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise _refused(candidate, exc) from None
