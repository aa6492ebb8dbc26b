"""Solutions built the way flashinfer-bench builds them: Python/Triton packages with relative
imports, C++ through TVM FFI and torch extensions (on the CPU here), the build cache, compiler
errors, tool limits (UNSUPPORTED_HERE), contest-style candidates and ``check --deep``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fibtui.core import toolchain
from fibtui.core.workspace import check_topology, find_workspace_root
from tests.conftest import REPO, run_cli
from tests.runner_helpers import GOOD_TRITON, TINY, make_tiny_workspace

SCALE_KERNEL = """import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha * FACTOR, mask=mask)
"""

TVM_CPP = """#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
using tvm::ffi::TensorView;

void scale(TensorView x, double alpha, TensorView y) {
  const float* px = static_cast<const float*>(x.data_ptr());
  float* py = static_cast<float*>(y.data_ptr());
  int64_t n = 1;
  for (int i = 0; i < x.ndim(); ++i) n *= x.size(i);
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] * static_cast<float>(alpha);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
"""

TORCH_CPP = """#include <torch/extension.h>

void scale(torch::Tensor x, double alpha, torch::Tensor y) { y.copy_(x * alpha); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
"""


def contest_candidate(
    root: Path,
    name: str,
    files: dict[str, str],
    *,
    language: str = "triton",
    entry: str = "kernel.py::scale",
    binding: str | None = None,
    definition: str = TINY,
) -> Path:
    """``candidates/<name>/``: config.toml + solution/<language>/<files>."""
    folder = root / "candidates" / name
    src = folder / "solution" / language
    src.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    lines = [
        f'[solution]\nname = "{name}"\ndefinition = "{definition}"\nauthor = "tests"\n',
        f'[build]\nlanguage = "{language}"\nentry_point = "{entry}"',
    ]
    if binding:
        lines.append(f'binding = "{binding}"')
    (folder / "config.toml").write_text("\n".join(lines) + "\n")
    return folder


def package(factor: str, relative: bool = True) -> dict[str, str]:
    """A Triton package: __init__.py, the kernel module and a constants module, both imported by
    kernel.py (relatively, or by plain name)."""
    imp = (
        "from .consts import FACTOR\nfrom .kern import scale_kernel\n"
        if relative
        else "from consts import FACTOR\nfrom kern import scale_kernel\n"
    )
    return {
        "__init__.py": "",
        "consts.py": f"FACTOR = {factor}\n",
        "kern.py": ("from .consts import FACTOR\n" if relative else "from consts import FACTOR\n")
        + SCALE_KERNEL,
        "kernel.py": "import triton\n"
        + imp
        + (
            "\n\ndef scale(x, alpha, y):\n"
            "    n = x.numel()\n"
            "    scale_kernel[(triton.cdiv(n, 256),)](x, y, alpha, n, BLOCK=256)\n"
        ),
    }


def run_json(capsys, root: Path, *args: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(
        capsys, "run", "--workspace", str(root), "--backend", "interpreter", "--json", *args
    )
    return code, (json.loads(out) if out.strip() else {}), err


def by_solution(record: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for j in record["jobs"]:
        out.setdefault(j["solution"], set()).add(j["status"])
    return out


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    # one compiler process at a time (ninja's MAX_JOBS, read by tvm-ffi and torch): the suite's
    # timing-sensitive tests run beside these on CI's two cores
    monkeypatch.setenv("MAX_JOBS", "1")
    return tmp_path / "cache"


# --------------------------------------------------------------------------------------------
# Python and Triton solutions as packages
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_triton_package_with_relative_imports_passes(tmp_path: Path, capsys, cache: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    contest_candidate(root, "pkg_v2", package("1.0"))
    code, record, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/pkg_v2"
    )
    assert code == 0, err
    assert by_solution(record) == {"pkg_v2": {"PASSED"}}
    # the worker says how it built it and what its first (JIT-compiling) call cost
    timing = record["jobs"][0]["timing"]
    assert timing["build"]["builder"] == "python" and timing["build"]["build_s"] > 0
    assert timing["first_call_s"] > 0
    assert "first_call_s" not in record["jobs"][1]["timing"]  # only the first call in the worker


@pytest.mark.slow
def test_two_solutions_with_the_same_module_names_keep_their_own_code(
    tmp_path: Path, capsys, cache: Path
) -> None:
    """Baseline and candidate share one worker: each ``consts``/``kern`` module is its own, whether
    imported relatively or by plain name (the second would read the first's FACTOR otherwise)."""
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    contest_candidate(root, "right", package("1.0", relative=False))
    contest_candidate(root, "wrong", package("1.1", relative=False))
    contest_candidate(root, "right_rel", package("1.0"))
    contest_candidate(root, "wrong_rel", package("1.1"))
    code, record, err = run_json(
        capsys,
        root,
        "--workloads",
        "all",
        "--baseline",
        "candidates/right",
        "--solution",
        "candidates/wrong",
        "--solution",
        "candidates/right_rel",
        "--solution",
        "candidates/wrong_rel",
        "--workers",
        "1",
    )
    assert code == 1, err  # a wrong candidate: not every job passed
    assert by_solution(record) == {
        "right": {"PASSED"},
        "wrong": {"INCORRECT_NUMERICAL"},
        "right_rel": {"PASSED"},
        "wrong_rel": {"INCORRECT_NUMERICAL"},
    }
    # all four ran in one worker process
    assert (
        len(
            {
                j["timing"]["environment"].get("pid") or j["timing"].get("slot")
                for j in record["jobs"]
            }
        )
        == 1
    )


def test_entry_points_as_module_paths_and_packages(tmp_path: Path) -> None:
    from fibtui.worker.build import BuildError, split_entry

    sources = [
        {"path": "kernel.py", "content": ""},
        {"path": "pkg/__init__.py", "content": ""},
        {"path": "pkg/impl.py", "content": ""},
    ]
    assert split_entry("kernel.py::run", sources) == ("kernel.py", "run")
    assert split_entry("pkg.impl::run", sources) == ("pkg/impl.py", "run")
    assert split_entry("pkg::run", sources) == ("pkg/__init__.py", "run")
    for bad in ("kernel.py", "a::b::c", "missing.py::run", "::run", "kernel.py::"):
        with pytest.raises(BuildError):
            split_entry(bad, sources)


def test_import_errors_name_the_file_and_line_and_missing_modules_are_tool_limits(
    tmp_path: Path,
) -> None:
    from fibtui.worker.build import BuildError, ToolLimit, build

    def sol(files: dict[str, str]) -> dict:
        return {
            "name": "s",
            "spec": {"language": "python", "entry_point": "kernel.py::run"},
            "sources": [{"path": k, "content": v} for k, v in files.items()],
        }

    with pytest.raises(BuildError) as err:
        build(
            "candidate-0",
            sol(
                {
                    "kernel.py": "from .helper import X\n\ndef run(): pass\n",
                    "helper.py": "A = 1\nX = undefined_name\n",
                }
            ),
            tmp_path,
        )
    assert type(err.value) is BuildError and err.value.status == "COMPILE_ERROR"
    assert err.value.where == "helper.py:2" and "NameError" in str(err.value)
    with pytest.raises(BuildError) as err:
        build("candidate-1", sol({"kernel.py": "def run(:\n"}), tmp_path)
    assert err.value.where == "kernel.py:1" and "SyntaxError" in str(err.value)
    with pytest.raises(ToolLimit) as lim:
        build(
            "candidate-2",
            sol({"kernel.py": "import surely_not_installed_dsl\n\ndef run(): pass\n"}),
            tmp_path,
        )
    assert lim.value.status == "UNSUPPORTED_HERE" and "surely_not_installed_dsl" in str(lim.value)
    # a module of the solution's own that is missing is the solution's fault, not the machine's
    with pytest.raises(BuildError) as err:
        build(
            "candidate-3",
            sol(
                {
                    "kernel.py": "from . import helper2\n\ndef run(): pass\n",
                    "helper2/__init__.py": "from .sub import Y\n",
                }
            ),
            tmp_path,
        )
    assert type(err.value) is BuildError


def test_the_builder_is_chosen_as_flashinfer_bench_chooses() -> None:
    assert toolchain.builder_for("triton", None) == "python"
    assert toolchain.builder_for("tilelang", None) == "python"
    assert toolchain.builder_for("cuda", None) == "tvm-ffi"
    assert toolchain.builder_for("cuda", "tvm-ffi") == "tvm-ffi"
    assert toolchain.builder_for("cpp", "torch") == "torch"
    with pytest.raises(ValueError):
        toolchain.builder_for("cuda", "pybind")
    with pytest.raises(ValueError):
        toolchain.builder_for("rust", None)


# --------------------------------------------------------------------------------------------
# Tool limits: refused up front, a status of their own, no verdict
# --------------------------------------------------------------------------------------------


def test_a_cuda_solution_without_a_gpu_is_refused_before_the_run_starts(
    tmp_path: Path, capsys, cache: Path
) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    contest_candidate(
        root,
        "cuda_v1",
        {"kernel.cu": "__global__ void k() {}\n", "binding.py": "# placeholder\n"},
        language="cuda",
        entry="kernel.cu::scale",
    )
    code, out, err = run_cli(
        capsys,
        "run",
        "--workspace",
        str(root),
        "--backend",
        "interpreter",
        "--solution",
        "candidates/cuda_v1",
    )
    assert code == 2
    assert err.strip().splitlines() == [
        "fibtui: error: UNSUPPORTED_HERE: cuda_v1 (cuda) cannot run on this machine: CUDA solutions need an NVIDIA "
        "GPU; this run would use the CPU (Triton's interpreter)"
    ]
    assert not (root / "optimize_ops" / "runs").exists()  # nothing was snapshotted or started


def test_the_worker_reports_unsupported_here_not_compile_error(tmp_path: Path) -> None:
    """What only the worker can see (a Modal image, its own Python): the worker's own status."""
    pytest.importorskip("torch")
    from fibtui.worker.engine import execute
    from tests.runner_helpers import TINY_DEFINITION

    request = {
        "config": {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
        },
        "definition": TINY_DEFINITION,
        "solutions": [
            {
                "id": "candidate-0",
                "name": "cu",
                "spec": {"language": "cuda", "entry_point": "kernel.cu::scale"},
                "sources": [{"path": "kernel.cu", "content": "__global__ void k() {}\n"}],
            },
            {
                "id": "candidate-1",
                "name": "dsl",
                "spec": {"language": "python", "entry_point": "kernel.py::scale"},
                "sources": [
                    {
                        "path": "kernel.py",
                        "content": "import surely_not_installed_dsl\n\ndef scale(x, a, y): pass\n",
                    }
                ],
            },
            {
                "id": "candidate-2",
                "name": "hardcoded_cuda",
                "spec": {"language": "python", "entry_point": "kernel.py::scale"},
                "sources": [
                    {
                        "path": "kernel.py",
                        "content": "import torch\n\ndef scale(x, a, y):\n"
                        "    y.copy_((x * a).to('cuda'))\n",
                    }
                ],
            },
        ],
        "jobs": [
            {
                "job_id": "0|w",
                "repeat": 0,
                "workload": {
                    "uuid": "w",
                    "axes": {"n": 2},
                    "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
                },
            }
        ],
    }
    out = execute(request)
    assert {sid: r["ok"] for sid, r in out["load"].items()} == {
        "candidate-0": False,
        "candidate-1": False,
        "candidate-2": True,
    }
    results = {r["solution_id"]: r for r in out["jobs"][0]["results"]}
    assert {sid: r["status"] for sid, r in results.items()} == {
        sid: "UNSUPPORTED_HERE" for sid in results
    }
    assert "need an NVIDIA GPU" in results["candidate-0"]["error"]
    assert "surely_not_installed_dsl" in results["candidate-1"]["error"]
    assert "needs an NVIDIA GPU" in results["candidate-2"]["error"]


def test_unsupported_rows_give_no_verdict_and_blame_no_kernel() -> None:
    from fibtui.core.stats import NOT_JUDGED, paired_verdict
    from tests.typed_rows import typed

    base = [{"uuid": f"w{i}", "status": "PASSED", "latency_ms": 1.0, "repeat": 0} for i in range(4)]
    cand = [
        {
            "uuid": f"w{i}",
            "status": "UNSUPPORTED_HERE",
            "repeat": 0,
            "error": "CUDA solutions need an NVIDIA GPU",
        }
        for i in range(4)
    ]
    c = paired_verdict(typed(base), typed(cand))
    assert c.verdict == NOT_JUDGED
    assert c.recommendation().startswith(
        "not judged here, not a kernel failure: CUDA solutions need an NVIDIA GPU"
    )


def test_limits_say_what_this_machine_lacks() -> None:
    tools = toolchain.Toolchain(
        nvcc=None,
        nvcc_version=None,
        cxx="/usr/bin/c++",
        ninja=None,
        tvm_ffi=False,
        cutlass_dsl=False,
        tilelang=False,
    )
    cu = [{"path": "kernel.cu", "content": ""}]
    cpp = [{"path": "kernel.cpp", "content": ""}]
    assert "need an NVIDIA GPU" in toolchain.limits("cuda", None, cu, "interpreter", False, tools)
    assert "apache-tvm-ffi" in toolchain.limits("cuda", None, cu, "local", True, tools)
    assert "nvcc" in toolchain.limits("cuda", "torch", cu, "local", True, tools)
    assert "ninja" in toolchain.limits("cpp", "torch", cpp, "interpreter", False, tools)
    cute = [{"path": "kernel.py", "content": "import cutlass.cute as cute\n\ndef run(): pass\n"}]
    assert "needs an NVIDIA GPU" in toolchain.limits(
        "python", None, cute, "interpreter", False, tools
    )
    optional = [
        {
            "path": "kernel.py",
            "content": "try:\n    import cutlass\nexcept ImportError:\n    cutlass = None\n",
        }
    ]
    assert toolchain.limits("python", None, optional, "interpreter", False, tools) is None
    own = [
        {"path": "kernel.py", "content": "import helper\n"},
        {"path": "helper.py", "content": ""},
    ]
    assert toolchain.limits("triton", None, own, "interpreter", False, tools) is None


# --------------------------------------------------------------------------------------------
# C++ through TVM FFI and torch extensions (on the CPU), the build cache, compiler errors
# --------------------------------------------------------------------------------------------

needs_cpp = pytest.mark.skipif(
    toolchain.detect(versions=False).ninja is None or toolchain.detect(versions=False).cxx is None,
    reason="no ninja or C++ compiler here",
)


@needs_cpp
@pytest.mark.slow
def test_a_tvm_ffi_solution_builds_once_and_runs_from_the_cache(
    tmp_path: Path, capsys, cache: Path
) -> None:
    pytest.importorskip("tvm_ffi")
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 3))
    contest_candidate(
        root,
        "cpp_v1",
        {"kernel.cpp": TVM_CPP, "binding.py": "# the starter kit's placeholder\n"},
        language="cpp",
        entry="kernel.cpp::scale",
    )
    code, first, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/cpp_v1"
    )
    assert code == 0, err
    assert by_solution(first) == {"cpp_v1": {"PASSED"}}
    build = first["jobs"][0]["timing"]["build"]
    assert build["builder"] == "tvm-ffi" and build["cached"] is False and build["compile_s"] > 0
    run_folder = root / "optimize_ops" / "runs" / first["run_id"]
    assert (run_folder / "builds" / "candidate-cpp_v1.log").read_text().startswith("compiled")
    assert "cpp_v1: tvm-ffi build compiled in" in err
    code, second, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/cpp_v1"
    )
    assert code == 0, err
    build = second["jobs"][0]["timing"]["build"]
    assert build["cached"] is True and build["compile_s"] == 0.0 and build["build_s"] < 0.5
    assert "from the build cache" in err
    # one cache entry, keyed by the sources: an edit compiles a new one
    assert len([p for p in (cache / "builds" / "tvm_ffi").iterdir() if p.is_dir()]) == 1


