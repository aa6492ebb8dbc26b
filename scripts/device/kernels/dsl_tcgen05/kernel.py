"""A kernel written for the B200: its host function builds a tcgen05 (UMMA) tiled MMA with the
CuTe DSL, which allows that op on Blackwell GPUs only (sm_100a and its family). On a Hopper GPU the
DSL refuses it at trace time with its own arch check; fibtui must read that as UNSUPPORTED_HERE
(needs sm_100a), never as the kernel's RUNTIME_ERROR. The entry point takes the demo GDN
definition's arguments; it fails before it would compute anything."""

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import tcgen05
from cutlass.cute.runtime import from_dlpack


@cute.jit
def _host(q: cute.Tensor):
    op = tcgen05.MmaF16BF16Op(
        cutlass.BFloat16,
        cutlass.Float32,
        (128, 128, 16),
        tcgen05.CtaGroup.ONE,
        tcgen05.OperandSource.SMEM,
        tcgen05.OperandMajorMode.K,
        tcgen05.OperandMajorMode.K,
    )
    cute.make_tiled_mma(op)


_compiled = {}


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    key = tuple(q.shape)
    if key not in _compiled:
        _compiled[key] = cute.compile(_host, from_dlpack(q))
    _compiled[key](from_dlpack(q))
