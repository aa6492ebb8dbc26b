"""CUTLASS/CuTe C++ headers, which the contest image provides: where fibtui looks for them
(CUTLASS_DIR, CUTLASS_HOME, flashinfer-python's bundled copy, the nvidia-cutlass package, a
checkout under reference/), a build that includes them compiles with them on the include path
(recorded in the build record and its cache key), and one that finds none is UNSUPPORTED_HERE
with the remedy, never the kernel's COMPILE_ERROR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core import toolchain
from tests.conftest import run_cli
from tests.runner_helpers import make_tiny_workspace

needs_cpp = pytest.mark.skipif(
    toolchain.detect(versions=False).ninja is None or toolchain.detect(versions=False).cxx is None,
    reason="no ninja or C++ compiler here",
)

# a C++ solution that includes a CUTLASS header (cutlass/version.h is plain C++: it builds on
# the CPU); its factor is 1, from the header's own function
CPP_WITH_CUTLASS = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <cutlass/version.h>
using tvm::ffi::TensorView;

void scale(TensorView x, double alpha, TensorView y) {
  const float* px = static_cast<const float*>(x.data_ptr());
  float* py = static_cast<float*>(y.data_ptr());
  float one = static_cast<float>(cutlass::getVersionMajor()) / cutlass::getVersionMajor();
  int64_t n = 1;
  for (int i = 0; i < x.ndim(); ++i) n *= x.size(i);
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] * static_cast<float>(alpha) * one;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
"""


def fake_cutlass(root: Path, major: int = 3) -> Path:
    """A CUTLASS checkout's shape: include/cutlass/cutlass.h, include/cute/, a version.h."""
    inc = root / "include"
    (inc / "cute").mkdir(parents=True)
    (inc / "cutlass").mkdir(parents=True)
    (inc / "cute" / "tensor.hpp").write_text("#pragma once\n")
    (inc / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    (inc / "cutlass" / "version.h").write_text(
        f"#pragma once\n#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR 9\n"
        "#define CUTLASS_PATCH 1\nnamespace cutlass {\n"
        f"inline int getVersionMajor() {{ return CUTLASS_MAJOR; }}\n}}\n"
    )
    (root / "tools" / "util" / "include").mkdir(parents=True)
    return root


def test_the_headers_a_solution_includes_and_does_not_ship() -> None:
    sources = [
        {
            "path": "kernel.cu",
            "content": '#include <cute/tensor.hpp>\n  # include "cutlass/gemm.h"\n',
        },
        {"path": "cutlass/gemm.h", "content": "#pragma once\n"},  # its own copy
        {
            "path": "helper.cuh",
            "content": "#include <cutlass/numeric_types.h>\n#include <cuda.h>\n",
        },
        {"path": "notes.md", "content": "#include <cutlass/not_code.h>\n"},
    ]
    assert toolchain.cutlass_includes(sources) == ["cute/tensor.hpp", "cutlass/numeric_types.h"]
    assert toolchain.cutlass_includes([{"path": "k.cu", "content": "#include <cuda.h>\n"}]) == []


def test_where_cutlass_headers_are_found_and_in_which_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(toolchain, "_package_folder", lambda name: None)
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.delenv("CUTLASS_HOME", raising=False)
    reference = tmp_path / "reference"
    fake_cutlass(reference / "cutlass", major=4)
    (reference / "other-repo").mkdir()
    [found] = toolchain.find_cutlass(reference)
    assert found.source == "reference/cutlass" and found.version == "4.9.1"
    assert found.include.endswith("reference/cutlass/include") and len(found.extra) == 1
    monkeypatch.setenv("CUTLASS_DIR", str(fake_cutlass(tmp_path / "mine", major=3)))
    first, second = toolchain.find_cutlass(reference)
    assert (first.source, first.version, second.source) == (
        "CUTLASS_DIR",
        "3.9.1",
        "reference/cutlass",
    )
    # an include folder itself works too; a folder without cutlass/cutlass.h is no checkout
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "mine" / "include"))
    assert toolchain.find_cutlass()[0].include == str((tmp_path / "mine" / "include").resolve())
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "nothing-here"))
    assert toolchain.find_cutlass() == []


def _candidate(root: Path, name: str, content: str) -> Path:
    folder = root / "candidates" / name
    (folder / "solution" / "cpp").mkdir(parents=True)
    (folder / "solution" / "cpp" / "kernel.cpp").write_text(content)
    (folder / "config.toml").write_text(
        f'[solution]\nname = "{name}"\ndefinition = "tiny_scale"\nauthor = "t"\n'
        '[build]\nlanguage = "cpp"\nentry_point = "kernel.cpp::scale"\n'
    )
    return folder


