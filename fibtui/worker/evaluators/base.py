"""The evaluator's interface: :class:`Judging` (what one check looks at) and :class:`Evaluator`
(the default evaluator, every output elementwise against the reference). Each evaluator module
subclasses it and names its instance ``EVALUATOR``; the package's ``__init__`` holds the registry
that loads them by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fibtui.core.presets import default_ratio_of
from fibtui.worker.check import Tolerance, Verdict, compare, normalize


@dataclass
class Judging:
    """What one correctness check of one input set looks at."""

    definition: dict[str, Any]
    names: list[str]
    inputs: list[Any]
    outputs: list[torch.Tensor]
    references: list[torch.Tensor]
    tol: Tolerance
    #: calls the solution again on given inputs and returns its outputs (the sampling evaluator
    #: calls it many times); None where the caller cannot
    call: Callable[[list[Any]], list[torch.Tensor]] | None = None

    def input(self, name: str) -> Any:
        return self.inputs[list(self.definition["inputs"]).index(name)]


class Evaluator:
    """The default evaluator: every output elementwise against the reference."""

    name = "default"

    @property
    def default_ratio(self) -> float:
        """The matched ratio when the preset sets none (its row in fibtui.core.presets.CLAIMS)."""
        return default_ratio_of(self.name)

    def prepare_inputs(
        self,
        definition: dict[str, Any],
        workload: dict[str, Any],
        inputs: list[Any],
        gen: torch.Generator,
    ) -> None:
        """Adjust freshly made inputs in place (the generator is the input set's own, so the
        result is reproducible from the seed)."""

    def normalize(
        self, result: Any, names: list[str], dtypes: list[torch.dtype], device: torch.device
    ) -> list[torch.Tensor]:
        """A value-returning solution's result as a list of outputs (a wrong count raises: the
        solution's RUNTIME_ERROR, as in flashinfer-bench)."""
        return normalize(result, names, dtypes, device)

    def judge(self, j: Judging) -> Verdict:
        return compare(j.outputs, j.references, j.names, j.tol, self.default_ratio)


EVALUATOR = Evaluator()
