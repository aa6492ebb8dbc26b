"""Build a solution from its sources, the way flashinfer-bench's builders do.

One builder per (language, binding), chosen as flashinfer-bench's registry chooses:

- ``python``, ``triton``, ``tilelang`` (and fibtui's ``torch``): the sources are written as a
  package and the entry file is imported as a module of it (``<package>.kernel``), so relative
  imports, ``__init__.py`` and sibling modules work; CuTe DSL and other Python DSLs load this way.
- ``cuda`` / ``cpp`` with no binding or ``tvm-ffi``: compiled with ``tvm_ffi.cpp.build`` (the
  starter kit's layout; ``.py`` files such as ``binding.py`` are not compiled), loaded with
  ``tvm_ffi.load_module``.
- ``cuda`` / ``cpp`` with ``binding = "torch"``: ``torch.utils.cpp_extension.load``.

Compiled builds live in a cache keyed by the sources, flags, compilers, torch/CUDA versions and
GPU architecture (:mod:`fibtui.worker.native`), so an unchanged solution compiles once.

Failures: :class:`BuildError` is the kernel's COMPILE_ERROR (its sources do not build or import);
:class:`ToolLimit` is UNSUPPORTED_HERE (this machine lacks what the solution needs: a GPU, nvcc,
tvm-ffi, a DSL), never counted as the kernel's failure.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from fibtui.core.toolchain import INSTALL_HINT, builder_for, has_module, own_top_names, says_no_gpu
from fibtui.worker.build_job import (
    BuildError,
    BuildJob,
    BuiltSolution,
    ToolLimit,
    arch_limit,
    check_signature,
    current_arch,
    full_text,
    write_sources,
)

__all__ = [
    "BuildError",
    "BuildJob",
    "BuiltSolution",
    "ToolLimit",
    "build",
    "check_signature",
    "current_arch",
    "full_text",
    "prepare",
    "split_entry",
    "write_sources",
]

PACKAGE_PREFIX = "fibtui_solution_"


def source_hash(sources: list[dict[str, str]]) -> str:
    h = hashlib.sha256()
    for s in sorted(sources, key=lambda s: s["path"]):
        h.update(s["path"].encode())
        h.update(b"\0")
        h.update(s["content"].encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def split_entry(entry: str, sources: list[dict[str, str]]) -> tuple[str, str]:
    """``file::symbol`` with the file among the sources. Also accepted, as conveniences: a module
    path (``pkg.kernel::run`` for ``pkg/kernel.py``) and a package (``pkg::run`` for
    ``pkg/__init__.py``)."""
    if entry.count("::") != 1:
        raise BuildError(f"entry point {entry!r} is not of the form 'file::function'")
    file, symbol = entry.split("::")
    if not file or not symbol:
        raise BuildError(f"entry point {entry!r} is not of the form 'file::function'")
    paths = {s["path"] for s in sources}
    if file in paths:
        return file, symbol
    if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", file):
        dotted = file.replace(".", "/")
        for candidate in (f"{dotted}.py", f"{dotted}/__init__.py"):
            if candidate in paths:
                return candidate, symbol
    raise BuildError(f"entry point file {file!r} is not among the sources")


def language_builder(language: str, binding: str | None) -> str:
    """Which builder flashinfer-bench's registry would pick: python | tvm-ffi | torch."""
    try:
        return builder_for(language, binding)
    except ValueError as exc:
        raise BuildError(str(exc)) from None


def build(
    sid: str,
    solution: dict[str, Any],
    workdir: Path,
    *,
    device_type: str = "cuda",
    cache_root: Path | None = None,
) -> BuiltSolution:
    """Build one solution; raises BuildError (COMPILE_ERROR) or ToolLimit (UNSUPPORTED_HERE)."""
    return prepare(sid, solution, workdir, device_type=device_type, cache_root=cache_root).run()


