#!/usr/bin/env python3
"""Workloads and solutions of ours for the five MLSys 2026 FlashInfer contest definitions.

    python3 scripts/data/contest_workloads.py --definitions DIR --out WS [--seed N] [--tiny]

DIR holds the contest's definitions (FlashInfer-Trace JSON, each with its Python ``reference``);
WS becomes a workspace of one dataset and one solution folder per definition:

    WS/dataset/definitions/<op_type>/<name>.json          copied from DIR unchanged
    WS/dataset/workloads/<op_type>/<name>.jsonl           8 workloads, one JSON object a line
    WS/dataset/blob/workloads/<name>/<uuid>.safetensors   the structured inputs of one workload
    WS/<name>/config.toml                                 [solution] + [build] (value-returning)
    WS/<name>/solution/<lang>/kernel.py                   our solution (run_<short>): torch, or
                                                          Triton for GDN prefill

Shapes are the contest models' own (DeepSeek-V3/V3.2, Qwen3-Next), varied over each definition's
var axes, and small enough that the definition's Python reference (a slow loop) runs each workload
in about a second at most on an H200 (measured with fibtui's input maker and evaluators: 0.96 s at
most, GDN prefill at 4096 tokens; our solutions 0.23 s at most, every workload PASSED). ``--tiny``
takes the same code path with shapes shrunk so that the references run in well under a second on
a CPU (the unit tests use it).

Inputs left ``random`` are the harness's (flashinfer-bench's or fibtui's: randn for floats, randn
clamped to +-2 for FP8, the top-k indexer's K cache packed into its FP8 page layout by the
evaluator). Written as safetensors, because random values would be wrong for them:

- gdn_prefill: ``cu_seqlens`` (0, a random split of the tokens into positive parts, total) and
  ``q``/``k`` L2-normalised per head (as Qwen3-Next feeds them, ``use_qk_l2norm``): with randn keys
  (norm ~11) the delta rule's state grows ~60x a token and overflows float32 within ~25 tokens;
- moe: the three ``*_scale`` block scales (positive; chosen so the output is O(1-10), where atol 1
  / rtol 0.3 decide something: with scales ~0.02 on all three the output is ~1e-4 and every
  solution, an all-zero one too, passes) and ``routing_bias`` (small, |b| <= 0.05 as the trained
  correction bias is: a randn bias swamps the sigmoid scores, every token picks the same 8 experts
  and most local blocks receive no token);
- dsa_topk_indexer: ``seq_lens`` and ``block_table`` (each sequence's pages its own; unused slots
  of a row hold distinct spare pages that no sequence uses);
- dsa_sparse_attention: ``sparse_indices`` (each row distinct token indices of the cache; some rows
  short, ending in -1 padding; none all padding).

Standard library + torch only; safetensors are written by hand (8-byte little-endian header length,
JSON header with dtype/shape/data_offsets padded with spaces to a multiple of 8, raw little-endian
data). Deterministic: the same seed (and flags) writes the same bytes.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import random
import shutil
import struct
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

PAGE = 64
TOPK = 2048

# --------------------------------------------------------------------------------------------
# safetensors, by hand
# --------------------------------------------------------------------------------------------

ST_DTYPES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
ST_TORCH = {v: k for k, v in ST_DTYPES.items()}
DEF_DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


def _raw(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def safetensors_bytes(tensors: dict[str, torch.Tensor]) -> bytes:
    """``{key: tensor}`` in the safetensors layout (keys sorted, data in key order)."""
    if sys.byteorder != "little":
        raise RuntimeError(
            "safetensors are little-endian; this writer assumes a little-endian host"
        )
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for key in sorted(tensors):
        t = tensors[key]
        blob = _raw(t)
        header[key] = {
            "dtype": ST_DTYPES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def read_safetensors(path: Path | str) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file (CPU)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = ST_TORCH[info["dtype"]]
        chunk = bytearray(data[8 + n + start : 8 + n + end])
        out[key] = (
            torch.frombuffer(chunk, dtype=dtype).reshape(info["shape"]).clone()
            if chunk
            else torch.empty(info["shape"], dtype=dtype)
        )
    return out


# --------------------------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------------------------


@dataclass
class Workload:
    axes: dict[str, int]
    #: input name -> {"type": "scalar", "value": v}; inputs not named here are random, and the
    #: ones in ``tensors`` are written to the workload's safetensors file
    scalars: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class Ctx:
    rng: random.Random  # integers, samples (stable across Python versions)
    gen: torch.Generator  # float tensors (CPU)
    tiny: bool


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """``parts`` positive integers summing to ``total``, a uniform random composition."""
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    edges = [0, *cuts, total]
    return [b - a for a, b in zip(edges, edges[1:], strict=False)]


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _l2norm_bf16(gen: torch.Generator, shape: list[int]) -> torch.Tensor:
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    return (x / x.pow(2).sum(-1, keepdim=True).sqrt().clamp(min=1e-6)).to(torch.bfloat16)


def gdn_decode_workloads(c: Ctx) -> list[Workload]:
    sizes = [1, 2, 3, 4, 2, 1, 4, 3] if c.tiny else [1, 4, 8, 16, 32, 48, 64, 128]
    return [Workload({"batch_size": b}, scalars={"scale": 1.0 / math.sqrt(128)}) for b in sizes]


def gdn_prefill_workloads(c: Ctx) -> list[Workload]:
    # tiny: ~100 tokens in all, so the Triton solution runs in the CPU interpreter in seconds
    pairs = (
        [(1, 8), (1, 12), (2, 8), (2, 16), (3, 12), (4, 16), (1, 16), (4, 8)]
        if c.tiny
        else [(1, 64), (1, 512), (2, 1024), (4, 1024), (4, 2048), (8, 2048), (8, 4096), (16, 4096)]
    )
    out = []
    for n, total in pairs:
        lens = _split(c.rng, total, n)
        cu = [0]
        for x in lens:
            cu.append(cu[-1] + x)
        out.append(
            Workload(
                {"total_seq_len": total, "num_seqs": n, "len_cu_seqlens": n + 1},
                scalars={"scale": 1.0 / math.sqrt(128)},
                tensors={
                    "cu_seqlens": torch.tensor(cu, dtype=torch.int64),
                    "q": _l2norm_bf16(c.gen, [total, 4, 128]),
                    "k": _l2norm_bf16(c.gen, [total, 4, 128]),
                },
            )
        )
    return out


#: MoE block-scale ranges (uniform): the dequantised activations ~N(0, 1) (the harness's FP8
#: values are randn clamped to +-2), weights ~N(0, 0.04^2); GEMM1 outputs then have a std ~3,
#: each expert's GEMM2 output ~14 and the routed output O(1-10)
MOE_HIDDEN_SCALE = (0.5, 1.5)
MOE_WEIGHT_SCALE = (0.02, 0.06)
MOE_BIAS = 0.05


def moe_scales(gen: torch.Generator, shape: list[int], lo_hi: tuple[float, float]) -> torch.Tensor:
    lo, hi = lo_hi
    return torch.rand(shape, generator=gen, dtype=torch.float32) * (hi - lo) + lo


def moe_workloads(c: Ctx) -> list[Workload]:
    seq = [1, 2, 1, 2, 1, 2, 1, 2] if c.tiny else [1, 4, 16, 32, 64, 128, 256, 512]
    # every local block of 32 (EP 8), one per workload. The routing logits stay random (the
    # harness's), so which tokens reach the local block is the harness's draw: a token keeps 4 of
    # the 8 groups of 32 and the block is one group, so about half the tokens have an all-zero
    # output row, and a seq_len-1 workload is all zero about half the time
    offsets = [32 * i for i in range(8)]
    c.rng.shuffle(offsets)
    out = []
    for t, off in zip(seq, offsets, strict=True):
        bias = ((torch.rand([256], generator=c.gen) * 2 - 1) * MOE_BIAS).to(torch.bfloat16)
        out.append(
            Workload(
                {"seq_len": t},
                scalars={"local_expert_offset": off, "routed_scaling_factor": 2.5},
                tensors={
                    "routing_bias": bias,
                    "hidden_states_scale": moe_scales(c.gen, [56, t], MOE_HIDDEN_SCALE),
                    "gemm1_weights_scale": moe_scales(c.gen, [32, 32, 56], MOE_WEIGHT_SCALE),
                    "gemm2_weights_scale": moe_scales(c.gen, [32, 56, 16], MOE_WEIGHT_SCALE),
                },
            )
        )
    return out


def dsa_topk_indexer_workloads(c: Ctx) -> list[Workload]:
    if c.tiny:
        batches, lo, hi = [1, 2, 3, 4, 1, 2, 3, 4], 100, 3000
    else:
        batches, lo, hi = [1, 2, 4, 8, 16, 32, 48, 64], 1000, 20000
    out = []
    for i, bsz in enumerate(batches):
        lens = [_log_uniform(c.rng, lo, hi) for _ in range(bsz)]
        if i % 4 == 1:  # a sequence of exactly the top-k, and one a whole number of pages
            lens[0] = TOPK
            lens[-1] = PAGE * max(1, lens[-1] // PAGE)
        need = [-(-n // PAGE) for n in lens]
        per_row = max(
            max(need), -(-TOPK // PAGE)
        )  # the constraint topk <= max_num_pages * page_size
        spare = per_row - min(need) + max(2, sum(need) // 50)
        pages = sum(need) + spare
        order = c.rng.sample(range(pages), pages)
        own, pool = order[: sum(need)], order[sum(need) :]
        table, at = [], 0
        for n in need:
            table.append(own[at : at + n] + c.rng.sample(pool, per_row - n))
            at += n
        out.append(
            Workload(
                {"batch_size": bsz, "max_num_pages": per_row, "num_pages": pages},
                tensors={
                    "seq_lens": torch.tensor(lens, dtype=torch.int32),
                    "block_table": torch.tensor(table, dtype=torch.int32),
                },
            )
        )
    return out


def dsa_sparse_attention_workloads(c: Ctx) -> list[Workload]:
    pairs = (
        [(1, 10), (2, 32), (3, 40), (4, 64), (5, 20), (6, 48), (7, 33), (8, 64)]
        if c.tiny
        else [
            (1, 937),
            (4, 48),
            (16, 160),
            (32, 600),
            (64, 320),
            (128, 800),
            (256, 400),
            (512, 937),
        ]
    )
    out = []
    for tokens, pages in pairs:
        cache = pages * PAGE
        full = min(TOPK, cache)
        rows = []
        for r in range(tokens):
            # a few rows are short contexts: fewer valid indices, then -1 padding
            short = (tokens > 1 and r == 0) or c.rng.random() < 0.08
            valid = c.rng.randint(1, min(full, TOPK - 1)) if short else full
            rows.append(c.rng.sample(range(cache), valid) + [-1] * (TOPK - valid))
        out.append(
            Workload(
                {"num_tokens": tokens, "num_pages": pages},
                scalars={"sm_scale": 1.0 / math.sqrt(192)},
                tensors={"sparse_indices": torch.tensor(rows, dtype=torch.int32)},
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# solutions (the one source of WS/<name>/solution/<language>/kernel.py)
# --------------------------------------------------------------------------------------------

_HEAD = '''"""{title}

