"""What a solution needs from the machine that builds and runs it, and what this machine has.

flashinfer-bench picks a builder by language and binding: Python, Triton and TileLang solutions
are imported as a package; CUDA and C++ ones are compiled through TVM FFI (no binding, or
``tvm-ffi``: the starter kit's layout) or through PyTorch's C++ extension loader
(``binding = "torch"``). A solution this machine cannot build or run (no GPU for CUDA, no nvcc,
tvm-ffi or a DSL not installed) gets the status UNSUPPORTED_HERE with the reason: a limit of the
tool, never the kernel's COMPILE_ERROR. ``fibtui run`` refuses such a run up front
(:func:`limits`); the worker reports the same status for what only it can see (its own Python, a
Modal image).

Standard library only: the worker imports this table too.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

PY_LANGUAGES = ("python", "triton", "torch", "tilelang")
NATIVE_LANGUAGES = ("cuda", "cpp")
BINDINGS = ("tvm-ffi", "torch")
UNSUPPORTED_HERE = "UNSUPPORTED_HERE"

#: Python modules that need an NVIDIA GPU to do anything.
GPU_ONLY_MODULES = {
    "cutlass": "the CuTe DSL (nvidia-cutlass-dsl)",
    "tilelang": "TileLang",
    "cupy": "CuPy",
    "pycuda": "PyCUDA",
}
#: What to install for a module a solution imports, where the package name differs.
INSTALL_HINT = {"cutlass": "nvidia-cutlass-dsl", "tvm_ffi": "apache-tvm-ffi", "cuda": "cuda-python"}


#: What torch, CUDA and the build tools say when the machine has no GPU or no CUDA toolkit: a
#: failure with one of these, on a machine without a GPU, is a limit of the machine.
NO_GPU_MARKERS = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "no CUDA-capable device",
    "CUDA driver initialization failed",
    "cudaErrorNoDevice",
    "CUDA_ERROR_NO_DEVICE",
    "libcuda.so",
    "Cannot access accelerator device when none is available",
    "Could not detect CUDA compute_cap",
    "Could not find CUDA installation",
    "CUDA_HOME environment variable is not set",
    "nvidia-smi",
    "0 active drivers",  # Triton's autotuner (it benchmarks on a GPU) under the CPU interpreter
)


def says_no_gpu(text: str) -> bool:
    return any(marker in text for marker in NO_GPU_MARKERS)


def builder_for(language: str, binding: str | None) -> str:
    """``python`` | ``tvm-ffi`` | ``torch``, as flashinfer-bench's registry decides; ValueError
    for a language or binding it has no builder for."""
    if language in PY_LANGUAGES:
        return "python"
    if language in NATIVE_LANGUAGES:
        if binding in (None, "", "tvm-ffi", "tvm_ffi"):
            return "tvm-ffi"
        if binding == "torch":
            return "torch"
        raise ValueError(f"binding {binding!r} is not one of {', '.join(BINDINGS)}")
    raise ValueError(f"no builder for language {language!r} (python, triton, tilelang, cuda, cpp)")


def own_top_names(paths: list[str]) -> set[str]:
    """Top-level module names the solution's own files provide (``helper`` for helper.py)."""
    out = set()
    for path in paths:
        first = PurePosixPath(path).parts[0] if PurePosixPath(path).parts else ""
        out.add(first[:-3] if first.endswith(".py") else first)
    return out


