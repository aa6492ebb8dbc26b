"""Evaluators claim their definitions (fibtui.core.presets.CLAIMS) and the worker loads each from its
own module: an evaluator added at run time, as a module and one row, is chosen for what it claims
and judges, with its own default matched ratio."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from fibtui.core import presets

torch = pytest.importorskip(
    "torch", reason="the worker's evaluators judge torch tensors: torch comes with the gpu extra"
)


@pytest.fixture
def toy_evaluator(monkeypatch: pytest.MonkeyPatch) -> Any:
    from fibtui.worker.check import Verdict
    from fibtui.worker.evaluators import _LOADED, base

    class Toy(base.Evaluator):
        name = "toy_eval"

        def judge(self, j: base.Judging) -> Verdict:
            return Verdict("PASSED", 0.0, 0.0, self.default_ratio)

    module = types.ModuleType("fibtui.worker.evaluators.toy_eval")
    module.EVALUATOR = Toy()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    row = presets.EvaluatorClaim(
        "toy_eval", "a toy", "ToyEvaluator", lambda name, op: name.startswith("toy_"), 0.5
    )
    monkeypatch.setattr(presets, "CLAIMS", (row, *presets.CLAIMS))
    yield module.EVALUATOR
    _LOADED.pop("toy_eval", None)


def test_the_table_and_the_worker_agree() -> None:
    from fibtui.worker import evaluators

    loaded = evaluators._registry()
    assert tuple(loaded) == presets.EVALUATORS
    assert set(presets.EVALUATOR_SUMMARY) == set(presets.EVALUATORS)
    for claim in presets.CLAIMS:
        assert loaded[claim.name].name == claim.name
        assert loaded[claim.name].default_ratio == claim.default_ratio
    assert loaded["lowbit"].default_ratio == 0.95 and loaded["default"].default_ratio == 1.0
    assert presets.EvalPreset(evaluator="lowbit").required_ratio == 0.95
    assert presets.EvalPreset(evaluator="no_such_one").required_ratio == 1.0


def test_a_toy_evaluator_claims_and_judges(toy_evaluator: Any) -> None:
    from fibtui.worker import evaluators
    from fibtui.worker.check import Tolerance

    definition = {"name": "toy_add", "op_type": "elementwise", "inputs": {}, "outputs": {}}
    assert presets.evaluator_for(definition) == "toy_eval"
    assert presets.evaluator_for({"name": "plain_add", "op_type": "x"}) == "default"
    chosen = evaluators.for_definition(definition)
    assert chosen is toy_evaluator and chosen.default_ratio == 0.5
    out = torch.zeros(2)
    verdict = chosen.judge(
        evaluators.Judging(definition, ["y"], [], [out], [out + 9], Tolerance(1e-2, 1e-2))
    )
    assert verdict.status == "PASSED"  # the toy's judging, not the default's elementwise check
    with pytest.raises(presets.EvaluatorConflict, match="toy_eval, sampling"):
        presets.evaluator_for({"name": "toy_sampler", "op_type": "sampling"})
