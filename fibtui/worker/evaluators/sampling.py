"""Sampling operators (``op_type`` ``sampling``): a sample is judged by where it may fall and by
how often it falls there.

The expected distribution is the input ``probs`` restricted to the definition's mask and
renormalized: the mask is the top-k one when the name says ``top_k`` (every token at least as
likely as the k-th most likely: ties are allowed), the top-p one when it says ``top_p`` (the
tokens whose cumulative probability, most likely first, is within p + 0.05; at least one), both
for ``top_k_top_p``, none otherwise. Then:

1. the solution is called ``validation_trials`` times (100) on the input set; every sample must
   be in the vocabulary and inside the mask of its row (else INCORRECT_NUMERICAL);
2. the batch is repeated to about 10,000 rows and the solution called until every original row
   has ``distribution_samples`` samples (500,000); the total-variation distance between each row's
   sampled frequencies and the expected distribution must stay at or under ``tvd_threshold``
   (0.2) (else INCORRECT_NUMERICAL). The worst TVD is reported.

A random ``probs`` input is made a distribution (softmax of the random values), as the official
input generator does.
"""

from __future__ import annotations

from typing import Any

import torch

from fibtui.worker.check import Verdict, elementwise
from fibtui.worker.evaluators.base import Evaluator, Judging

VALIDATION_TRIALS = 100
DISTRIBUTION_SAMPLES = 500_000
TARGET_BATCH = 10_000
TVD_THRESHOLD = 0.2
TOP_P_EPS = 5e-2


def thresholding(name: str) -> str:
    name = name.lower()
    for method in ("top_k_top_p", "top_k", "top_p"):
        if method in name:
            return method
    return "none"


def _param(value: Any, row: int) -> float:
    if isinstance(value, torch.Tensor):
        return float(value.reshape(-1)[row if value.dim() > 0 else 0])
    return float(value)


def valid_mask(probs: torch.Tensor, method: str, params: dict[str, Any]) -> torch.Tensor:
    """Which tokens each row may sample."""
    probs = probs.unsqueeze(0) if probs.dim() == 1 else probs
    rows, vocab = probs.shape
    mask = torch.ones(rows, vocab, dtype=torch.bool, device=probs.device)
    if method in ("top_k", "top_k_top_p"):
        if "top_k" not in params:
            raise ValueError(f"{method} sampling needs a top_k input")
        for r in range(rows):
            k = int(_param(params["top_k"], r))
            if 0 < k < vocab:
                kth = probs[r].sort(descending=True).values[k - 1]
                mask[r] = probs[r] >= kth
    if method in ("top_p", "top_k_top_p"):
        if "top_p" not in params:
            raise ValueError(f"{method} sampling needs a top_p input")
        for r in range(rows):
            p = _param(params["top_p"], r)
            if 0 < p < 1:
                ordered, order = probs[r].sort(descending=True)
                keep = ordered.cumsum(0) <= p + TOP_P_EPS
                if not bool(keep.any()):
                    keep[0] = True
                nucleus = torch.zeros(vocab, dtype=torch.bool, device=probs.device)
                nucleus[order[keep]] = True
                mask[r] &= nucleus
    return mask


