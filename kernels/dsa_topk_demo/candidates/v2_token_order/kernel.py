"""Candidate: the same top-k set as the baseline, returned in token order (lowest global index
first, padding last) instead of by score. An elementwise check would call every row wrong; the
top-k indexer evaluator compares the scores of the selected tokens and passes it.

It also skips the padded score matrix: each sequence is scored over its own tokens only."""

import torch


@torch.no_grad()
def topk_indexer(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk: int = 32):
    raw = k_index_cache_fp8.view(torch.uint8)
    pages, page_size, _, dim_sf = raw.shape
    dim = dim_sf - 4
    flat = raw.reshape(pages, page_size * dim_sf)
    keys = (flat[:, : page_size * dim].contiguous().view(torch.float8_e4m3fn).float().view(pages * page_size, dim)
            * flat[:, page_size * dim:].contiguous().view(torch.float32).reshape(pages * page_size, 1))
    q = q_index_fp8.float()
    out = torch.full((q.shape[0], topk), -1, dtype=torch.int32, device=q.device)
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        slots = torch.arange(n, device=q.device)
        tokens = block_table[b].long()[slots // page_size] * page_size + slots % page_size
        score = (torch.relu(q[b] @ keys[tokens].T) * weights[b][:, None]).sum(dim=0)
        chosen = tokens[score.topk(min(topk, n)).indices].sort().values
        out[b, : chosen.numel()] = chosen.int()
    return out
