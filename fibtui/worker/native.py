"""CUDA and C++ solutions: compiled through TVM FFI or PyTorch's extension loader, with a cache.

Semantics follow flashinfer-bench's ``TVMFFIBuilder`` and ``TorchBuilder``: the sources are
written into the build folder (which is also on the include path), ``.cu`` files go to nvcc and
``.c/.cc/.cpp/.cxx`` files to the C++ compiler (other files, ``binding.py`` say, are not
compiled), CUDA builds link ``-lcuda -lcublas``, and the entry point's symbol is looked up in the
loaded module. Compiler flags and the target architecture are tvm-ffi's and torch's own (tvm-ffi
targets the GPU ``nvidia-smi`` reports unless ``TVM_FFI_CUDA_ARCH_LIST`` says otherwise).

The cache: ``<cache>/<builder>/<name>_<key>/`` where the key hashes the sources, language,
binding, entry point, the compilers' versions, tvm-ffi/torch/CUDA versions, the GPU architecture
and the environment variables that change a build. A finished build leaves ``fibtui-build.json``
there; the next load of the same key compiles nothing. Concurrent workers building one key take
turns on a file lock, so a key is compiled once.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fibtui.core import gpuarch, toolchain
from fibtui.worker.build_job import BuildError, BuildJob, BuiltSolution, ToolLimit, write_sources

CUDA_SUFFIXES = (".cu",)
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
MARKER = "fibtui-build.json"
LOG_NAME = "fibtui-build.log"
#: bump when the way fibtui builds changes, so old cache entries are not reused
BUILD_SCHEME = 1
#: environment variables that change what a build produces
BUILD_ENV = (
    "TVM_FFI_CUDA_ARCH_LIST",
    "TORCH_CUDA_ARCH_LIST",
    "CUDA_HOME",
    "CUDA_PATH",
    "CXX",
    "CC",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_PREPEND_FLAGS",
)

#: builds loaded by this process, by cache key (a warm worker's next load of the same key)
_loaded: dict[str, Callable[..., Any]] = {}
#: the library file of each of those builds (what its cubins are read from)
_libraries: dict[str, str] = {}


def default_cache_root() -> Path:
    from fibtui.core.locations import build_cache_dir

    return build_cache_dir()


def _gpu_arch(device_type: str) -> str:
    if device_type != "cuda":
        return "cpu"
    try:
        import torch

        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - no architecture known: part of the key all the same
        return "cuda-unknown"


def _versions(builder: str) -> dict[str, Any]:
    out: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        import torch

        out["torch"] = torch.__version__
        out["torch_cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001
        out["torch"] = None
    if builder == "tvm-ffi":
        try:
            import tvm_ffi

            out["tvm_ffi"] = getattr(tvm_ffi, "__version__", "?")
        except Exception:  # noqa: BLE001
            out["tvm_ffi"] = None
    return out


def cache_key(
    builder: str,
    language: str,
    entry: str,
    sources: list[dict[str, str]],
    has_cu: bool,
    device_type: str,
    cutlass: toolchain.CutlassHeaders | None = None,
) -> tuple[str, dict[str, Any]]:
    """(hex key, what went into it): the CUTLASS headers a build includes are part of it."""
    nvcc = toolchain.find_nvcc() if has_cu else None
    cxx = os.environ.get("CXX") or "c++"
    ident = {
        "scheme": BUILD_SCHEME,
        "builder": builder,
        "language": language,
        "entry": entry,
        "nvcc": toolchain.tool_version(nvcc) if nvcc else None,
        "cxx": toolchain.tool_version(cxx),
        "arch": _gpu_arch(device_type),
        "env": {k: os.environ[k] for k in BUILD_ENV if k in os.environ},
        **_versions(builder),
    }
    if cutlass is not None:
        ident["cutlass"] = {"include": cutlass.include_paths, "version": cutlass.version}
    h = hashlib.sha256(json.dumps(ident, sort_keys=True).encode())
    for s in sorted(sources, key=lambda s: s["path"]):
        h.update(b"\0" + s["path"].encode() + b"\0" + s["content"].encode())
    return h.hexdigest(), ident


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(data, dict)
        or not data.get("ok")
        or not (folder / str(data.get("library", ""))).is_file()
    ):
        return None
    return data


# --------------------------------------------------------------------------------------------
# Compiler output
# --------------------------------------------------------------------------------------------

_NVCC_ERR = re.compile(
    r"^(?P<file>[^\s()][^()]*?)\((?P<line>\d+)\): (?:catastrophic )?error[^:]*: (?P<msg>.+)$"
)
_GCC_ERR = re.compile(
    r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<msg>.+)$"
)
_PTXAS_ERR = re.compile(r"^ptxas (?:fatal|error)\s*:\s*(?P<msg>.+)$")
_LINK_ERR = re.compile(r"(undefined reference to .+|cannot find -l\S+|undefined symbol: \S+)")


def first_compiler_error(log: str, folder: Path | None = None) -> str | None:
    """The first error line of a compiler log, as ``file:line: error: message`` with the file
    relative to the build folder; ptxas and linker errors as they are."""
    root = str(folder.resolve()) + os.sep if folder is not None else None
    for raw in log.splitlines():
        line = raw.strip()
        m = _NVCC_ERR.match(line) or _GCC_ERR.match(line)
        if m:
            file = m.group("file")
            if root and os.path.realpath(file).startswith(root):
                file = os.path.realpath(file)[len(root) :]
            return f"{file}:{m.group('line')}: error: {m.group('msg').strip()}"
        m = _PTXAS_ERR.match(line)
        if m:
            return f"ptxas error: {m.group('msg').strip()}"
        m = _LINK_ERR.search(line)
        if m:
            return f"link error: {m.group(1).strip()}"
    for raw in log.splitlines():
        line = raw.strip()
        if re.search(r"\berror\b", line, re.IGNORECASE) and not line.startswith(
            ("ninja:", "FAILED:")
        ):
            return line[:300]
    return None


# --------------------------------------------------------------------------------------------
# Planning and building
# --------------------------------------------------------------------------------------------


def _safe_name(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)[:48]
    return s if s and not s[0].isdigit() else "_" + s


def prepare(
    sid: str,
    name: str,
    language: str,
    builder: str,
    entry_file: str,
    symbol: str,
    dps: bool,
    sources: list[dict[str, str]],
    digest: str,
    *,
    device_type: str,
    cache_root: Path | None,
    device_arch: str | None = None,
    reference_root: str | None = None,
) -> BuildJob:
    """Plan the build. ``device_arch``: this GPU (``sm_90``), so that a library holding code for
    another architecture only is UNSUPPORTED_HERE; ``reference_root``: the workspace's
    ``reference/`` folder, one of the places CUTLASS headers are looked for."""
    paths = [s["path"] for s in sources]
    has_cu = language == "cuda" or any(p.endswith(CUDA_SUFFIXES) for p in paths)
    if not entry_file.endswith(CUDA_SUFFIXES + CPP_SUFFIXES):
        raise BuildError(
            f"entry file {entry_file!r} is not a C/C++/CUDA file ({', '.join(CUDA_SUFFIXES + CPP_SUFFIXES)})"
        )
    if not any(p.endswith(CUDA_SUFFIXES + CPP_SUFFIXES) for p in paths):
        raise BuildError("no .cu/.cpp source to compile")
    if has_cu and device_type != "cuda":
        raise ToolLimit(
            "CUDA solutions need an NVIDIA GPU; this worker runs on the CPU (Triton's interpreter)"
        )
    if builder == "tvm-ffi" and not toolchain.has_module("tvm_ffi"):
        raise ToolLimit(
            f"the tvm-ffi binding needs apache-tvm-ffi in the worker's Python ({sys.executable}; "
            "pip install apache-tvm-ffi)"
        )
    if has_cu and toolchain.find_nvcc() is None:
        raise ToolLimit("no nvcc on this machine (set CUDA_HOME or put nvcc on PATH)")
    ninja = toolchain.find_ninja()
    if ninja is None:
        raise ToolLimit("no ninja on this machine (pip install ninja)")
    cutlass = _cutlass_for(sources, reference_root)
    arch = gpuarch.Arch.parse(device_arch) if device_arch else None
    key, ident = cache_key(
        builder, language, f"{entry_file}::{symbol}", sources, has_cu, device_type, cutlass
    )
    root = cache_root or default_cache_root()
    folder = root / builder.replace("-", "_") / f"{_safe_name(name)}_{key[:16]}"
    compiles = key not in _loaded and _read_marker(folder) is None

    def run() -> BuiltSolution:
        t0 = time.perf_counter()
        meta: dict[str, Any] = {
            "builder": builder,
            "cache_key": key[:16],
            "build_folder": str(folder),
        }
        if cutlass is not None:
            meta["cutlass"] = cutlass.to_json()
        fn = _loaded.get(key)
        if fn is not None:
            meta.update(cached=True, compile_s=0.0, library=_libraries.get(key))
        else:
            # ninja may be beside this Python only (the `ninja` package): both builders call it by name
            os.environ["PATH"] = os.pathsep.join(
                [str(Path(ninja).parent), os.environ.get("PATH", "")]
            )
            with _locked(folder.parent / f"{folder.name}.lock"):
                marker = _read_marker(folder)
                if marker is None:
                    marker = _compile(
                        builder,
                        language,
                        name,
                        key,
                        ident,
                        sources,
                        folder,
                        has_cu,
                        cutlass.include_paths if cutlass is not None else [],
                        arch,
                    )
                    meta.update(cached=False, compile_s=marker["compile_s"])
                else:
                    meta.update(cached=True, compile_s=0.0, compiled_s=marker.get("compile_s"))
            if arch is not None:
                # code for another GPU only (TVM_FFI_CUDA_ARCH_LIST=10.0a, say): it would fail at
                # its first launch with "no kernel image"; say what it needs before calling it
                limit = gpuarch.library_limit(folder / str(marker["library"]), arch)
                if limit is not None:
                    raise ToolLimit(
                        f"{limit.evidence}: it cannot run on this GPU ({arch.name}); "
                        "run it on a GPU it was built for (fibtui run --backend auto sends it to "
                        "Modal's B200)",
                        limit=limit,
                    )
            fn = _load(builder, folder, marker, symbol)
            _loaded[key] = fn
            _libraries[key] = meta["library"] = str(folder / str(marker["library"]))
        meta["build_s"] = time.perf_counter() - t0
        meta["log"] = str(folder / LOG_NAME)
        return BuiltSolution(
            sid=sid,
            name=name,
            fn=fn,
            dps=dps,
            language=language,
            folder=folder,
            source_hash=digest,
            meta=meta,
        )

    return BuildJob(sid, {"name": name}, builder, compiles, run)


def _cutlass_for(
    sources: list[dict[str, str]], reference_root: str | None
) -> toolchain.CutlassHeaders | None:
    """The CUTLASS headers a build that includes them uses (the first found); ToolLimit when the
    sources include them and none are on this machine."""
    wanted = toolchain.cutlass_includes(sources)
    if not wanted:
        return None
    found = toolchain.find_cutlass(reference_root)
    if not found:
        raise ToolLimit(
            f"includes {wanted[0]} (CUTLASS/CuTe headers, which the contest image provides) and "
            f"none were found on this machine: {toolchain.CUTLASS_REMEDY}",
            limit=gpuarch.MachineLimit(
                "headers", tuple(wanted), None, remedy=toolchain.CUTLASS_REMEDY
            ),
        )
    return found[0]


_MISSING_HEADER = re.compile(
    r"""(?:cannot open source file|fatal error:)\s*["<]?((?:cute|cutlass)/[^"'>:\s]+)"""
)


