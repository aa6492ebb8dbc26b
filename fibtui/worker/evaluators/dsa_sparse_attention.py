"""DeepSeek sparse attention (``output`` and the base-2 ``lse``): elementwise against the
reference, but a value-returning solution may return ``output`` alone, and then ``lse`` is not
checked; more outputs than the definition has is INCORRECT_SHAPE. Destination-passing solutions
fill both outputs, and both are checked."""

from __future__ import annotations

from typing import Any

import torch

from fibtui.worker.check import Verdict, compare
from fibtui.worker.evaluators.base import Evaluator, Judging


class DsaSparseAttention(Evaluator):
    name = "dsa_sparse_attention"

    def normalize(
        self, result: Any, names: list[str], dtypes: list[torch.dtype], device: torch.device
    ) -> list[torch.Tensor]:
        if result is None:
            return []
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        return [v if isinstance(v, torch.Tensor) else torch.tensor(v, device=device) for v in items]

    def judge(self, j: Judging) -> Verdict:
        if len(j.outputs) not in (1, 2) or len(j.outputs) > len(j.references):
            return Verdict(
                "INCORRECT_SHAPE",
                detail=f"returned {len(j.outputs)} outputs; expected output (and lse)",
            )
        n = len(j.outputs)
        verdict = compare(j.outputs, j.references[:n], j.names[:n], j.tol, self.default_ratio)
        if n == 1 and verdict.status == "PASSED":
            verdict.extra["lse"] = "not returned: not checked"
        return verdict


EVALUATOR = DsaSparseAttention()