Written by scripts/data/contest_workloads.py (fibtui): {what}, value-returning (the outputs as a tuple in
definition order). It is the "one solution of ours" that runs beside the reference through both
harnesses.
"""

'''

#: what each solution language's file is, in its docstring
_WHAT = {
    "python": "a vectorised torch version of the definition's reference (not fast)",
    "triton": "a Triton kernel of the definition's recurrence (one launch a call)",
}

GDN_DECODE = '''import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run_gdn_decode(q, k, v, state, A_log, a, dt_bias, b, scale):
    """One delta-rule step for every (batch, value head) at once; state [B, H, V, K] (k-last)."""
    B, T, HQ, K = q.shape
    HK = k.shape[2]
    HV, V = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float())).squeeze(1)  # [B, HV]
    beta = torch.sigmoid(b.float()).squeeze(1)  # [B, HV]
    qe = q.squeeze(1).float().repeat_interleave(HV // HQ, dim=1)  # [B, HV, K]
    ke = k.squeeze(1).float().repeat_interleave(HV // HK, dim=1)
    vf = v.squeeze(1).float()  # [B, HV, V]
    if state is None:
        s = torch.zeros(B, HV, V, K, dtype=torch.float32, device=q.device)
    else:
        s = state.float()
    old = g[:, :, None, None] * s  # [B, HV, V, K]
    old_v = torch.matmul(old, ke.unsqueeze(-1)).squeeze(-1)  # [B, HV, V] = k @ old (K-V layout)
    bt = beta.unsqueeze(-1)
    new_v = bt * vf + (1 - bt) * old_v
    kk = ke.unsqueeze(-2)  # [B, HV, 1, K]
    new_state = old.addcmul_(old_v.unsqueeze(-1), kk, value=-1.0).addcmul_(new_v.unsqueeze(-1), kk)
    out = scale * torch.matmul(new_state, qe.unsqueeze(-1)).squeeze(-1)  # [B, HV, V]
    return out.unsqueeze(1).to(torch.bfloat16), new_state
'''

GDN_PREFILL = '''import math
import os

import torch
import triton
import triton.language as tl


@triton.jit
def _gdn_prefill_kernel(q_ptr, k_ptr, v_ptr, s_ptr, a_log_ptr, a_ptr, dt_bias_ptr, b_ptr, cu_ptr,
                        o_ptr, ns_ptr, scale, HAS_STATE: tl.constexpr, HQ: tl.constexpr,
                        HK: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                        BV: tl.constexpr):
    """One program per (sequence, value head, block of BV value rows): the [BV, K] slice of the
    state stays in registers while the program walks the sequence's tokens in order."""
    n = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    hq = h // (HV // HQ)
    hk = h // (HV // HK)
    start = tl.load(cu_ptr + n).to(tl.int32)
    end = tl.load(cu_ptr + n + 1).to(tl.int32)
    rk = tl.arange(0, K)
    rv = vb * BV + tl.arange(0, BV)
    s_off = ((n * HV + h) * V + rv[:, None]) * K + rk[None, :]
    if HAS_STATE:
        s = tl.load(s_ptr + s_off)
    else:
        s = tl.zeros([BV, K], dtype=tl.float32)
    a_log = tl.load(a_log_ptr + h)
    dt_bias = tl.load(dt_bias_ptr + h)
    decay = tl.exp(a_log)
    for t in range(start, end):
        k = tl.load(k_ptr + (t * HK + hk) * K + rk).to(tl.float32)
        q = tl.load(q_ptr + (t * HQ + hq) * K + rk).to(tl.float32)
        v = tl.load(v_ptr + (t * HV + h) * V + rv).to(tl.float32)
        x = tl.load(a_ptr + t * HV + h).to(tl.float32) + dt_bias
        softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(tl.minimum(x, 20.0))))
        g = tl.exp(-decay * softplus)
        beta = tl.sigmoid(tl.load(b_ptr + t * HV + h).to(tl.float32))
        s = s * g
        old_v = tl.sum(s * k[None, :], axis=1)
        s = s + (beta * (v - old_v))[:, None] * k[None, :]
        o = tl.sum(s * q[None, :], axis=1) * scale
        tl.store(o_ptr + (t * HV + h) * V + rv, o.to(tl.bfloat16))
    s = tl.where(end > start, s, 0.0)  # the reference leaves an empty sequence's state zero
    tl.store(ns_ptr + s_off, s)


