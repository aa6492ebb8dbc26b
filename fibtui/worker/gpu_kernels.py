"""fibtui's own Triton kernels: the timer's delimiters, the rotation's copies, the official
timing's zero-fill. Every kernel a profile must tell from the solution's work is named
``_fibtui_*``, and all of them live here, so one test (tests/test_gpu_kernels.py) compiles each
for a Hopper and a Blackwell GPU on a machine without one (Triton's compiler runs on the CPU
down to the cubin).

**No annotations on a kernel's parameters** except ``tl.constexpr``: Triton reads them, and one
it cannot resolve inside a kernel (``ptr: Any``) fails the compile. On the H200 that made every
job of every run an INFRA_ERROR (2026-12-04), while the CPU interpreter, which does not compile,
passed every test. mypy is told (pyproject.toml) that this module's kernels are untyped.

The two copy kernels take ``n`` unspecialized (``do_not_specialize``): one compiled kernel then
copies any length, so the rotation compiles each once per process and launches it straight
after, instead of going through Triton's JIT for every arena of every job (fibtui.worker.rotation).

Imported only where a GPU path needs the kernels: importing it imports Triton.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _fibtui_l2_flush(ptr, sink, n, BLOCK: tl.constexpr):
    # Read (not write) twice the L2: the cache ends up full of clean lines, so the next call pays
    # cold misses but never the write-back of a dirty flush buffer. The store below is never
    # taken (the buffer holds zeros) but keeps the loads alive.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(tl.load(ptr + offs, mask=offs < n, other=0), axis=0)
    tl.store(sink + pid, total, mask=total == 123456789)


@triton.jit
def _fibtui_marker(ptr):
    tl.store(ptr, 1)


@triton.jit(do_not_specialize=["n"])
def _fibtui_refill(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["n"])
def _fibtui_keep(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _fibtui_official_flush(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros((BLOCK,), dtype=tl.int32), mask=offs < n)


#: each kernel with the argument types it is launched with (Triton's signature strings) and its
#: constexprs: what tests/test_gpu_kernels.py compiles
SIGNATURES = {
    "_fibtui_l2_flush": ({"ptr": "*i32", "sink": "*i32", "n": "i32"}, {"BLOCK": 4096}),
    "_fibtui_marker": ({"ptr": "*i32"}, {}),
    "_fibtui_refill": ({"src": "*i32", "dst": "*i32", "n": "i32"}, {"BLOCK": 4096}),
    "_fibtui_keep": ({"src": "*u8", "dst": "*u8", "n": "i32"}, {"BLOCK": 4096}),
    "_fibtui_official_flush": ({"ptr": "*i32", "n": "i32"}, {"BLOCK": 4096}),
}
