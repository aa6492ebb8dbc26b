"""DeepSeek sparse-attention top-k indexer: judged by what the returned indices select, not by
their order.

1. shape and dtype of ``topk_indices`` against the reference's;
2. every index that is not padding (negative) must be reachable: its page
   (``index // page_size``) is in that row's ``block_table``, and its position in the sequence
   (slot of the page x page_size + offset) is under that row's ``seq_lens``; and no index may
   repeat within a row. Either failure is INCORRECT_NUMERICAL with infinite errors;
3. the indexer's score (ReLU of q . k per head, weighted by ``weights`` and summed over heads, on
   the dequantized FP8 K cache) is computed at the solution's indices and at the reference's
   (padding scores -inf); each row's scores are sorted, and the two sorted lists compared
   elementwise with the preset's atol / rtol / matched ratio, a shared -inf (padding on both
   sides) counting as a match. So the same set in another order, or another choice among tied
   scores, passes; a worse token swapped in does not.

A workload whose K cache is random gets one the way the official evaluator makes it: bf16 values
packed into the FP8 page layout (per page: the FP8 bytes of its tokens, then one float32 scale per
token, scale = max |k| / 448).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from fibtui.worker.check import Tolerance, Verdict
from fibtui.worker.evaluators.base import Evaluator, Judging

FP8_MAX = 448.0


def _axis(definition: dict[str, Any], name: str) -> int:
    axis = definition["axes"].get(name) or {}
    if axis.get("type") != "const":
        raise ValueError(f"the top-k indexer evaluator needs a const axis {name!r}")
    return int(axis["value"])


def pack_k_cache(k: torch.Tensor) -> torch.Tensor:
    """bf16/float K ``[pages, page_size, 1, dim]`` -> the packed int8 cache ``[pages, page_size, 1,
    dim + 4]``: per page, the FP8 bytes of every token, then every token's float32 scale."""
    pages, page_size, _, dim = k.shape
    scale = k.abs().float().amax(dim=3, keepdim=True).clamp(min=1e-4) / FP8_MAX  # [p, ps, 1, 1]
    fp8 = (k.float() / scale).to(torch.float8_e4m3fn)
    packed = torch.empty(pages, page_size * (dim + 4), dtype=torch.uint8, device=k.device)
    packed[:, : page_size * dim] = fp8.reshape(pages, page_size * dim).view(torch.uint8)
    packed[:, page_size * dim :] = scale.reshape(pages, page_size).contiguous().view(torch.uint8)
    return packed.view(pages, page_size, 1, dim + 4).view(torch.int8)


def unpack_k_cache(cache: torch.Tensor) -> torch.Tensor:
    """The packed int8 cache -> float32 K ``[pages, page_size, dim]``."""
    raw = cache.view(torch.uint8)
    pages, page_size, _, dim_sf = raw.shape
    dim = dim_sf - 4
    flat = raw.reshape(pages, page_size * dim_sf)
    values = (
        flat[:, : page_size * dim]
        .contiguous()
        .view(torch.float8_e4m3fn)
        .float()
        .view(pages, page_size, dim)
    )
    scales = flat[:, page_size * dim :].contiguous().view(torch.float32).view(pages, page_size, 1)
    return values * scales