@needs_cpp
@pytest.mark.slow
def test_a_compile_error_names_the_first_compiler_error_line(
    tmp_path: Path, capsys, cache: Path
) -> None:
    pytest.importorskip("tvm_ffi")
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    broken = TVM_CPP.replace(
        "static_cast<float>(alpha);", "static_cast<float>(alpha) + not_declared;"
    )
    contest_candidate(
        root, "cpp_bad", {"kernel.cpp": broken}, language="cpp", entry="kernel.cpp::scale"
    )
    code, record, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/cpp_bad"
    )
    assert code == 1
    job = record["jobs"][0]
    assert job["status"] == "COMPILE_ERROR"
    assert job["error"].startswith("kernel.cpp:10: error: ") and "not_declared" in job["error"]
    log = (
        root / "optimize_ops" / "runs" / record["run_id"] / "builds" / "candidate-cpp_bad.log"
    ).read_text()
    assert (
        "not_declared" in log and "ninja" in log
    )  # the whole compiler output is kept with the run


@needs_cpp
@pytest.mark.slow
def test_a_torch_extension_solution_passes(tmp_path: Path, capsys, cache: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2,))
    contest_candidate(
        root,
        "cpp_torch",
        {"kernel.cpp": TORCH_CPP},
        language="cpp",
        entry="kernel.cpp::scale",
        binding="torch",
    )
    code, record, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/cpp_torch"
    )
    assert code == 0, err
    assert by_solution(record) == {"cpp_torch": {"PASSED"}}
    assert record["jobs"][0]["timing"]["build"]["builder"] == "torch"


