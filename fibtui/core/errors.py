"""Errors a user can cause, each rendered as one line naming the file, the line and the field."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class FibError(Exception):
    """Base of every error fibtui reports to a user as one clean line (never a traceback)."""

    exit_code = 2

    def one_line(self) -> str:
        return " ".join(str(self).split())


@dataclass
class InputError(FibError):
    """Bad input: a file (or a command-line value) that cannot be used as given.

    ``path`` is the file, ``line`` the 1-based line for JSONL/text files, ``field`` a dotted path
    to the offending field (``workload.axes.batch_size``).
    """

    path: str | Path | None
    message: str
    line: int | None = None
    field: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = str(self.path) if self.path is not None else "<input>"
        if self.line is not None:
            where += f":{self.line}"
        field = f" field '{self.field}':" if self.field else ""
        return f"{where}:{field} {self.message}"


class UsageError(FibError):
    """The command line or the session state does not allow the action."""


class WriteFailed(FibError, OSError):
    """A write the file system refused (a full disk, a quota, a read-only mount, no permission, a
    file where a folder belongs): one line naming the path (``cannot write X: Y is a file, not a
    folder``). Existing files are left as they were (the writers in fibtui.core.fsio guarantee it).
    Exit code 1: the input was fine, the step could not be done here. Still an OSError, so code
    that handles OSError handles it too."""

    exit_code = 1

    def __init__(self, path: str | Path, cause: OSError, hint: str = "") -> None:
        OSError.__init__(self, cause.errno, cause.strerror or str(cause), str(path))
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.strerror} (nothing there was changed){self.hint}"


class CheckFailed(FibError):
    """A check ran and found problems (exit 1, not 2)."""

    exit_code = 1
