"""Consistent values for structured inputs that a workload leaves random.

flashinfer-bench fills every input a workload marks ``random`` with random values of its dtype.
For most tensors that is right; for the ones that describe the shape of the data (sequence
boundaries, lengths, page tables, token indices) random integers send the reference off the end
of its tensors. The contest's own workloads carry those as safetensors; a workload written by
hand, or a generated one, may not. fibtui then makes them consistent with the workload's axes:

- ``cu_seqlens`` (and other ``*cu_seqlens*`` / ``*indptr*`` integer vectors of length n + 1): 0,
  then a random split of the ``total_*`` axis (the token count) into n positive parts;
- ``seq_lens`` / ``kv_lens`` (integer vector, one per row) beside a page table: lengths in
  [1, pages per row x page size];
- ``block_table`` / ``page_table`` (integer matrix, rows x pages per row): each row distinct page
  ids drawn from the ``num_pages`` pages;
- ``sparse_indices`` (integer matrix, tokens x k) beside a paged cache: each row distinct global
  token indices (page x page size + offset) of the cache, the last few of some rows -1 (padding),
  never a row of padding only;
- an FP8 block scale (a float ``*_scale`` / ``*_scales`` input beside an FP8 input): positive.

Only inputs the workload marks ``random`` (or leaves out) are touched; safetensors and scalars are
used as they are. Every value comes from the input set's own seeded generator.
"""

from __future__ import annotations

import re
from typing import Any

import torch

_INT = (torch.int32, torch.int64, torch.int16)


def _total_axis(definition: dict[str, Any], axes: dict[str, int]) -> int | None:
    totals = [a for a in definition["axes"] if a.startswith("total") and a in axes]
    return axes[totals[0]] if len(totals) == 1 else None


def _page_size(axes: dict[str, int]) -> int | None:
    for name in ("page_size", "block_size"):
        if name in axes:
            return axes[name]
    return None


def _split(total: int, parts: int, gen: torch.Generator) -> torch.Tensor:
    """``parts`` positive integers summing to ``total`` (zeros allowed only when total < parts)."""
    if parts <= 0:
        return torch.zeros(0, dtype=torch.int64)
    if total < parts:
        cuts = torch.randint(0, total + 1, (parts - 1,), generator=gen).sort().values
    else:
        cuts = (torch.randperm(total - 1, generator=gen)[: parts - 1] + 1).sort().values
    edges = torch.cat([torch.tensor([0]), cuts, torch.tensor([total])])
    return edges.diff()


def _rows_of_distinct(rows: int, width: int, upto: int, gen: torch.Generator) -> torch.Tensor:
    out = torch.empty(rows, width, dtype=torch.int64)
    for r in range(rows):
        if upto >= width:
            out[r] = torch.randperm(upto, generator=gen)[:width]
        else:
            out[r] = torch.randint(0, max(upto, 1), (width,), generator=gen)
    return out


def fill(
    definition: dict[str, Any],
    workload: dict[str, Any],
    inputs: list[Any],
    axes: dict[str, int],
    gen: torch.Generator,
) -> list[str]:
    """Replace the random structured inputs in place (on the device of the random tensor they
    replace); returns the names it filled."""
    names = list(definition["inputs"])
    specs = definition["inputs"]
    given = workload.get("inputs") or {}

    def random_input(name: str) -> bool:
        return (
            name in names
            and (given.get(name) or {}).get("type", "random") == "random"
            and isinstance(inputs[names.index(name)], torch.Tensor)
        )

    def put(name: str, values: torch.Tensor) -> None:
        i = names.index(name)
        old = inputs[i]
        inputs[i] = values.to(dtype=old.dtype, device=old.device).reshape(old.shape)

    filled: list[str] = []
    page_size = _page_size(axes)
    table = next((n for n in names if re.fullmatch(r"(block|page)_table", n)), None)
    for name in names:
        if not random_input(name):
            continue
        t = inputs[names.index(name)]
        shape = list(t.shape)
        if t.dtype in _INT and t.dim() == 1 and re.search(r"cu_seqlens|indptr", name):
            total = _total_axis(definition, axes)
            if total is None:
                continue
            put(name, torch.cat([torch.tensor([0]), _split(total, len(t) - 1, gen).cumsum(0)]))
            filled.append(name)
        elif t.dtype in _INT and t.dim() == 2 and name == table:
            pages = axes.get("num_pages")
            if pages is None:
                continue
            put(name, _rows_of_distinct(shape[0], shape[1], pages, gen))
            filled.append(name)
        elif (
            t.dtype in _INT
            and t.dim() == 1
            and re.fullmatch(r"(seq|kv)_lens?", name)
            and table
            and page_size
        ):
            per_row = inputs[names.index(table)].shape[1] * page_size
            put(name, torch.randint(1, per_row + 1, (len(t),), generator=gen))
            filled.append(name)
        elif t.dtype in _INT and t.dim() == 2 and name == "sparse_indices" and page_size:
            cache = next(
                (n for n in names if specs[n].get("shape") and specs[n]["shape"][0] == "num_pages"),
                None,
            )
            if cache is None or "num_pages" not in axes:
                continue
            tokens = axes["num_pages"] * page_size
            rows, k = shape
            values = _rows_of_distinct(rows, k, tokens, gen)
            for r in range(rows):  # some rows end in padding, none is all padding
                pad = (
                    int(torch.randint(0, max(1, k // 4), (1,), generator=gen)) if r % 3 == 2 else 0
                )
                if pad:
                    values[r, k - pad :] = -1
            put(name, values)
            filled.append(name)
        elif t.is_floating_point() and re.search(r"_scales?$", name):
            base = name[: name.rindex("_scale")]
            fp8 = [
                n
                for n in names
                if n.startswith(base)
                and n != name
                and str(specs[n].get("dtype", "")).startswith("float8")
            ]
            if fp8:
                put(name, torch.rand(t.shape, generator=gen) * 0.9 + 0.1)
                filled.append(name)
    return filled