@torch.no_grad()
def run_gdn_prefill(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    """The delta rule token by token inside one Triton kernel (the recurrence is sequential per
    sequence; parallel over sequences, value heads and blocks of value rows); state [N, H, V, K]
    (k-last), float32 throughout as the reference computes."""
    total, HQ, K = q.shape
    HK = k.shape[1]
    HV, V = v.shape[1], v.shape[2]
    n = cu_seqlens.numel() - 1
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    out = torch.zeros(total, HV, V, dtype=torch.bfloat16, device=q.device)
    new_state = torch.empty(n, HV, V, K, dtype=torch.float32, device=q.device)
    if n == 0:
        return out, new_state
    has_state = state is not None
    s = state.float().contiguous() if has_state else new_state
    # on a GPU 4 blocks of 32 value rows per head run in parallel; Triton's CPU interpreter runs
    # programs one after another, where one block of all 128 rows is 4x fewer Python steps
    BV = V if os.environ.get("TRITON_INTERPRET") == "1" else 32
    _gdn_prefill_kernel[(n, HV, V // BV)](
        q.contiguous(), k.contiguous(), v.contiguous(), s, A_log.float().contiguous(),
        a.contiguous(), dt_bias.float().contiguous(), b.contiguous(), cu_seqlens.contiguous(),
        out, new_state, float(scale), HAS_STATE=has_state, HQ=HQ, HK=HK, HV=HV, K=K, V=V, BV=BV,
        num_warps=4)
    return out, new_state
'''

MOE = '''import torch


@torch.no_grad()
def run_moe_fp8(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
                gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, local_expert_offset,
                routed_scaling_factor):
    """DeepSeek-V3 no-aux routing (top-2 group scores, 4 of 8 groups, top-8 experts, weights from
    the unbiased sigmoid scores), then GEMM1 -> SwiGLU -> GEMM2 per local expert that some token
    chose, each expert's FP8 weights dequantised by its 128x128 block scales only when used."""
    top_k, n_group, topk_group, block = 8, 8, 4, 128
    t, e_global = routing_logits.shape
    e_local, two_i, h = gemm1_weights.shape
    inter = two_i // 2
    dev = hidden_states.device

    a = (hidden_states.float().view(t, h // block, block)
         * hidden_states_scale.float().t().unsqueeze(-1)).view(t, h)  # [T, H]

    logits = routing_logits.float()
    bias = routing_bias.float().reshape(-1)
    s = 1.0 / (1.0 + torch.exp(-logits))
    swb = s + bias
    group_size = e_global // n_group
    top2, _ = torch.topk(swb.view(t, n_group, group_size), k=2, dim=2, largest=True, sorted=False)
    _, group_idx = torch.topk(top2.sum(dim=2), k=topk_group, dim=1, largest=True, sorted=False)
    group_mask = torch.zeros(t, n_group, dtype=torch.float32, device=dev)
    group_mask.scatter_(1, group_idx, 1.0)
    score_mask = group_mask.unsqueeze(2).expand(t, n_group, group_size).reshape(t, e_global)
    pruned = swb.masked_fill(score_mask == 0, torch.finfo(torch.float32).min)
    _, topk_idx = torch.topk(pruned, k=top_k, dim=1, largest=True, sorted=False)
    m = torch.zeros_like(s)
    m.scatter_(1, topk_idx, 1.0)
    weights = s * m
    weights = (weights / (weights.sum(dim=1, keepdim=True) + 1e-20)) * routed_scaling_factor

    out = torch.zeros(t, h, dtype=torch.float32, device=dev)
    start = int(local_expert_offset)
    local = topk_idx - start  # [T, 8]: the local slot of each chosen expert
    chosen = torch.unique(local[(local >= 0) & (local < e_local)]).tolist()
    for le in chosen:
        ge = start + le
        tok = torch.nonzero((topk_idx == ge).any(dim=1), as_tuple=False).squeeze(1)
        w13 = (gemm1_weights[le].float().view(two_i // block, block, h // block, block)
               * gemm1_weights_scale[le].float()[:, None, :, None]).view(two_i, h)
        w2 = (gemm2_weights[le].float().view(h // block, block, inter // block, block)
              * gemm2_weights_scale[le].float()[:, None, :, None]).view(h, inter)
        g1 = a.index_select(0, tok).matmul(w13.t())  # [Tk, 2I]
        x1, x2 = g1[:, :inter], g1[:, inter:]
        c = (x2 / (1.0 + torch.exp(-x2))) * x1
        o = c.matmul(w2.t())  # [Tk, H]
        out.index_add_(0, tok, o * weights.index_select(0, tok)[:, ge].unsqueeze(1))
    return (out.to(torch.bfloat16),)
'''

DSA_TOPK = '''import torch


def _dequant(k_index_cache_fp8):
    """[pages, page_size, 1, dim + 4] int8 (per page: the FP8 bytes of every token, then one
    float32 scale per token) -> float32 [pages, page_size, dim]."""
    raw = k_index_cache_fp8.view(torch.uint8)
    pages, page_size, _, dim_sf = raw.shape
    dim = dim_sf - 4
    flat = raw.reshape(pages, page_size * dim_sf)
    values = flat[:, : page_size * dim].contiguous().view(torch.float8_e4m3fn).float()
    scales = flat[:, page_size * dim:].contiguous().view(torch.float32)
    return values.view(pages, page_size, dim) * scales.view(pages, page_size, 1)


@torch.no_grad()
def run_dsa_topk_indexer(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    """sum over heads of relu(q . k) * weight for every token of every sequence (rows in chunks),
    then the top 2048 per row as global token indices (page * page_size + offset), -1 past the
    sequence's length."""
    topk = 2048
    bsz, heads, dim = q_index_fp8.shape
    pages, page_size = k_index_cache_fp8.shape[:2]
    dev = q_index_fp8.device
    out = torch.full((bsz, topk), -1, dtype=torch.int32, device=dev)
    if bsz == 0:
        return (out,)
    k_all = _dequant(k_index_cache_fp8)  # [pages, page_size, dim]
    q = q_index_fp8.float()
    w = weights.float()
    lens = seq_lens.long()
    longest = int(lens.max())
    if longest <= 0:
        return (out,)
    per_row = min(-(-longest // page_size), block_table.shape[1])
    table = block_table[:, :per_row].long().clamp(0, pages - 1)  # slots past a row's length: masked
    span = per_row * page_size
    keep = min(topk, span)
    pos = torch.arange(span, device=dev)
    rows = max(1, (1 << 28) // (span * (dim + heads) * 4))  # ~1 GiB of keys and scores a chunk
    for r0 in range(0, bsz, rows):
        r1 = min(bsz, r0 + rows)
        keys = k_all[table[r0:r1]].reshape(r1 - r0, span, dim)
        scores = torch.bmm(q[r0:r1], keys.transpose(1, 2))  # [r, heads, span]
        final = (torch.relu(scores) * w[r0:r1].unsqueeze(2)).sum(dim=1)  # [r, span]
        final.masked_fill_(pos.unsqueeze(0) >= lens[r0:r1].unsqueeze(1), float("-inf"))
        _, idx = torch.topk(final, keep, dim=1)
        tokens = table[r0:r1].gather(1, idx // page_size) * page_size + idx % page_size
        tokens = torch.where(idx < lens[r0:r1].unsqueeze(1), tokens, torch.full_like(tokens, -1))
        out[r0:r1, :keep] = tokens.to(torch.int32)
    return (out,)
'''

DSA_SPARSE = '''import math

import torch


@torch.no_grad()
def run_dsa_sparse_attention(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    """Attention of each token over its 2048 selected cache entries (-1: padding, masked), tokens in
    chunks; returns the bf16 output and the base-2 log-sum-exp."""
    tokens, heads, dim_ckv = q_nope.shape
    dim_kpe = q_pe.shape[-1]
    dev = q_nope.device
    kc_all = ckv_cache.reshape(-1, dim_ckv).float()
    kp_all = kpe_cache.reshape(-1, dim_kpe).float()
    output = torch.zeros(tokens, heads, dim_ckv, dtype=torch.bfloat16, device=dev)
    lse = torch.full((tokens, heads), -float("inf"), dtype=torch.float32, device=dev)
    chunk = 64
    for t0 in range(0, tokens, chunk):
        t1 = min(tokens, t0 + chunk)
        idx = sparse_indices[t0:t1].long()
        valid = idx != -1
        safe = torch.where(valid, idx, torch.zeros_like(idx))
        kc = kc_all[safe]  # [c, k, dim_ckv]
        kp = kp_all[safe]
        logits = (torch.bmm(q_nope[t0:t1].float(), kc.transpose(1, 2))
                  + torch.bmm(q_pe[t0:t1].float(), kp.transpose(1, 2)))  # [c, heads, k]
        logits = logits * sm_scale
        logits = logits.masked_fill(~valid.unsqueeze(1), float("-inf"))
        lse[t0:t1] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        attn = torch.softmax(logits, dim=-1)
        attn = torch.nan_to_num(attn, nan=0.0)  # a row of padding only: zero output
        output[t0:t1] = torch.bmm(attn, kc).to(torch.bfloat16)
    return output, lse
'''


@dataclass
class Spec:
    short: str
    workloads: Callable[[Ctx], list[Workload]]
    kernel: str
    title: str
    #: the reference's Python-loop iterations for one workload's axes
    loop: Callable[[dict[str, int]], str]
    #: the solution's language (its folder: solution/<language>/kernel.py)
    language: str = "python"


SPECS: dict[str, Spec] = {
    "gdn_decode_qk4_v8_d128_k_last": Spec(
        "gdn_decode",
        gdn_decode_workloads,
        GDN_DECODE,
        "Gated DeltaNet decode (GVA 4/8 heads, d 128, k-last state).",
        lambda ax: (
            f"{ax['batch_size'] * 8} (batch x 8 value heads) iterations of ~12 ops on [128,128]"
        ),
    ),
    "gdn_prefill_qk4_v8_d128_k_last": Spec(
        "gdn_prefill",
        gdn_prefill_workloads,
        GDN_PREFILL,
        "Gated DeltaNet prefill (varlen by cu_seqlens, GVA 4/8 heads, d 128, k-last state).",
        lambda ax: f"{ax['total_seq_len']} (tokens) iterations of ~14 ops on [8,128,128]",
        language="triton",
    ),
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": Spec(
        "moe_fp8",
        moe_workloads,
        MOE,
        "FP8 block-scale MoE with DeepSeek-V3 routing (256 experts, 32 local, H 7168, I 2048).",
        lambda ax: (
            "32 (local experts) iterations, after dequantising all 32 experts' weights to "
            "float32 (1.41e9 elements, ~17 GB of temporaries)"
        ),
    ),
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": Spec(
        "dsa_topk_indexer",
        dsa_topk_indexer_workloads,
        DSA_TOPK,
        "DeepSeek-V3.2 sparse-attention top-k indexer (FP8, 64 heads, d 128, top 2048, page 64).",
        lambda ax: (
            f"{ax['batch_size']} (sequences) iterations of ~12 ops over <= "
            f"{ax['max_num_pages'] * 64} tokens"
        ),
    ),
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": Spec(
        "dsa_sparse_attention",
        dsa_sparse_attention_workloads,
        DSA_SPARSE,
        "DeepSeek-V3.2 sparse attention over 2048 selected cache entries (16 heads, ckv 512, kpe 64).",
        lambda ax: f"{ax['num_tokens']} (tokens) iterations of ~12 ops over 2048 entries",
    ),
}


def kernel_source(name: str) -> str:
    spec = SPECS[name]
    return _HEAD.format(title=spec.title, what=_WHAT[spec.language]) + spec.kernel


def solution_name(name: str) -> str:
    spec = SPECS[name]
    return f"{spec.short}_{'torch_ref' if spec.language == 'python' else spec.language}_v1"


def config_toml(name: str) -> str:
    spec = SPECS[name]
    return (
        f'[solution]\nname = "{solution_name(name)}"\ndefinition = "{name}"\nauthor = "fibtui"\n\n'
        f'[build]\nlanguage = "{spec.language}"\nentry_point = "kernel.py::run_{spec.short}"\n'
        f"destination_passing_style = false\n"
    )


# --------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------


def axis_values(definition: dict[str, Any], axes: dict[str, int]) -> dict[str, int]:
    values = {n: int(a["value"]) for n, a in definition["axes"].items() if a.get("type") == "const"}
    values.update(axes)
    return values


def shape_of(spec: dict[str, Any], axes: dict[str, int]) -> list[int] | None:
    return None if spec.get("shape") is None else [axes[a] for a in spec["shape"]]


def check_workload(definition: dict[str, Any], w: Workload) -> None:
    """Every var axis set, every tensor of the definition's shape and dtype, every constraint true
    (random inputs stand in as zero-stride tensors of their shape)."""
    var = sorted(n for n, a in definition["axes"].items() if a.get("type") == "var")
    if sorted(w.axes) != var:
        raise ValueError(f"{definition['name']}: axes {sorted(w.axes)}, expected {var}")
    axes = axis_values(definition, w.axes)
    names = set(definition["inputs"])
    unknown = (set(w.tensors) | set(w.scalars)) - names
    if unknown:
        raise ValueError(f"{definition['name']}: unknown inputs {sorted(unknown)}")
    env: dict[str, Any] = dict(axes)
    for name, spec in definition["inputs"].items():
        shape = shape_of(spec, axes)
        dtype = DEF_DTYPES[spec["dtype"]]
        if name in w.tensors:
            t = w.tensors[name]
            if list(t.shape) != shape or t.dtype != dtype:
                raise ValueError(
                    f"{definition['name']}: {name} is {list(t.shape)} {t.dtype}, "
                    f"expected {shape} {dtype}"
                )
            env[name] = t
        elif name in w.scalars:
            if shape is not None:
                raise ValueError(f"{definition['name']}: {name} is a tensor input, not a scalar")
            env[name] = w.scalars[name]
        else:
            env[name] = torch.empty((), dtype=dtype).expand(shape) if shape is not None else 0
    for expr in definition.get("constraints") or []:
        if not eval(expr, {"torch": torch, "__builtins__": {}}, env):  # noqa: S307 (the contest's own expressions)
            raise ValueError(f"{definition['name']}: constraint {expr!r} fails for axes {w.axes}")


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def load_definitions(folder: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    found = {}
    for path in sorted(folder.glob("*.json")):
        d = json.loads(path.read_text())
        if isinstance(d, dict) and d.get("name") in SPECS:
            found[d["name"]] = (path, d)
    return found


def build(definitions: Path, seed: int, tiny: bool) -> tuple[dict[Path, bytes], list[str]]:
    """The workspace's files (relative paths -> bytes) and a summary, one line a workload."""
    files: dict[Path, bytes] = {}
    summary: list[str] = []
    found = load_definitions(definitions)
    if not found:
        raise SystemExit(f"no contest definitions in {definitions} (expected {', '.join(SPECS)})")
    for name, (path, d) in found.items():
        spec = SPECS[name]
        rng = random.Random(f"fibtui-contest:{seed}:{name}:{'tiny' if tiny else 'real'}")
        gen = torch.Generator().manual_seed(rng.getrandbits(62))
        ctx = Ctx(rng, gen, tiny)
        op = d["op_type"]
        files[Path("dataset/definitions") / op / f"{name}.json"] = path.read_bytes()
        lines = []
        for w in spec.workloads(ctx):
            check_workload(d, w)
            wid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            rel = f"blob/workloads/{name}/{wid}.safetensors"
            inputs: dict[str, Any] = {}
            for inp in d["inputs"]:
                if inp in w.tensors:
                    inputs[inp] = {"type": "safetensors", "path": rel, "tensor_key": inp}
                elif inp in w.scalars:
                    inputs[inp] = {"type": "scalar", "value": w.scalars[inp]}
                else:
                    inputs[inp] = {"type": "random"}
            if w.tensors:
                files[Path("dataset") / rel] = safetensors_bytes(w.tensors)
            lines.append(
                json.dumps(
                    {
                        "definition": name,
                        "solution": None,
                        "workload": {"uuid": wid, "axes": w.axes, "inputs": inputs},
                        "evaluation": None,
                    }
                )
            )
            summary.append(
                f"{name}: {json.dumps(w.axes)} -> reference: {spec.loop(axis_values(d, w.axes))}"
            )
        files[Path("dataset/workloads") / op / f"{name}.jsonl"] = ("\n".join(lines) + "\n").encode()
        files[Path(name) / "config.toml"] = config_toml(name).encode()
        files[Path(name) / "solution" / spec.language / "kernel.py"] = kernel_source(name).encode()
    missing = sorted(set(SPECS) - set(found))
    for name in missing:
        summary.append(f"{name}: not in {definitions}, skipped")
    return files, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--definitions",
        required=True,
        type=Path,
        help="folder of the contest's definition JSON files",
    )
    parser.add_argument("--out", required=True, type=Path, help="the workspace to write")
    parser.add_argument(
        "--seed", type=int, default=2026, help="seed of every random choice (default 2026)"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="shapes shrunk for CPU tests (same code path)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the file count")
    args = parser.parse_args(argv)
    files, summary = build(args.definitions, args.seed, args.tiny)
    for name in {p.parts[3] for p in files if p.parts[:3] == ("dataset", "blob", "workloads")}:
        stale = args.out / "dataset" / "blob" / "workloads" / name
        if stale.is_dir():
            shutil.rmtree(stale)  # this script's own blobs of an earlier seed
    for rel, data in sorted(files.items()):
        path = args.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if not args.quiet:
        for line in summary:
            print(line)
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
