"""Everything that runs Nsight Compute's ``ncu``: profiling a program, exporting the pages of a
binary report, and reading a ``.ncu-rep`` through those pages (:func:`load_report`, which hands
:func:`fibtui.core.ncu.load_report` an exporter; the core itself runs no program).

:func:`build_ncu_command` is pure (tested without ncu); :func:`profile` runs it with a timeout
(list arguments, never a shell; the whole process group is stopped on timeout), then writes, next
to ``X.ncu-rep``: ``X_details.csv`` and ``X_raw.csv`` (the details and raw pages as CSV),
``X_details.txt`` (the details text page) and ``X_ncu.log`` (what ncu printed while profiling).

The profiled program is an argv list; for a workload of the workspace's solution it is the
worker's profile entry point (:func:`worker_profile_argv`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fibtui.core import ncu as core_ncu
from fibtui.core.errors import UsageError
from fibtui.core.fsio import atomic_write_text, make_dirs
from fibtui.core.ncu import NcuFailed, NcuNotFound, NcuReport, NcuTimeout

SETS = ("basic", "detailed", "full")
DEFAULT_SET = "detailed"
DEFAULT_CLOCK_CONTROL = (
    "none"  # shared machines: leave the clocks alone (ncu's own default locks them)
)
DEFAULT_LAUNCH_SKIP = 0
DEFAULT_LAUNCH_COUNT = 1
DEFAULT_TIMEOUT_S = 600.0


def find_ncu(ncu: str | None = None) -> str:
    """The ncu executable: ``ncu`` given as a path or name, else ``ncu`` on the PATH."""
    found = shutil.which(ncu or "ncu")
    if found is None:
        raise NcuNotFound(
            f"Nsight Compute's {ncu or 'ncu'!r} is not on the PATH; install Nsight Compute (or add "
            "its folder to PATH), or export the report elsewhere with "
            "'ncu --import X.ncu-rep --csv --page details > X_details.csv'"
        )
    return found


def export_page(
    rep: str | Path,
    page: str,
    *,
    csv_format: bool = True,
    ncu: str | None = None,
    timeout_s: float = 300.0,
) -> str:
    """``ncu --import REP [--csv] --page PAGE`` and its standard output (list args, no shell)."""
    exe = find_ncu(ncu)
    cmd = [exe, "--import", str(rep)]
    if csv_format:
        cmd.append("--csv")
    cmd += ["--page", page]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            errors="replace",  # noqa: S603
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise NcuTimeout(
            f"'ncu --import {rep} --page {page}' did not finish within {timeout_s:g} s"
        ) from None
    except OSError as exc:
        raise NcuFailed(f"cannot run {exe}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise NcuFailed(
            f"'ncu --import {rep} --page {page}' exited with {proc.returncode}: {tail or 'no output'}"
        )
    return proc.stdout


def load_report(path: str | Path, *, ncu: str | None = None, timeout_s: float = 300.0) -> NcuReport:
    """:func:`fibtui.core.ncu.load_report`, a binary ``.ncu-rep`` read through ``ncu --import``
    (its details and raw CSV pages); any other file needs no ncu."""

    def export(rep: Path, page: str, as_csv: bool) -> str:
        return export_page(rep, page, csv_format=as_csv, ncu=ncu, timeout_s=timeout_s)

    return core_ncu.load_report(path, export=export)


def build_ncu_command(
    profiled_argv: Sequence[str],
    export: str | Path,
    *,
    kernel_regex: str | None = None,
    launch_skip: int = DEFAULT_LAUNCH_SKIP,
    launch_count: int | None = DEFAULT_LAUNCH_COUNT,
    section_set: str = DEFAULT_SET,
    clock_control: str = DEFAULT_CLOCK_CONTROL,
    target_processes: str = "all",
    ncu: str = "ncu",
    profile_from_start: bool = True,
) -> list[str]:
    """The ncu command line (a list; nothing runs here)."""
    if not profiled_argv or any(not isinstance(a, str) for a in profiled_argv):
        raise UsageError("the profiled program must be a non-empty list of strings")
    if section_set not in SETS:
        raise UsageError(f"unknown NCU set {section_set!r}; choose one of {', '.join(SETS)}")
    if not isinstance(launch_skip, int) or launch_skip < 0:
        raise UsageError(f"--launch-skip must be a whole number >= 0, not {launch_skip!r}")
    if launch_count is not None and (not isinstance(launch_count, int) or launch_count < 1):
        raise UsageError(f"--launch-count must be a whole number >= 1, not {launch_count!r}")
    if not re.fullmatch(r"[A-Za-z0-9_]+", clock_control or ""):
        raise UsageError(
            f"--clock-control takes a word such as none or base, not {clock_control!r}"
        )
    cmd = [ncu]
    if not profile_from_start:
        # only the program's cudaProfilerStart/Stop ranges: warm-up launches are never profiled
        cmd += ["--profile-from-start", "off"]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    cmd += ["--launch-skip", str(launch_skip)]
    if launch_count is not None:
        cmd += ["--launch-count", str(launch_count)]
    cmd += [
        "--set",
        section_set,
        "--clock-control",
        clock_control,
        "--target-processes",
        target_processes,
        "--export",
        str(export),
        "--force-overwrite",
    ]
    return cmd + list(profiled_argv)


@dataclass
class ProfileResult:
    report: Path  # X.ncu-rep
    details_csv: Path
    raw_csv: Path
    details_txt: Path
    log: Path
    command: list[str]

    def to_json(self) -> dict[str, str | list[str]]:
        return {
            "report": str(self.report),
            "details_csv": str(self.details_csv),
            "raw_csv": str(self.raw_csv),
            "details_txt": str(self.details_txt),
            "log": str(self.log),
            "command": self.command,
        }


def sibling_paths(report: str | Path) -> dict[str, Path]:
    """``X.ncu-rep`` -> the paths of its exported pages and log."""
    rep = Path(report)
    stem = rep.name[: -len(".ncu-rep")] if rep.name.endswith(".ncu-rep") else rep.name
    return {
        name: rep.with_name(f"{stem}{suffix}")
        for name, suffix in (
            ("details_csv", "_details.csv"),
            ("raw_csv", "_raw.csv"),
            ("details_txt", "_details.txt"),
            ("log", "_ncu.log"),
        )
    }


def _run(
    cmd: list[str], timeout_s: float, env: dict[str, str] | None, cwd: str | Path | None
) -> tuple[int, str]:
    """Run in its own process group; on timeout stop that whole group (ncu forks the target)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,  # noqa: S603
        errors="replace",
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise NcuTimeout(
            f"ncu did not finish within {timeout_s:g} s and was stopped (raise --timeout, "
            "filter with --kernel, or use a smaller --set)"
        ) from None
    return proc.returncode, out or ""


