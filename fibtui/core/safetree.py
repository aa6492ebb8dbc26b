"""The one reader of a solution, candidate or dataset folder: what the folder holds, nothing else.

Every place that takes a folder's files (a run's snapshot, ``fibtui pack``, a plain folder given
to ``--solution``) lists them with :func:`list_files`:

- the walk never leaves the folder: a symbolic link is not followed. A link to a file of the same
  folder is kept (read under the link's own name, as the file it points at); any other link (to a
  file outside, to a folder, a dangling one) is refused in one line naming the link and its target;
- at most :data:`MAX_FILES` files and :data:`MAX_BYTES` bytes in all are taken, and reaching either
  limit is said in one line (the folder is not a solution folder, or holds a build tree);
- a file that cannot be read is one line naming it, never a traceback.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fibtui.core.errors import InputError

#: the most files one solution folder may hold (what a snapshot and ``pack`` take)
MAX_FILES = 2000
#: the most bytes the files of one solution folder may hold together
MAX_BYTES = 8 * 2**20


@dataclass(frozen=True)
class TreeFile:
    rel: str  # posix path relative to the folder (the link's own name for a kept link)
    path: Path  # the file to read (a kept link's target)
    size: int


def _outside(target: Path, root: Path) -> bool:
    try:
        target.relative_to(root)
    except ValueError:
        return True
    return False


def link_problem(link: Path, root: Path) -> str | None:
    """None when ``link`` (a symbolic link under ``root``) points at a file of ``root`` itself;
    else the one-line reason it is refused."""
    try:
        shown = os.readlink(link)
    except OSError:
        shown = "?"
    target = Path(os.path.realpath(link))
    if _outside(target, root):
        return f"is a symbolic link to {shown} (outside the folder): links are not followed; copy the file in"
    if target.is_dir():
        return f"is a symbolic link to the folder {shown}: links to folders are not followed"
    if not target.is_file():
        return f"is a symbolic link to {shown}, which is not a file here"
    return None


def list_files(
    folder: str | Path,
    *,
    skip_dir: Callable[[str], bool] = lambda name: False,
    skip_file: Callable[[str], bool] = lambda name: False,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
    what: str = "solution folder",
    excluded: list[str] | None = None,
) -> list[TreeFile]:
    """The files under ``folder``, sorted by relative path, without following a link out of it.

    ``skip_dir``/``skip_file`` take a name and leave that folder or file out (``excluded``, when
    given, receives their relative paths, folders with a trailing ``/``)."""
    root_given = Path(folder)
    root = Path(os.path.realpath(root_given))
    if not root.is_dir():
        raise InputError(root_given, f"not a folder ({what})")
    out: list[TreeFile] = []
    total = 0
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        here, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as exc:
            raise InputError(root_given / prefix, f"cannot list: {exc.strerror or exc}") from None
        subdirs: list[tuple[Path, str]] = []
        for e in entries:
            rel = f"{prefix}{e.name}"
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as exc:
                raise InputError(root_given / rel, f"cannot read: {exc.strerror or exc}") from None
            if stat.S_ISDIR(st.st_mode):
                if skip_dir(e.name):
                    if excluded is not None:
                        excluded.append(rel + "/")
                    continue
                subdirs.append((Path(e.path), rel + "/"))
                continue
            if skip_file(e.name):
                if excluded is not None:
                    excluded.append(rel)
                continue
            path = Path(e.path)
            if stat.S_ISLNK(st.st_mode):
                problem = link_problem(path, root)
                if problem is not None:
                    raise InputError(root_given / rel, problem)
                path = Path(os.path.realpath(path))
                size = path.stat().st_size
            elif stat.S_ISREG(st.st_mode):
                size = st.st_size
            else:
                raise InputError(
                    root_given / rel, "is not a regular file (a device, a pipe or a socket)"
                )
            if len(out) >= max_files:
                raise InputError(
                    root_given,
                    f"holds more than {max_files} files: the limit of a {what} "
                    "(is this the right folder? a build tree inside it?)",
                )
            total += size
            if total > max_bytes:
                raise InputError(
                    root_given,
                    f"files exceed {max_bytes // 2**20} MiB together: the limit of a {what} "
                    f"(reached at {rel})",
                )
            out.append(TreeFile(rel, path, size))
        stack.extend(reversed(subdirs))
    out.sort(key=lambda f: f.rel)
    return out


def read_text(f: TreeFile, shown: Path | None = None) -> str:
    """The file's text (UTF-8, bytes kept as they are); one line when it is not text or unreadable."""
    where = shown or f.path
    try:
        data = f.path.read_bytes()
    except OSError as exc:
        raise InputError(where, f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(
            where,
            "not UTF-8 text (sources are taken as text; move binaries out of the source folder)",
        ) from None


def check_links(folder: str | Path, paths: list[Path]) -> None:
    """Refuse any of ``paths`` (found under ``folder`` by a listing of its own, a dataset's rglob)
    that is a link leading out of ``folder``."""
    root = Path(os.path.realpath(folder))
    for p in paths:
        if p.is_symlink():
            problem = link_problem(p, root)
            if problem is not None:
                raise InputError(p, problem)