def prepare(
    sid: str,
    solution: dict[str, Any],
    workdir: Path,
    *,
    device_type: str = "cuda",
    cache_root: Path | None = None,
    arity: tuple[int, int] | None = None,
    reference_root: str | None = None,
) -> BuildJob:
    """Check what the solution needs and plan its build (raises BuildError / ToolLimit now for
    what is wrong before anything is built)."""
    spec = solution.get("spec") or {}
    language = str(spec.get("language", ""))
    sources = solution.get("sources") or []
    if not sources:
        raise BuildError("the solution has no sources")
    entry_file, symbol = split_entry(str(spec.get("entry_point", "")), sources)
    builder = language_builder(language, spec.get("binding"))
    digest = source_hash(sources)
    dps = bool(spec.get("destination_passing_style", True))
    name = str(solution.get("name") or sid)
    if builder == "python":
        if language == "triton" and not has_module("triton"):
            raise ToolLimit("triton is not installed in the worker's Python (pip install triton)")
        if language == "tilelang" and not has_module("tilelang"):
            raise ToolLimit(
                "tilelang is not installed in the worker's Python (pip install tilelang)"
            )

        def run_python() -> BuiltSolution:
            t0 = time.perf_counter()
            folder = workdir / f"{sid}-{digest}"
            fn = import_entry(sid, digest, sources, folder, entry_file, symbol, device_type)
            return BuiltSolution(
                sid=sid,
                name=name,
                fn=fn,
                dps=dps,
                language=language,
                folder=folder,
                source_hash=digest,
                meta={"builder": "python", "cached": False, "build_s": time.perf_counter() - t0},
            )

        return BuildJob(sid, solution, "python", False, run_python, arity)
    from fibtui.worker import native

    job = native.prepare(
        sid,
        name,
        language,
        builder,
        entry_file,
        symbol,
        dps,
        sources,
        digest,
        device_type=device_type,
        cache_root=cache_root,
        device_arch=current_arch(device_type),
        reference_root=reference_root,
    )
    job.arity = arity
    return job


# --------------------------------------------------------------------------------------------
# Python solutions: imported as a package
# --------------------------------------------------------------------------------------------


def package_name(sid: str, digest: str) -> str:
    return f"{PACKAGE_PREFIX}{re.sub(r'[^0-9A-Za-z_]', '_', sid)}_{digest}"


def sid_of_module(module_name: str) -> str | None:
    """The solution id a module of a built package belongs to (``fibtui_solution_<sid>_<hash>``)."""
    top = module_name.split(".", 1)[0]
    if not top.startswith(PACKAGE_PREFIX):
        return None
    return top[len(PACKAGE_PREFIX) :].rsplit("_", 1)[0].replace("_", "-")


def error_location(exc: BaseException, folder: Path) -> str | None:
    """``file:line`` of the innermost traceback frame inside the solution's folder."""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        try:
            return f"{Path(exc.filename).resolve().relative_to(folder.resolve()).as_posix()}:{exc.lineno}"
        except ValueError:
            pass
    where = None
    root = str(folder.resolve())
    for frame in traceback.extract_tb(exc.__traceback__):
        path = os.path.realpath(frame.filename)
        if path.startswith(root + os.sep):
            where = f"{os.path.relpath(path, root)}:{frame.lineno}"
    return where


def _missing_module(exc: BaseException, own: set[str]) -> str | None:
    """The top-level name of a module the solution imports but this Python lacks (not one of the
    solution's own modules)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".", 1)[0]
        if top not in own and not top.startswith(PACKAGE_PREFIX):
            return top
    return None


def import_entry(
    sid: str,
    digest: str,
    sources: list[dict[str, str]],
    folder: Path,
    entry_file: str,
    symbol: str,
    device_type: str = "cuda",
) -> Callable[..., Any]:
    """Write the sources as package ``<folder>/<package>/`` and import the entry file as its module.

    Relative imports and ``__init__.py`` work as in flashinfer-bench. Absolute imports of a sibling
    module at import time (``import helper``) also work: the package folder is on ``sys.path``
    while the entry imports, and the top-level modules it loaded from there are then taken out of
    ``sys.modules``, so another solution's ``helper`` is its own."""
    pkg = package_name(sid, digest)
    root = folder / pkg
    write_sources(sources, root)
    own = own_top_names([s["path"] for s in sources])
    module_name = pkg + "." + ".".join(PurePosixPath(entry_file).with_suffix("").parts)
    if module_name.endswith(".__init__"):
        module_name = module_name[: -len(".__init__")]
    with _IMPORT_LOCK:  # the current folder and sys.path are the process's: one import at a time
        return _import_entry(root, folder, own, module_name, entry_file, symbol, device_type)