def unconditional_imports(sources: list[dict[str, str]]) -> set[str]:
    """Top-level names of the absolute imports each Python file makes unconditionally (statements
    of the module body, not inside ``try``, ``if`` or functions), less the solution's own modules:
    what must be installed for it to import at all."""
    names: set[str] = set()
    for s in sources:
        if not s["path"].endswith(".py"):
            continue
        try:
            tree = ast.parse(s["content"])
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(a.name.split(".", 1)[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".", 1)[0])
    return names - own_top_names([s["path"] for s in sources])


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def find_nvcc() -> str | None:
    """nvcc as tvm-ffi and torch find it: CUDA_HOME / CUDA_PATH first, then PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.is_file() else None


def find_ninja() -> str | None:
    """ninja on PATH, or the one the ``ninja`` package put beside this Python."""
    return shutil.which("ninja") or shutil.which("ninja", path=str(Path(sys.executable).parent))


@functools.lru_cache(maxsize=8)
def tool_version(exe: str) -> str | None:
    """The last line of ``exe --version`` that names a version (nvcc: 'release 13.0, V13.0.88')."""
    try:
        out = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout or out.stderr
    m = re.search(r"release [\d.]+, V([\d.]+)", text)  # nvcc
    if m:
        return m.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:120] if lines else None


# --------------------------------------------------------------------------------------------
# CUTLASS and CuTe C++ headers (the contest image has them; a solution may include them)
# --------------------------------------------------------------------------------------------

_CUTLASS_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]((?:cute|cutlass)/[^>"]+)[>"]', re.M)


@dataclass(frozen=True)
class CutlassHeaders:
    """One place CUTLASS/CuTe headers were found: ``source`` says which (``flashinfer-python``,
    ``nvidia-cutlass``, ``CUTLASS_DIR``, ``CUTLASS_HOME``, ``reference/<name>``), ``include`` the
    folder holding ``cutlass/`` and ``cute/``, ``extra`` further include folders of the same
    checkout (``tools/util/include``), ``version`` from ``cutlass/version.h``."""

    source: str
    include: str
    extra: tuple[str, ...] = ()
    version: str | None = None

    @property
    def include_paths(self) -> list[str]:
        return [self.include, *self.extra]

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"extra": list(self.extra)}

    def describe(self) -> str:
        return f"CUTLASS {self.version or '(version unknown)'} from {self.source} ({self.include})"


def cutlass_includes(sources: list[dict[str, str]]) -> list[str]:
    """The CUTLASS/CuTe headers the sources include that they do not ship themselves
    (``cute/tensor.hpp``...), in order, each once."""
    own = {PurePosixPath(s["path"]).as_posix() for s in sources}
    found: dict[str, None] = {}
    for s in sources:
        if not s["path"].endswith(
            (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".cxx", ".c", ".inl")
        ):
            continue
        for m in _CUTLASS_INCLUDE.finditer(s["content"]):
            header = m.group(1)
            if header not in own:
                found[header] = None
    return list(found)


def _cutlass_version(include: Path) -> str | None:
    try:
        text = (include / "cutlass" / "version.h").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or None


def _headers_at(source: str, root: Path) -> CutlassHeaders | None:
    """A CUTLASS checkout (``root/include``) or an include folder itself (``root/cutlass``)."""
    for include in (root / "include", root):
        if (include / "cutlass" / "cutlass.h").is_file() and (include / "cute").is_dir():
            extra = root / "tools" / "util" / "include"
            if include == root and root.name == "include":
                extra = root.parent / "tools" / "util" / "include"
            return CutlassHeaders(
                source,
                str(include.resolve()),
                (str(extra.resolve()),) if extra.is_dir() else (),
                _cutlass_version(include),
            )
    return None


def _package_folder(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def find_cutlass(reference_root: str | Path | None = None) -> list[CutlassHeaders]:
    """Where CUTLASS/CuTe headers are on this machine, first the one a build uses: the
    ``CUTLASS_DIR`` and ``CUTLASS_HOME`` variables, flashinfer-python's bundled copy (what the
    contest image has), the ``nvidia-cutlass`` package, then a checkout under the workspace's
    ``reference/`` folder."""
    out: list[CutlassHeaders] = []
    for var in ("CUTLASS_DIR", "CUTLASS_HOME"):
        value = os.environ.get(var)
        if value:
            found = _headers_at(var, Path(value))
            if found:
                out.append(found)
    flashinfer = _package_folder("flashinfer")
    if flashinfer is not None:
        found = _headers_at("flashinfer-python", flashinfer / "data" / "cutlass")
        if found:
            out.append(found)
    library = _package_folder("cutlass_library")
    if library is not None:
        found = _headers_at("nvidia-cutlass", library / "source")
        if found:
            out.append(found)
    if reference_root:
        root = Path(reference_root)
        try:
            children = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            children = []
        for child in sorted(children, key=lambda p: (p.name.lower() != "cutlass", p.name)):
            found = _headers_at(f"reference/{child.name}", child)
            if found:
                out.append(found)
    seen: set[str] = set()
    unique = []
    for h in out:
        if h.include not in seen:
            seen.add(h.include)
            unique.append(h)
    return unique


CUTLASS_REMEDY = (
    "pip install flashinfer-python (its wheel ships CUTLASS, as the contest image does), set "
    "CUTLASS_DIR to a CUTLASS checkout, or clone CUTLASS under reference/cutlass"
)


@dataclass
class Toolchain:
    """Build tools on this machine (for CUDA/C++ solutions and Python DSLs)."""

    nvcc: str | None
    nvcc_version: str | None
    cxx: str | None
    ninja: str | None
    tvm_ffi: bool
    cutlass_dsl: bool
    tilelang: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        parts = [
            f"nvcc {self.nvcc_version or 'found'}" if self.nvcc else "no nvcc",
            "tvm-ffi" if self.tvm_ffi else "no tvm-ffi",
            "ninja" if self.ninja else "no ninja",
            "CuTe DSL" if self.cutlass_dsl else "no CuTe DSL",
            "TileLang" if self.tilelang else "no TileLang",
        ]
        return ", ".join(parts)


def detect(versions: bool = True) -> Toolchain:
    nvcc = find_nvcc()
    return Toolchain(
        nvcc=nvcc,
        nvcc_version=tool_version(nvcc) if nvcc and versions else None,
        cxx=shutil.which(os.environ.get("CXX") or "c++"),
        ninja=find_ninja(),
        tvm_ffi=has_module("tvm_ffi"),
        cutlass_dsl=has_module("cutlass"),
        tilelang=has_module("tilelang"),
    )


def limits(
    language: str,
    binding: str | None,
    sources: list[dict[str, str]],
    backend: str,
    gpu: bool,
    tools: Toolchain | None = None,
) -> str | None:
    """Why this machine cannot build or run the solution on ``backend`` (local | interpreter), or
    None. Modal's image decides for itself: its worker reports what it lacks."""
    try:
        builder = builder_for(language, binding)
    except ValueError:
        return None  # not a tool limit: the worker reports COMPILE_ERROR for it
    on_gpu = backend == "local" and gpu
    has_cu = language == "cuda" or any(s["path"].endswith((".cu", ".cuh")) for s in sources)
    if builder == "python":
        if language == "tilelang" and not on_gpu:
            return "TileLang solutions need an NVIDIA GPU; this run would use the CPU (Triton's interpreter)"
        for mod in sorted(unconditional_imports(sources)):
            if mod in GPU_ONLY_MODULES and not on_gpu:
                return (
                    f"imports {mod} ({GPU_ONLY_MODULES[mod]}), which needs an NVIDIA GPU; this run "
                    "would use the CPU (Triton's interpreter)"
                )
            if not has_module(mod):
                return f"imports {mod}, which is not installed in {sys.executable} (pip install {INSTALL_HINT.get(mod, mod)})"
        return None
    tools = tools or detect(versions=False)
    if has_cu and not on_gpu:
        return (
            "CUDA solutions need an NVIDIA GPU; this run would use the CPU (Triton's interpreter)"
        )
    if builder == "tvm-ffi" and not tools.tvm_ffi:
        return f"the tvm-ffi binding needs apache-tvm-ffi in {sys.executable} (pip install 'fibtui[cuda]')"
    if has_cu and tools.nvcc is None:
        return "no nvcc on this machine (set CUDA_HOME or put nvcc on PATH)"
    if tools.ninja is None:
        return "no ninja on this machine (pip install ninja): tvm-ffi and torch build with it"
    if not has_cu and tools.cxx is None:
        return "no C++ compiler (c++ or $CXX) on this machine"
    return None


def bench_version() -> str | None:
    """The installed flashinfer-bench's version (its distribution's, which the package's own
    ``__version__`` is not always: 0.1.2 from the package index says ``0.0.0.dev0``); None when it
    is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version("flashinfer-bench")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        spec = importlib.util.find_spec("flashinfer_bench")
    except (ImportError, ValueError):
        return None
    return "unknown version" if spec is not None else None
