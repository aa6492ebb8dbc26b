"""Low-bit (MoE FP8 block-scale) outputs: elementwise like the default evaluator, with a required
matched ratio of 0.95 when the preset sets none (the contest's MoE preset sets 0.9); the worst
matched ratio is reported."""

from __future__ import annotations

from fibtui.core.presets import LOWBIT_MATCHED_RATIO
from fibtui.worker.evaluators.base import Evaluator


class LowBit(Evaluator):
    name = "lowbit"
    default_ratio = LOWBIT_MATCHED_RATIO