def _package(name: str, key: str) -> str:
    return f"fibtui_{_safe_name(name).lstrip('_')}_{key[:12]}"


def _compile(
    builder: str,
    language: str,
    name: str,
    key: str,
    ident: dict[str, Any],
    sources: list[dict[str, str]],
    folder: Path,
    has_cu: bool,
    include_paths: list[str] | None = None,
    arch: gpuarch.Arch | None = None,
) -> dict[str, Any]:
    """Write the sources, compile, write the marker. BuildError with the first compiler error;
    ToolLimit when what failed is this machine's (ptxas refusing an instruction this GPU lacks,
    a CUTLASS header not found)."""
    (folder / MARKER).unlink(missing_ok=True)
    write_sources(sources, folder)
    files = [folder / s["path"] for s in sources]
    package = _package(name, key)
    t0 = time.perf_counter()
    log = ""
    try:
        if builder == "tvm-ffi":
            import tvm_ffi.cpp

            cpp = [str(p) for p in files if p.suffix in CPP_SUFFIXES]
            cu = [str(p) for p in files if p.suffix in CUDA_SUFFIXES]
            ldflags: list[str] = []
            if has_cu:
                ldflags = ["-lcuda", "-lcublas"]
                lib = _cuda_lib_dir()
                if lib:
                    ldflags.insert(0, f"-L{lib}")
            library = tvm_ffi.cpp.build(
                name=package,
                cpp_files=cpp,
                cuda_files=cu,
                extra_include_paths=[str(folder), *(include_paths or [])],
                extra_ldflags=ldflags,
                build_directory=str(folder),
            )
        else:
            from torch.utils.cpp_extension import load

            srcs = [str(p) for p in files if p.suffix in CUDA_SUFFIXES + CPP_SUFFIXES]
            module = load(
                name=package,
                sources=srcs,
                extra_include_paths=[str(folder), *(include_paths or [])],
                with_cuda=language == "cuda",
                build_directory=str(folder),
                verbose=False,
            )
            library = str(getattr(module, "__file__", "") or folder / f"{package}.so")
            sys.modules[package] = module  # _load takes it from here: an extension is loaded once
    except Exception as exc:  # noqa: BLE001 - whatever the compiler said is the kernel's build failure
        log = str(exc)
        _write_log(folder, log)
        first = first_compiler_error(log, folder)
        where = first.split(": ", 1)[0] if first and re.match(r"[^:\s]+:\d+: ", first) else None
        limit = gpuarch.limit_from_text(log, arch) if arch is not None else None
        if limit is not None:
            raise ToolLimit(
                f"{limit.describe()}: {limit.evidence or first or 'the build failed'}",
                log=log,
                where=where,
                limit=limit,
            ) from None
        missing = _MISSING_HEADER.search(log)
        if missing and not include_paths:
            header = missing.group(1)
            raise ToolLimit(
                f"{first or header}: CUTLASS/CuTe headers not found on this machine: "
                f"{toolchain.CUTLASS_REMEDY}",
                log=log,
                where=where,
                limit=gpuarch.MachineLimit(
                    "headers", (header,), None, remedy=toolchain.CUTLASS_REMEDY
                ),
            ) from None
        raise BuildError(
            first
            or f"{builder} build failed: {log.strip().splitlines()[0] if log.strip() else type(exc).__name__}",
            log=log,
            where=where,
        ) from None
    compile_s = time.perf_counter() - t0
    _write_log(folder, log or f"compiled {len(files)} files in {compile_s:.2f} s\n")
    marker = {
        "ok": True,
        "library": os.path.relpath(library, folder),
        "package": package,
        "compile_s": compile_s,
        "builder": builder,
        "ident": ident,
    }
    tmp = folder / (MARKER + ".tmp")
    tmp.write_text(json.dumps(marker, indent=1), encoding="utf-8")
    os.replace(tmp, folder / MARKER)
    return marker