def profile(
    profiled_argv: Sequence[str],
    report: str | Path,
    *,
    kernel_regex: str | None = None,
    launch_skip: int = DEFAULT_LAUNCH_SKIP,
    launch_count: int | None = DEFAULT_LAUNCH_COUNT,
    section_set: str = DEFAULT_SET,
    clock_control: str = DEFAULT_CLOCK_CONTROL,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    ncu: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    profile_from_start: bool = True,
    log: str | Path | None = None,
) -> ProfileResult:
    """Profile ``profiled_argv`` into ``report`` (a path ending in ``.ncu-rep``) and export its pages.
    ncu's console output goes to ``log`` (default: ``X_ncu.log`` beside the report); a failure's
    message names it."""
    rep = Path(report)
    if not rep.name.endswith(".ncu-rep"):
        rep = rep.with_name(rep.name + ".ncu-rep")
    exe = find_ncu(ncu)
    cmd = build_ncu_command(
        profiled_argv,
        rep,
        kernel_regex=kernel_regex,
        launch_skip=launch_skip,
        launch_count=launch_count,
        section_set=section_set,
        clock_control=clock_control,
        ncu=exe,
        profile_from_start=profile_from_start,
    )
    make_dirs(rep.parent)
    paths = sibling_paths(rep)
    if log is not None:
        paths["log"] = Path(log)
        make_dirs(paths["log"].parent)
    try:
        code, out = _run(cmd, timeout_s, env, cwd)
    except OSError as exc:
        raise NcuFailed(f"cannot run {exe}: {exc.strerror or exc}") from None
    atomic_write_text(paths["log"], out)
    if code != 0:
        tail = " | ".join(line for line in out.strip().splitlines()[-3:])
        raise NcuFailed(f"ncu exited with {code} (log: {paths['log']}): {tail or 'no output'}")
    if not rep.is_file() or rep.stat().st_size == 0:
        hint = (
            " (no kernel matched: check --kernel and --launch-skip)"
            if "No kernels were profiled" in out
            else ""
        )
        raise NcuFailed(f"ncu finished but wrote no report at {rep}{hint}; log: {paths['log']}")
    page_timeout = max(60.0, timeout_s / 2)
    atomic_write_text(
        paths["details_csv"], export_page(rep, "details", ncu=exe, timeout_s=page_timeout)
    )
    atomic_write_text(paths["raw_csv"], export_page(rep, "raw", ncu=exe, timeout_s=page_timeout))
    atomic_write_text(
        paths["details_txt"],
        export_page(rep, "details", csv_format=False, ncu=exe, timeout_s=page_timeout),
    )
    return ProfileResult(
        rep, paths["details_csv"], paths["raw_csv"], paths["details_txt"], paths["log"], cmd
    )


def worker_profile_argv(request: str | Path, *, python: str | None = None) -> list[str]:
    """The argv that profiles workloads through the worker: ``python -m fibtui.worker profile``
    warms each workload up, then runs the profiled calls inside cudaProfilerStart/Stop (so ncu
    runs with --profile-from-start off and never sees a warm-up launch)."""
    return [python or sys.executable, "-m", "fibtui.worker", "profile", "--request", str(request)]


def worker_env() -> dict[str, str]:
    """The environment for the profiled worker: this fibtui importable first."""
    import os

    from fibtui.runners.local import scrubbed_environment

    env = scrubbed_environment(dict(os.environ))  # the profiled kernel never sees tokens or secrets
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