def test_first_compiler_error_lines() -> None:
    from fibtui.worker.native import first_compiler_error

    folder = Path("/tmp/fibtui-build/x")
    nvcc = (
        "[1/2] nvcc ... -c /tmp/fibtui-build/x/kernel.cu -o cuda_0.o\nFAILED: cuda_0.o\n"
        '/tmp/fibtui-build/x/kernel.cu(41): error: identifier "y" is undefined\n'
        "/tmp/fibtui-build/x/kernel.cu(52): error: too few arguments\n2 errors detected"
    )
    assert first_compiler_error(nvcc, folder) == 'kernel.cu:41: error: identifier "y" is undefined'
    gcc = (
        "In file included from /tmp/fibtui-build/x/kernel.cpp:2:\n"
        "/tmp/fibtui-build/x/util.h:7:3: error: 'foo' was not declared in this scope\n"
    )
    assert (
        first_compiler_error(gcc, folder) == "util.h:7: error: 'foo' was not declared in this scope"
    )
    fatal = "/usr/include/x.h:1:10: fatal error: cute/tensor.hpp: No such file or directory"
    assert (
        first_compiler_error(fatal, folder)
        == "/usr/include/x.h:1: error: cute/tensor.hpp: No such file or directory"
    )
    ptxas = "ptxas error   : Instruction 'tcgen05.mma' not supported on .target 'sm_90'"
    assert (
        first_compiler_error(ptxas, folder)
        == "ptxas error: Instruction 'tcgen05.mma' not supported on .target 'sm_90'"
    )
    assert (
        first_compiler_error("kernel.o: undefined reference to `cublasCreate_v2'", folder)
        == "link error: undefined reference to `cublasCreate_v2'"
    )
    assert first_compiler_error("all good\n", folder) is None