def _write_log(folder: Path, text: str) -> None:
    try:
        (folder / LOG_NAME).write_text(text, encoding="utf-8")
    except OSError:
        pass


def _cuda_lib_dir() -> str | None:
    nvcc = toolchain.find_nvcc()
    homes = [Path(nvcc).resolve().parent.parent] if nvcc else []
    homes += [Path(p) for p in ("/usr/local/cuda", "/usr/local/cuda-13", "/usr/local/cuda-12")]
    for home in homes:
        for sub in ("targets/x86_64-linux/lib", "lib64", "lib"):
            if (home / sub / "libcudart.so").exists():
                return str(home / sub)
    return None


def _load(builder: str, folder: Path, marker: dict[str, Any], symbol: str) -> Callable[..., Any]:
    library = folder / str(marker["library"])
    #: a tvm-ffi Module or a torch extension's Python module: either holds ``symbol``
    module: Any
    if builder == "tvm-ffi":
        import tvm_ffi

        try:
            ctypes.CDLL(str(library), mode=os.RTLD_NOW)
        except OSError as exc:
            raise BuildError(f"the built library has unresolved symbols: {exc}") from None
        try:
            module = tvm_ffi.load_module(str(library))
        except Exception as exc:  # noqa: BLE001
            raise BuildError(f"tvm-ffi could not load the built library: {exc}") from None
    else:
        import torch  # noqa: F401 - the extension links against torch's libraries

        package = str(marker["package"])
        module = sys.modules.get(package)
        if module is None:
            try:
                loader = importlib.machinery.ExtensionFileLoader(package, str(library))
                spec = importlib.util.spec_from_file_location(package, str(library), loader=loader)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                sys.modules[package] = module
            except Exception as exc:  # noqa: BLE001
                raise BuildError(f"the built extension does not import: {exc}") from None
    try:
        fn = getattr(module, symbol)
    except AttributeError:
        raise BuildError(
            f"the built module exports no {symbol!r} (TVM_FFI_DLL_EXPORT_TYPED_FUNC / "
            "PYBIND11_MODULE must name it)"
        ) from None
    if not callable(fn):
        raise BuildError(f"{symbol!r} in the built module is not callable")
    return fn
