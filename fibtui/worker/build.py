"""Build a solution from its sources: python and triton first; CUDA/C++ report COMPILE_ERROR."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

PY_LANGUAGES = ("python", "triton", "torch", "tilelang")


class BuildError(Exception):
    """The solution cannot be built: reported as COMPILE_ERROR with this message."""


@dataclass
class BuiltSolution:
    sid: str  # the id the runner gave it ("baseline", "candidate", "candidate-2"...)
    name: str
    fn: Callable[..., Any]
    dps: bool
    language: str
    folder: Path
    source_hash: str
    meta: dict[str, Any] = field(default_factory=dict)


def _safe_rel(rel: str) -> Path:
    p = PurePosixPath(rel.replace("\\", "/"))
    if p.is_absolute() or rel.startswith(("/", "\\")) or ".." in p.parts or not p.parts or (len(rel) > 1 and rel[1] == ":"):
        raise BuildError(f"source path {rel!r} is absolute or leaves the solution folder")
    if any(ord(c) < 32 for c in rel):
        raise BuildError(f"source path {rel!r} holds control characters")
    return Path(*p.parts)


def source_hash(sources: list[dict[str, str]]) -> str:
    h = hashlib.sha256()
    for s in sorted(sources, key=lambda s: s["path"]):
        h.update(s["path"].encode())
        h.update(b"\0")
        h.update(s["content"].encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def write_sources(sources: list[dict[str, str]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s in sources:
        target = folder / _safe_rel(s["path"])
        if folder.resolve() not in target.resolve().parents:
            raise BuildError(f"source path {s['path']!r} leaves the solution folder")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(s["content"], encoding="utf-8")
        except (OSError, ValueError) as exc:
            raise BuildError(f"cannot write source {s['path']!r}: {exc}") from None


def build(sid: str, solution: dict[str, Any], workdir: Path) -> BuiltSolution:
    """Write the sources under ``workdir/<hash>/`` and import the entry point."""
    spec = solution.get("spec") or {}
    language = spec.get("language", "")
    entry = spec.get("entry_point", "")
    sources = solution.get("sources") or []
    if not sources:
        raise BuildError("the solution has no sources")
    if "::" not in entry:
        raise BuildError(f"entry point {entry!r} is not of the form 'file::function'")
    if language not in PY_LANGUAGES:
        raise BuildError(
            f"building {language!r} solutions is not supported by fibtui's worker yet "
            "(python and triton are; run CUDA/C++ solutions through `fibtui parity`)"
        )
    digest = source_hash(sources)
    folder = workdir / f"{sid}-{digest}"
    write_sources(sources, folder)
    entry_file, func_name = entry.split("::", 1)
    path = folder / _safe_rel(entry_file)
    if not path.is_file():
        raise BuildError(f"entry point file {entry_file!r} is not among the sources")
    module_name = f"fibtui_solution_{sid.replace('-', '_')}_{digest}"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        spec_obj = importlib.util.spec_from_file_location(module_name, path)
        assert spec_obj is not None and spec_obj.loader is not None
        module = importlib.util.module_from_spec(spec_obj)
        sys.modules[module_name] = module
        cwd = os.getcwd()
        try:
            os.chdir(folder)
            spec_obj.loader.exec_module(module)
        finally:
            os.chdir(cwd)
    except SyntaxError as exc:
        raise BuildError(f"{entry_file}:{exc.lineno}: SyntaxError: {exc.msg}") from None
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is a build failure
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise BuildError(f"importing {entry_file} tried to exit ({type(exc).__name__})") from None
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        raise BuildError(f"importing {entry_file} failed: {tb}") from None
    fn = getattr(module, func_name, None)
    if fn is None or not callable(fn):
        raise BuildError(f"{entry_file} defines no function {func_name!r}")
    dps = spec.get("destination_passing_style", True)
    return BuiltSolution(sid=sid, name=solution.get("name", sid), fn=fn, dps=bool(dps), language=language,
                         folder=folder, source_hash=digest)