# --------------------------------------------------------------------------------------------
# Several solutions in one workspace; check --deep
# --------------------------------------------------------------------------------------------


def test_contest_style_candidates_are_accepted_and_listed(tmp_path: Path, capsys) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    contest_candidate(root, "pkg_v2", package("1.0"))
    (root / "candidates" / "bare_v3").mkdir(parents=True)
    (root / "candidates" / "bare_v3" / "kernel.py").write_text(GOOD_TRITON)
    topo = check_topology(root)
    assert topo.valid and topo.kind == "single" and not topo.candidate_problems
    assert [(c.name, c.kind) for c in topo.candidates] == [
        ("bare_v3", "sources"),
        ("pkg_v2", "config"),
    ]
    code, out, _ = run_cli(capsys, "check", str(root), "--json")
    assert code == 0 and json.loads(out)["valid"] is True
    code, out, _ = run_cli(capsys, "status", "--workspace", str(root), "--json")
    cands = {c["name"]: c for c in json.loads(out)["candidates"]}
    assert (
        cands["pkg_v2"]["kind"] == "config" and cands["pkg_v2"]["entry_point"] == "kernel.py::scale"
    )
    assert cands["bare_v3"]["kind"] == "sources"
    # standing inside a contest-style candidate still finds the workspace it belongs to
    assert (
        find_workspace_root(root / "candidates" / "pkg_v2" / "solution" / "triton")[0]
        == root.resolve()
    )


