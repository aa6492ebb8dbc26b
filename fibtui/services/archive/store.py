"""Copying into the archive, never overwriting: a taken name becomes ``_run2``, ``_run3``
(:func:`fibtui.core.fsio.reserve_unique_path`); every folder and file is made through
:mod:`fibtui.core.fsio`, and an entry whose filling fails is removed again (:func:`claimed`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fibtui.core.archive.layout import RUNS_DIR, candidate_folder, safe_name
from fibtui.core.errors import InputError, WriteFailed
from fibtui.core.fsio import (
    atomic_copy_file,
    atomic_write_json,
    check_input_file,
    make_dirs,
    reserve_unique_path,
)

_SKIP_NAMES = {"__pycache__", "lock", ".pytest_cache"}


def copy_tree_into(src: Path, dest: Path, skip_dirs: tuple[str, ...] = ()) -> None:
    """Fill the empty folder ``dest`` (just reserved) with a copy of ``src``: the copy is built in a
    temp folder beside it and renamed onto ``dest``, so ``dest`` is whole or stays empty. Links are
    never followed (nothing outside ``src`` is copied); caches and lock files are left out."""
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        raise WriteFailed(dest, exc) from None
    try:
        for dirpath, dirnames, filenames in os.walk(src):
            here = Path(dirpath)
            rel = here.relative_to(src)
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in _SKIP_NAMES
                and not (here / d).is_symlink()
                and not (rel == Path(".") and d in skip_dirs)
            )
            make_dirs(tmp / rel)
            for name in sorted(filenames):
                item = here / name
                if (
                    name in _SKIP_NAMES
                    or name.endswith(".pyc")
                    or item.is_symlink()
                    or not item.is_file()
                ):
                    continue
                if rel == Path(".") and name in skip_dirs:
                    continue
                atomic_copy_file(item, tmp / rel / name)
                shutil.copystat(item, tmp / rel / name)
        os.replace(tmp, dest)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteFailed):
            raise WriteFailed(dest, exc) from None
        raise


@contextlib.contextmanager
def claimed(path: Path) -> Iterator[Path]:
    """A just-reserved archive name: removed again when filling it fails, so a failed step leaves
    no half-made entry behind."""
    try:
        yield path
    except BaseException:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        raise


def archive_run(archive_root: Path, run_folder: str | Path) -> Path:
    """Copy one run folder (journal, run.json, snapshots, worker logs; not ``work/``) to
    ``runs/<run_id>`` (``_run2``... when taken)."""
    src = Path(run_folder)
    if not (src / "journal.jsonl").is_file():
        raise InputError(src, "not a fibtui run folder (no journal.jsonl)")
    from fibtui.core.runs import read_journal

    run_id = read_journal(src / "journal.jsonl").header.run_id
    dest = reserve_unique_path(archive_root / RUNS_DIR / safe_name(run_id, "run"), directory=True)
    with claimed(dest):
        copy_tree_into(src, dest, skip_dirs=("work",))
    return dest


def archive_file(
    archive_root: Path, src: str | Path, subdir: str = "benchmarks", name: str | None = None
) -> Path:
    """Copy a file under ``<subdir>/`` of the archive (a run result, a log, a summary...)."""
    src = Path(src)
    check_input_file(
        src
    )  # a missing path, a folder, a FIFO or a device: one line, nothing reserved
    dest = reserve_unique_path(archive_root / subdir / safe_name(name or src.name, "file"))
    with claimed(dest):
        atomic_copy_file(src, dest)
    return dest


def archive_ncu_report(archive_root: Path, src: str | Path, label: str | None = None) -> Path:
    """Copy an Nsight Compute report (.ncu-rep or an exported page) to ``benchmarks/ncu/``."""
    src = Path(src)
    name = f"{safe_name(label)}{''.join(src.suffixes) or '.ncu-rep'}" if label else src.name
    return archive_file(archive_root, src, "benchmarks/ncu", name)


def archive_parallel_runs(archive_root: Path, operator: str, folder: str | Path) -> Path:
    """Copy another runner's result folder to ``<operator>/parallel_runs/<name>``."""
    src = Path(folder)
    if not src.is_dir():
        raise InputError(src, "not a folder")
    dest = reserve_unique_path(
        archive_root / safe_name(operator, "operator") / "parallel_runs" / safe_name(src.name),
        directory=True,
    )
    with claimed(dest):
        copy_tree_into(src, dest)
    return dest


def archive_snapshot(
    archive_root: Path,
    snapshot: str | Path,
    candidate_id: str,
    *,
    isolated: bool = False,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Copy a run's solution snapshot (solution.json + sources/) into the archive, with
    ``archived.json`` saying where it came from."""
    src = Path(snapshot)
    if not src.is_dir():
        raise InputError(src, "snapshot folder not found")
    dest = reserve_unique_path(
        candidate_folder(archive_root, candidate_id, isolated), directory=True
    )
    with claimed(dest):
        copy_tree_into(src, dest)
        atomic_write_json(dest / "archived.json", {"candidate": candidate_id, **(meta or {})})
    return dest


def archive_sources(
    archive_root: Path,
    source_dir: str | Path,
    candidate_id: str,
    *,
    isolated: bool = True,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Copy a folder of sources (e.g. the workspace's solution/<language>/) into the archive."""
    src = Path(source_dir)
    if not src.is_dir():
        raise InputError(src, "source folder not found")
    dest = reserve_unique_path(
        candidate_folder(archive_root, candidate_id, isolated), directory=True
    )
    with claimed(dest):
        make_dirs(dest / "sources")
        copy_tree_into(src, dest / "sources")
        atomic_write_json(dest / "archived.json", {"candidate": candidate_id, **(meta or {})})
    return dest
