"""Baseline Triton kernel for the demo GDN decode step (destination passing style).

One program per (batch, v-head, BV-wide block of the value dimension). Each program reads its
BV x K slice of the fp32 state once, applies the gated delta rule and writes the new slice and the
BV outputs. State layout is "k-last": state[b, h, v, k].
"""

import math

import triton
import triton.language as tl

BV = 32


@triton.jit
def _gdn_decode_kernel(
    q_ptr, k_ptr, v_ptr, state_ptr, a_log_ptr, a_ptr, dt_bias_ptr, b_ptr,
    out_ptr, new_state_ptr, scale,
    HQ: tl.constexpr, HK: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    pid_v = tl.program_id(0)
    h = tl.program_id(1)
    bidx = tl.program_id(2)
    hq = h // (HV // HQ)
    hk = h // (HV // HK)

    offs_k = tl.arange(0, K)
    offs_v = pid_v * BLOCK_V + tl.arange(0, BLOCK_V)

    q = tl.load(q_ptr + (bidx * HQ + hq) * K + offs_k).to(tl.float32)
    k = tl.load(k_ptr + (bidx * HK + hk) * K + offs_k).to(tl.float32)
    v = tl.load(v_ptr + (bidx * HV + h) * V + offs_v).to(tl.float32)

    a_log = tl.load(a_log_ptr + h)
    x = tl.load(a_ptr + bidx * HV + h).to(tl.float32) + tl.load(dt_bias_ptr + h)
    softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    g = tl.exp(-tl.exp(a_log) * softplus)
    beta = tl.sigmoid(tl.load(b_ptr + bidx * HV + h).to(tl.float32))

    s_offs = ((bidx * HV + h) * V + offs_v[:, None]) * K + offs_k[None, :]
    s = tl.load(state_ptr + s_offs) * g
    old_v = tl.sum(s * k[None, :], axis=1)
    delta = beta * (v - old_v)
    s = s + delta[:, None] * k[None, :]
    out = tl.sum(s * q[None, :], axis=1) * scale

    tl.store(new_state_ptr + s_offs, s)
    tl.store(out_ptr + (bidx * HV + h) * V + offs_v, out.to(tl.bfloat16))


def gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    B, _, HQ, K = q.shape
    HK = k.shape[2]
    HV, V = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    grid = (triton.cdiv(V, BV), HV, B)
    _gdn_decode_kernel[grid](
        q, k, v, state, A_log, a, dt_bias, b, output, new_state, float(scale),
        HQ=HQ, HK=HK, HV=HV, K=K, V=V, BLOCK_V=BV, num_warps=4,
    )