def test_broken_candidates_are_problems_of_their_own(tmp_path: Path, capsys) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    contest_candidate(root, "other_def", package("1.0"), definition="some_other_definition")
    (root / "candidates" / "no_entry").mkdir(parents=True)
    (root / "candidates" / "no_entry" / "helper.py").write_text("X = 1\n")
    topo = check_topology(root)
    assert topo.valid  # the solution itself is fine
    problems = [str(p) for p in topo.candidate_problems]
    assert any(
        "other_def/config.toml" in p and "solution.definition" in p and "some_other_definition" in p
        for p in problems
    )
    assert any("no_entry" in p and "has no kernel.py" in p for p in problems)
    code, out, _ = run_cli(capsys, "check", str(root))
    assert code == 1 and "some_other_definition" in out


@pytest.mark.slow
def test_check_deep_imports_every_solution_and_names_the_file_and_line(
    tmp_path: Path, capsys, cache: Path
) -> None:
    root = make_tiny_workspace(tmp_path / "ws")
    contest_candidate(root, "pkg_ok", package("1.0"))
    bad = package("1.0")
    bad["consts.py"] = "FACTOR = 1.0\nOOPS = FACTOR + missing_name\n"
    contest_candidate(root, "pkg_bad", bad)
    contest_candidate(
        root,
        "needs_dsl",
        {"kernel.py": "import surely_not_installed_dsl\n\ndef scale(x, a, y): pass\n"},
    )
    code, out, _ = run_cli(capsys, "check", str(root), "--deep", "--json")
    info = json.loads(out)
    assert code == 1 and info["valid"] is False
    builds = {b["name"]: b for b in info["builds"]}
    assert builds["tiny_v1"]["ok"] and builds["pkg_ok"]["ok"]
    assert builds["pkg_bad"]["status"] == "COMPILE_ERROR"
    assert builds["pkg_bad"]["where_path"].endswith(
        "candidates/pkg_bad/solution/triton/consts.py:2"
    )
    assert builds["needs_dsl"]["status"] == "UNSUPPORTED_HERE"
    assert info["problems"] == [
        f"{builds['pkg_bad']['where_path']}: pkg_bad: COMPILE_ERROR: {builds['pkg_bad']['error']}"
    ]
    assert len(info["notes"]) == 1 and "surely_not_installed_dsl" in info["notes"][0]


