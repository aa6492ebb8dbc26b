"""The errors of Nsight Compute's ``ncu`` executable. They are raised where ncu runs
(:mod:`fibtui.runners.ncu`) and live here so that callers of the core catch them by name."""

from __future__ import annotations

from fibtui.core.errors import FibError, UsageError


class NcuNotFound(UsageError):
    """``ncu`` is needed (profiling, or reading a binary ``.ncu-rep``) and is not on the PATH."""


class NcuFailed(FibError):
    """``ncu`` ran and failed (a non-zero exit, or no report written)."""


class NcuTimeout(FibError):
    """``ncu`` did not finish within its timeout (it was stopped)."""