@needs_cpp
@pytest.mark.slow
def test_a_build_that_includes_cutlass_uses_the_headers_found_and_records_them(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tvm_ffi")
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MAX_JOBS", "1")
    monkeypatch.setenv("CUTLASS_DIR", str(fake_cutlass(tmp_path / "cutlass-a", major=3)))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2,))
    cand = _candidate(root, "cpp_cutlass", CPP_WITH_CUTLASS)
    args = ("run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon", "--json")
    code, out, err = run_cli(capsys, *args, "--workloads", "all", "--solution", str(cand))
    assert code == 0, err
    [job] = json.loads(out)["jobs"]
    assert job["status"] == "PASSED"
    build = job["timing"]["build"]
    assert build["cached"] is False
    assert build["cutlass"]["source"] == "CUTLASS_DIR" and build["cutlass"]["version"] == "3.9.1"
    assert build["cutlass"]["include"] == str((tmp_path / "cutlass-a" / "include").resolve())
    # other headers are another build (the include folder is part of the cache key)
    monkeypatch.setenv("CUTLASS_DIR", str(fake_cutlass(tmp_path / "cutlass-b", major=3)))
    code, out, err = run_cli(capsys, *args, "--workloads", "all", "--solution", str(cand))
    assert code == 0, err
    build_b = json.loads(out)["jobs"][0]["timing"]["build"]
    assert build_b["cached"] is False and build_b["cache_key"] != build["cache_key"]


@needs_cpp
@pytest.mark.slow
def test_flashinfer_pythons_bundled_headers_serve_a_build(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where flashinfer-python is installed (the contest image has it), its bundled CUTLASS is
    what a build that includes CUTLASS uses when no variable names another."""
    pytest.importorskip("tvm_ffi")
    if not any(h.source == "flashinfer-python" for h in toolchain.find_cutlass()):
        pytest.skip("flashinfer-python's bundled CUTLASS is not installed here")
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.delenv("CUTLASS_HOME", raising=False)
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MAX_JOBS", "1")
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2,))
    cand = _candidate(root, "cpp_cutlass", CPP_WITH_CUTLASS)
    code, out, err = run_cli(
        capsys,
        *("run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon", "--json"),
        *("--workloads", "all", "--solution", str(cand)),
    )
    assert code == 0, err
    [job] = json.loads(out)["jobs"]
    assert job["status"] == "PASSED"
    assert job["timing"]["build"]["cutlass"]["source"] == "flashinfer-python"


def test_a_build_that_finds_no_cutlass_is_unsupported_here_with_the_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned in this process (the worker's own build code): no headers anywhere -> ToolLimit
    (UNSUPPORTED_HERE) naming the header and what to install, before anything compiles."""
    from fibtui.worker import native
    from fibtui.worker.build_job import ToolLimit

    monkeypatch.setattr(toolchain, "_package_folder", lambda name: None)
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.delenv("CUTLASS_HOME", raising=False)
    monkeypatch.setattr(toolchain, "find_ninja", lambda: "/usr/bin/ninja")
    monkeypatch.setattr(toolchain, "has_module", lambda name: True)
    sources = [{"path": "kernel.cpp", "content": CPP_WITH_CUTLASS}]
    with pytest.raises(ToolLimit) as caught:
        native.prepare(
            "candidate-0",
            "cpp_cutlass",
            "cpp",
            "tvm-ffi",
            "kernel.cpp",
            "scale",
            True,
            sources,
            "digest",
            device_type="cpu",
            cache_root=tmp_path,
            reference_root=str(tmp_path / "reference"),
        )
    assert caught.value.status == "UNSUPPORTED_HERE"
    assert "includes cutlass/version.h" in str(caught.value)
    assert "pip install flashinfer-python" in str(caught.value)
    limit = caught.value.limit
    assert limit is not None and limit.kind == "headers" and limit.needs == ("cutlass/version.h",)


def test_status_lists_the_cutlass_headers_found(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    fake_cutlass(root / "reference" / "cutlass", major=4)
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.delenv("CUTLASS_HOME", raising=False)
    code, out, err = run_cli(capsys, "status", "--workspace", str(root), "--json")
    assert code == 0, err
    found = json.loads(out)["backends"]["cutlass"]
    assert any(h["source"] == "reference/cutlass" and h["version"] == "4.9.1" for h in found)
    code, out, _ = run_cli(capsys, "status", "--workspace", str(root))
    assert "CUTLASS" in out