#: builds in threads of one process (compiled builds; several engines in one process) take turns
#: here: an import runs in its solution's folder, and the current folder belongs to the process
_IMPORT_LOCK = threading.RLock()


def _import_entry(
    root: Path,
    folder: Path,
    own: set[str],
    module_name: str,
    entry_file: str,
    symbol: str,
    device_type: str,
) -> Callable[..., Any]:
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    sys.path.insert(0, str(root))
    cwd = os.getcwd()
    try:
        os.chdir(root)
        module = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is a build failure
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise BuildError(
                f"importing {entry_file} tried to exit ({type(exc).__name__})"
            ) from None
        missing = _missing_module(exc, own)
        where = error_location(exc, root)
        if missing is not None:
            hint = INSTALL_HINT.get(missing, missing)
            raise ToolLimit(
                f"{where + ': ' if where else ''}imports {missing}, which is not installed in "
                f"the worker's Python ({sys.executable}; pip install {hint})",
                where=where,
            ) from None
        if isinstance(exc, SyntaxError):
            raise BuildError(
                f"{where or entry_file}: SyntaxError: {exc.msg}", where=where
            ) from None
        text = traceback.format_exception_only(type(exc), exc)[-1].strip()
        limit = arch_limit(full_text(exc), device_type)
        if limit is not None:
            # a DSL that checks the GPU while importing (CuTe DSL compiling at import time)
            raise ToolLimit(
                f"importing {entry_file}: {limit.describe()} ({where + ': ' if where else ''}"
                f"{text[:300]})",
                where=where,
                limit=limit,
            ) from None
        if device_type != "cuda" and says_no_gpu(str(exc)):
            # it compiles or calls CUDA while importing, and this machine has no GPU
            raise ToolLimit(
                f"importing {entry_file} needs an NVIDIA GPU ({where + ': ' if where else ''}{text[:300]}); "
                "this worker runs on the CPU (Triton's interpreter)",
                where=where,
            ) from None
        raise BuildError(
            f"importing {entry_file} failed: {where + ': ' if where else ''}{text}", where=where
        ) from None
    finally:
        os.chdir(cwd)
        for p in (str(root), str(folder)):
            try:
                sys.path.remove(p)
            except ValueError:
                pass
        _forget_loose_modules(before, root)
    fn = getattr(module, symbol, None)
    if fn is None or not callable(fn):
        raise BuildError(f"{entry_file} defines no function {symbol!r}")
    return fn


def forget_solution_modules() -> int:
    """Take every built solution's package out of ``sys.modules`` (a worker that serves another
    run imports that run's solutions afresh); how many modules went."""
    import linecache

    names = [n for n in sys.modules if n.startswith(PACKAGE_PREFIX)]
    for name in names:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    # the next run writes its sources at the same paths: no source line read before may stand
    # for them (Triton reads a kernel's source through linecache to key its compile cache)
    linecache.clearcache()
    return len(names)


def _forget_loose_modules(before: set[str], root: Path) -> None:
    """Take modules imported by plain name from the solution's folder out of ``sys.modules`` (their
    importers keep them), so the next solution's module of the same name is loaded afresh."""
    prefix = str(root.resolve()) + os.sep
    for name in set(sys.modules) - before:
        if name.startswith(PACKAGE_PREFIX):
            continue
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None) or ""
        if path and os.path.realpath(path).startswith(prefix):
            sys.modules.pop(name, None)