def test_the_worker_stays_importable_without_the_core_beyond_its_table() -> None:
    """fibtui.worker.build, .native and the evaluators' table import only the standard library,
    fibtui.core.toolchain, fibtui.core.gpuarch and fibtui.core.presets (no polars, rich or
    textual): they travel to bare GPU hosts and Modal containers."""
    code = (
        "import json, sys\nimport fibtui.worker.build, fibtui.worker.native, fibtui.core.presets\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('polars', 'rich', 'textual', 'torch', 'triton', 'fibtui'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    mods = json.loads(out.stdout)
    assert [m for m in mods if not m.startswith("fibtui")] == []
    assert [m for m in mods if m.startswith("fibtui.core")] == [
        "fibtui.core",
        "fibtui.core.gpuarch",
        "fibtui.core.presets",
        "fibtui.core.toolchain",
    ]


@needs_cpp
@pytest.mark.slow
def test_references_are_computed_while_a_build_compiles(tmp_path: Path) -> None:
    """The load op's prefetch: while a C++ build compiles, the reference outputs of the first
    workloads go into the cache, so the first job finds them there."""
    pytest.importorskip("tvm_ffi")
    from fibtui.worker.engine import Engine, EngineConfig
    from tests.runner_helpers import TINY_DEFINITION

    workload = {
        "uuid": "w-pre",
        "axes": {"n": 3},
        "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
    }
    config = EngineConfig.from_json(
        {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
            "cache_dir": str(tmp_path / "ref"),
            "build_cache_dir": str(tmp_path / "builds"),
        }
    )
    sol = {
        "id": "candidate-0",
        "name": "cpp",
        "spec": {"language": "cpp", "entry_point": "kernel.cpp::scale"},
        "sources": [{"path": "kernel.cpp", "content": TVM_CPP}],
    }
    with Engine(config) as engine:
        report = engine.load(TINY_DEFINITION, [sol], prefetch=[workload])
        assert report["candidate-0"]["ok"] and report["candidate-0"]["build"]["cached"] is False
        assert engine.reference.misses == 1  # computed during the load, beside the compile
        assert len(list((tmp_path / "ref").rglob("*.pt"))) == 1
        out = engine.run_job({"job_id": "0|w-pre", "workload": workload, "repeat": 0})
        assert out["results"][0]["status"] == "PASSED"
        # the prefetched outputs: from the worker's memory, neither recomputed nor read back
        assert engine.reference.memory_hits == 1 and engine.reference.misses == 1
    with Engine(
        config
    ) as engine:  # a second load of the same sources: from the cache, no prefetch needed
        report = engine.load(TINY_DEFINITION, [sol], prefetch=[workload])
        assert report["candidate-0"]["build"]["cached"] is True and engine.reference.misses == 0


def test_the_entry_point_signature_is_checked_as_flashinfer_bench_checks_it() -> None:
    from fibtui.worker.build import BuildError, check_signature

    source = (
        "def dps(x, alpha, y): ...\n"
        "def dps_extra(x, alpha, y, debug=False): ...\n"
        "def too_few(x, y): ...\n"
        "def kw_only(x, alpha, *, y): ...\n"
        "def variadic(*args): ...\n"
        "def returns_two(x, alpha) -> tuple[int, int]: ...\n"
        "def returns_one(x, alpha) -> int: ...\n"
        "def returns_none(x, alpha) -> None: ...\n"
    )
    fns: dict = {}
    # this test module postpones annotations (a string is "one output"); these functions must not
    exec(compile(source, "<signatures>", "exec", dont_inherit=True), fns)
    dps, dps_extra, too_few, kw_only = fns["dps"], fns["dps_extra"], fns["too_few"], fns["kw_only"]
    variadic, returns_two, returns_one, returns_none = (
        fns["variadic"],
        fns["returns_two"],
        fns["returns_one"],
        fns["returns_none"],
    )

    check_signature(dps, 2, 1, True)
    check_signature(dps_extra, 2, 1, True)
    check_signature(variadic, 2, 1, True)
    check_signature(returns_two, 2, 2, False)
    check_signature(returns_one, 2, 1, False)
    check_signature(
        len, 1, 1, False
    )  # a builtin: no signature to check, as for compiled entry points
    for fn, n_in, n_out, is_dps in (
        (too_few, 2, 1, True),
        (kw_only, 2, 1, True),
        (dps, 2, 1, False),
        (returns_two, 2, 1, False),
        (returns_one, 2, 2, False),
        (returns_none, 2, 1, False),
    ):
        with pytest.raises(BuildError):
            check_signature(fn, n_in, n_out, is_dps)
    ns: dict = {}
    exec(
        compile(
            "from __future__ import annotations\ndef postponed(x, alpha) -> tuple[int, int]: ...\n",
            "<postponed>",
            "exec",
            dont_inherit=True,
        ),
        ns,
    )
    with pytest.raises(BuildError):  # a string annotation counts as one output there too
        check_signature(ns["postponed"], 2, 2, False)


@pytest.mark.slow
def test_a_wrong_signature_is_a_compile_error_before_any_call(
    tmp_path: Path, capsys, cache: Path
) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    contest_candidate(root, "two_args", {"kernel.py": "def scale(x, y):\n    y.copy_(x)\n"})
    code, record, err = run_json(
        capsys, root, "--workloads", "all", "--solution", "candidates/two_args"
    )
    assert code == 1
    assert record["jobs"][0]["status"] == "COMPILE_ERROR"
    assert "must take 3 positional arguments" in record["jobs"][0]["error"]
