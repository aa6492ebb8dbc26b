"""Baseline: every sequence scored at once (padded to the longest), top-k by score, highest first."""

import torch


def _keys(k_index_cache_fp8: torch.Tensor) -> torch.Tensor:
    raw = k_index_cache_fp8.view(torch.uint8)
    pages, page_size, _, dim_sf = raw.shape
    dim = dim_sf - 4
    flat = raw.reshape(pages, page_size * dim_sf)
    values = flat[:, : page_size * dim].contiguous().view(torch.float8_e4m3fn).float().view(pages, page_size, dim)
    return values * flat[:, page_size * dim:].contiguous().view(torch.float32).view(pages, page_size, 1)


@torch.no_grad()
def topk_indexer(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk: int = 32):
    keys = _keys(k_index_cache_fp8)  # [pages, page_size, dim]
    page_size = keys.shape[1]
    batch, per_row = block_table.shape
    # global token index of every slot of every row: page * page_size + offset
    slots = torch.arange(per_row * page_size, device=block_table.device)
    tokens = block_table.long()[:, slots // page_size] * page_size + slots % page_size  # [B, T]
    k = keys.reshape(-1, keys.shape[-1])[tokens]  # [B, T, dim]
    score = (torch.relu(torch.einsum("bhd,btd->bht", q_index_fp8.float(), k)) * weights[:, :, None]).sum(dim=1)
    score = score.masked_fill(slots[None, :] >= seq_lens.long()[:, None], float("-inf"))
    best = score.topk(min(topk, score.shape[1]), dim=1)
    out = torch.gather(tokens, 1, best.indices).int()
    out = out.masked_fill(torch.isinf(best.values), -1)
    if out.shape[1] < topk:
        out = torch.cat([out, out.new_full((batch, topk - out.shape[1]), -1)], dim=1)
    return out
