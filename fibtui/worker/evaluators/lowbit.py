"""Low-bit (MoE FP8 block-scale) outputs: elementwise like the default evaluator, with a required
matched ratio of 0.95 when the preset sets none (the contest's MoE preset sets 0.9); the worst
matched ratio is reported."""

from __future__ import annotations

from fibtui.worker.evaluators.base import Evaluator


class LowBit(Evaluator):
    name = "lowbit"  # its default matched ratio, 0.95, is its row's (fibtui.core.presets.CLAIMS)


EVALUATOR = LowBit()