class Sampling(Evaluator):
    name = "sampling"

    def prepare_inputs(
        self,
        definition: dict[str, Any],
        workload: dict[str, Any],
        inputs: list[Any],
        gen: torch.Generator,
    ) -> None:
        names = list(definition["inputs"])
        kind = ((workload.get("inputs") or {}).get("probs") or {}).get("type", "random")
        if (
            "probs" in names
            and kind == "random"
            and isinstance(inputs[names.index("probs")], torch.Tensor)
        ):
            i = names.index("probs")
            inputs[i] = torch.softmax(inputs[i], dim=-1)

    def _params(self, j: Judging) -> dict[str, Any]:
        return {n: j.input(n) for n in ("top_k", "top_p") if n in j.definition["inputs"]}

    def judge(self, j: Judging) -> Verdict:
        if j.call is None:
            raise ValueError("the sampling evaluator needs to call the solution again")
        probs = j.input("probs")
        probs2 = probs.unsqueeze(0) if probs.dim() == 1 else probs
        rows, vocab = probs2.shape
        mask = valid_mask(probs2, thresholding(j.definition.get("name", "")), self._params(j))
        masked = probs2 * mask.float()
        expected = masked / masked.sum(dim=-1, keepdim=True)
        trials = int(j.tol.extra.get("sampling_validation_trials", VALIDATION_TRIALS))
        for t in range(trials):
            samples = (j.outputs if t == 0 else j.call(j.inputs))[0].reshape(-1).long()
            bad = (samples < 0) | (samples >= vocab)
            if bool(bad.any()):
                return Verdict(
                    "INCORRECT_NUMERICAL",
                    float("inf"),
                    float("inf"),
                    detail=f"samples {samples[bad][:8].tolist()} outside the vocabulary [0, {vocab})",
                )
            row = torch.arange(samples.numel(), device=samples.device) % rows
            outside = ~mask.to(samples.device)[row, samples]
            if bool(outside.any()):
                i = int(outside.nonzero()[0])
                return Verdict(
                    "INCORRECT_NUMERICAL",
                    float("inf"),
                    float("inf"),
                    detail=f"sample {int(samples[i])} of row {int(row[i])} is outside its "
                    f"{thresholding(j.definition.get('name', ''))} mask",
                )
        freqs = self._frequencies(
            j, rows, vocab, int(j.tol.extra.get("sampling_samples", DISTRIBUTION_SAMPLES))
        )
        tvds = [
            0.5 * float((freqs[r] - expected[r].to(freqs.device)).abs().sum()) for r in range(rows)
        ]
        worst_abs = worst_rel = 0.0
        for r in range(rows):
            c = elementwise("probs", freqs[r], expected[r].to(freqs.device).float(), j.tol, 1.0)
            worst_abs, worst_rel = max(worst_abs, c.max_abs), max(worst_rel, c.max_rel)
        tvd = max(tvds)
        threshold = float(j.tol.extra.get("sampling_tvd_threshold", TVD_THRESHOLD))
        extra = {"tvd": tvd, "tvds_per_batch": tvds}
        if tvd > threshold:
            return Verdict(
                "INCORRECT_NUMERICAL",
                worst_abs,
                worst_rel,
                detail=f"sampled distribution off: TVD {tvd:.4f} > {threshold:g}",
                extra=extra,
            )
        return Verdict("PASSED", worst_abs, worst_rel, extra=extra)

    def _frequencies(self, j: Judging, rows: int, vocab: int, samples_per_row: int) -> torch.Tensor:
        """Each original row's sampled frequencies over a batch repeated to about 10,000 rows."""
        assert j.call is not None
        repeat = max(1, TARGET_BATCH // rows)
        padded = []
        for name, value in zip(j.definition["inputs"], j.inputs, strict=True):
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                v = value.unsqueeze(0) if (name == "probs" and value.dim() == 1) else value
                padded.append(v.repeat(repeat, *([1] * (v.dim() - 1))))
            elif isinstance(value, torch.Tensor):
                padded.append(value.unsqueeze(0).repeat(repeat * rows))
            else:
                padded.append(value)
        counts = torch.zeros(rows, vocab, dtype=torch.int64)
        per_row = 0
        for _ in range(-(-samples_per_row // repeat)):
            s = j.call(padded)[0].reshape(-1).long().cpu()
            row = torch.arange(s.numel()) % rows
            counts.view(-1).index_add_(0, row * vocab + s.clamp(0, vocab - 1), torch.ones_like(s))
            per_row += s.numel() // rows
        return counts.float() / max(per_row, 1)


EVALUATOR = Sampling()