def scores_at(
    indices: torch.Tensor,
    k_all: torch.Tensor,
    q: torch.Tensor,
    weights: torch.Tensor,
    page_size: int,
) -> torch.Tensor:
    """The indexer's score of each global token index ``[B, N]`` (-inf for padding)."""
    valid = indices >= 0
    safe = indices.clamp(min=0).long()
    keys = k_all[safe // page_size, safe % page_size]  # [B, N, D]
    per_head = torch.relu(torch.bmm(q.float(), keys.transpose(1, 2)))  # [B, H, N]
    scores = (per_head * weights.float().unsqueeze(2)).sum(dim=1)
    return scores.masked_fill(~valid, -math.inf)


def unreachable_rows(
    indices: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor, page_size: int
) -> tuple[list[int], list[int]]:
    """Rows holding an index outside their sequence, and rows holding a repeated index."""
    valid = indices >= 0
    safe = indices.clamp(min=0).long()
    page, offset = safe // page_size, safe % page_size
    match = page.unsqueeze(2) == block_table.long().unsqueeze(1)  # [B, K, M]
    in_table = match.any(dim=2)
    slot = match.long().argmax(dim=2)  # the first slot holding the page
    within = (slot * page_size + offset) < seq_lens.long().unsqueeze(1)
    outside = (valid & ~(in_table & within)).any(dim=1)
    ordered = indices.sort(dim=1).values
    repeated = ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any(dim=1)
    return outside.nonzero().flatten().tolist(), repeated.nonzero().flatten().tolist()


def sorted_score_check(
    sol: torch.Tensor, ref: torch.Tensor, tol: Tolerance, required: float
) -> tuple[float, float, float, bool]:
    """(max abs, max rel, matched ratio, exceeds) of two sorted score lists; a non-finite pair
    of the same kind matches, a non-finite value facing a finite one does not."""
    x, y = sol.float(), ref.float()
    same_nonfinite = (x.isnan() & y.isnan()) | (
        x.isinf() & y.isinf() & (x.signbit() == y.signbit())
    )
    finite = x.isfinite() & y.isfinite()
    mismatch = ~same_nonfinite & ~finite
    abs_err = torch.zeros_like(x)
    rel_err = torch.zeros_like(x)
    abs_err[finite] = (x[finite] - y[finite]).abs()
    rel_err[finite] = abs_err[finite] / (y[finite].abs() + 1e-8)
    if x.numel() == 0:
        return 0.0, 0.0, 1.0, False
    failing = mismatch | (finite & (abs_err > tol.atol) & (rel_err > tol.rtol))
    ratio = min(1.0, max(0.0, 1.0 - float(failing.sum()) / x.numel()))
    any_finite = bool(finite.any())
    max_abs = float(abs_err.max()) if any_finite else 0.0
    max_rel = float(rel_err.max()) if any_finite else 0.0
    if bool(mismatch.any()):
        max_abs = max_rel = math.inf
    return max_abs, max_rel, ratio, ratio < required


class DsaTopkIndexer(Evaluator):
    name = "dsa_topk_indexer"

    def prepare_inputs(
        self,
        definition: dict[str, Any],
        workload: dict[str, Any],
        inputs: list[Any],
        gen: torch.Generator,
    ) -> None:
        names = list(definition["inputs"])
        if "k_index_cache_fp8" not in names:
            return
        kind = ((workload.get("inputs") or {}).get("k_index_cache_fp8") or {}).get("type", "random")
        if kind != "random":
            return
        i = names.index("k_index_cache_fp8")
        cache = inputs[i]
        pages, page_size, heads, dim_sf = cache.shape
        k = torch.randn(
            pages,
            page_size,
            heads,
            dim_sf - 4,
            dtype=torch.float32,
            device=cache.device,
            generator=gen,
        ).to(torch.bfloat16)
        inputs[i] = pack_k_cache(k)

    def judge(self, j: Judging) -> Verdict:
        out, ref = j.outputs[0], j.references[0]
        if tuple(out.shape) != tuple(ref.shape):
            return Verdict(
                "INCORRECT_SHAPE",
                detail=f"{j.names[0]}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
            )
        if out.dtype != ref.dtype:
            return Verdict(
                "INCORRECT_DTYPE", detail=f"{j.names[0]}: dtype {out.dtype}, expected {ref.dtype}"
            )
        page_size, topk = _axis(j.definition, "page_size"), _axis(j.definition, "topk")
        out = out.to(ref.device)
        outside, repeated = unreachable_rows(
            out, j.input("seq_lens"), j.input("block_table"), page_size
        )
        if outside or repeated:
            what = (
                f"indices outside their sequence in row(s) {outside[:8]}"
                if outside
                else f"repeated indices in row(s) {repeated[:8]}"
            )
            return Verdict(
                "INCORRECT_NUMERICAL", math.inf, math.inf, 0.0, detail=f"{j.names[0]}: {what}"
            )
        k_all = unpack_k_cache(j.input("k_index_cache_fp8"))
        both = scores_at(
            torch.cat([ref, out], dim=1),
            k_all,
            j.input("q_index_fp8"),
            j.input("weights"),
            page_size,
        )
        ref_scores, sol_scores = both.split(topk, dim=1)
        max_abs, max_rel, ratio, exceeds = sorted_score_check(
            sol_scores.sort(dim=1, descending=True).values,
            ref_scores.sort(dim=1, descending=True).values,
            j.tol,
            j.tol.ratio(self.default_ratio),
        )
        if exceeds:
            return Verdict(
                "INCORRECT_NUMERICAL",
                max_abs,
                max_rel,
                ratio,
                detail=f"{j.names[0]}: the scores of the returned indices differ from the reference's "
                f"(matched {ratio:.4f})",
            )
        return Verdict("PASSED", max_abs, max_rel, ratio)


EVALUATOR = DsaTopkIndexer()
