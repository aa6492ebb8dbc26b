"""fibtui's own Triton kernels compile for the GPUs they run on, here, without a GPU: Triton's
compiler runs on the CPU down to the cubin (its bundled ptxas). The CPU interpreter, which the
rest of the suite uses, never compiles a kernel, and so it passed while a type annotation on a
kernel's parameter (``ptr: Any``) made every job on the H200 an INFRA_ERROR. The compile runs in a
child process without ``TRITON_INTERPRET``; a second check reads the source of every kernel in
fibtui/ and kernels/ for annotations Triton cannot take."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

COMPILE = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from fibtui.worker import gpu_kernels as k

out = {}
for arch in (90, 100):
    for name, (signature, constexprs) in k.SIGNATURES.items():
        fn = getattr(k, name)
        sig = dict(signature, **{c: "constexpr" for c in constexprs})
        try:
            src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=constexprs)
            compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32))
            out[f"{name}@sm_{arch}"] = sorted(compiled.asm)
        except Exception as exc:
            out[f"{name}@sm_{arch}"] = f"{type(exc).__name__}: {str(exc)[:400]}"
print(json.dumps(out))
"""


@pytest.mark.slow
def test_each_of_fibtuis_kernels_compiles_for_hopper_and_blackwell(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # compiled here, not read back
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", COMPILE],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    from fibtui.worker.gpu_kernels import SIGNATURES

    assert set(got) == {f"{n}@sm_{a}" for n in SIGNATURES for a in (90, 100)}
    failed = {name: why for name, why in got.items() if not isinstance(why, list)}
    assert not failed, failed
    assert all("cubin" in stages for stages in got.values()), got


def _jit_kernels(path: Path) -> list[ast.FunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if ast.unparse(target) in ("triton.jit", "jit", "triton.autotune"):
                    out.append(node)
    return out


def test_no_triton_kernel_carries_an_annotation_triton_cannot_read() -> None:
    """Every @triton.jit function in fibtui/ and the bundled kernels/: a parameter is annotated
    with ``tl.constexpr`` or not at all, and no return annotation (Triton resolves annotations
    as it compiles; ``Any``, ``int`` or a tensor type from outside the kernel break it or change
    its specialization)."""
    kernels = []
    for folder in ("fibtui", "kernels"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            kernels += [(path, fn) for fn in _jit_kernels(path)]
    names = {fn.name for _, fn in kernels}
    assert {"_fibtui_l2_flush", "_fibtui_refill", "_fibtui_keep"} <= names  # the scan sees them
    bad = []
    for path, fn in kernels:
        params = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        for arg in params:
            if arg.annotation is not None and "constexpr" not in ast.unparse(arg.annotation):
                bad.append(f"{path.relative_to(ROOT)}:{arg.lineno} {fn.name}({arg.arg}: ...)")
        if fn.returns is not None:
            bad.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name} -> ...")
    assert not bad, bad


def test_the_kernels_are_defined_in_one_module_only() -> None:
    """fibtui's own kernels live in fibtui/worker/gpu_kernels.py (where the compile test finds
    them); a kernel defined anywhere else in the package would escape it."""
    elsewhere = [
        f"{path.relative_to(ROOT)}: {fn.name}"
        for path in sorted((ROOT / "fibtui").rglob("*.py"))
        if path.name != "gpu_kernels.py"
        for fn in _jit_kernels(path)
    ]
    assert elsewhere == []
