"""Durable file writes: every write is a temp file in the same folder, fsync, then rename.

A reader never sees a half-written file, a failed write (a full disk, say) leaves the old file
as it was, and appends to a journal are one ``write`` of a whole line followed by ``fsync`` (a
failed append is cut back, so the file ends where it ended before). A write the file system
refuses (full disk, quota, read-only) is a :class:`~fibtui.core.errors.WriteFailed`: one line
naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fibtui.core.errors import WriteFailed

#: errors that mean "the file system will not take this write" (not a bug, not bad input)
_REFUSED = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _refused(path: str | Path, exc: OSError) -> OSError:
    return WriteFailed(path, exc) if exc.errno in _REFUSED and not isinstance(exc, WriteFailed) else exc


def read_input(path: str | Path) -> bytes:
    """The bytes of a file a user gave us; a missing, unreadable or folder path is one clean
    InputError naming it (never an OSError traceback)."""
    from fibtui.core.errors import InputError

    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a folder, not a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None


def read_input_text(path: str | Path) -> str:
    from fibtui.core.errors import InputError

    try:
        return read_input(path).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text") from None


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


def _write_via_temp(path: Path, fill) -> Path:
    """A temp file beside ``path``, filled by ``fill(file object)``, fsynced, renamed over ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _refused(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
            fh.flush()
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
    _fsync_dir(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return _write_via_temp(Path(path), lambda fh: fh.write(data))


def atomic_copy_file(src: str | Path, dest: str | Path) -> Path:
    """Copy ``src`` to ``dest`` through a temp file: ``dest`` appears whole or not at all."""
    with open(src, "rb") as fsrc:
        return _write_via_temp(Path(dest), lambda fh: shutil.copyfileobj(fsrc, fh, 1 << 20))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refused(path.parent, exc) from None
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
