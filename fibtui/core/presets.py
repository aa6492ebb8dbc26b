"""The official evaluation presets per definition, used by fibtui's own checks and by the
official-parity runner alike.

- default: atol 1e-2, rtol 1e-2, every element must match (flashinfer-bench's defaults);
- MoE (op_type ``moe``): atol 1, rtol 0.3, required matched ratio 0.9 (the contest's flags);
- GDN prefill: warmup 1, iterations 5, trials 3 (the contest's flags; the reference is slow).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fibtui.core.dataset import Definition


@dataclass(frozen=True)
class EvalPreset:
    atol: float = 1e-2
    rtol: float = 1e-2
    matched_ratio: float = 1.0
    #: extra flags of `flashinfer-bench run` for the official shape of this definition
    parity_flags: tuple[str, ...] = field(default_factory=tuple)
    source: str = "flashinfer-bench defaults"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["parity_flags"] = list(self.parity_flags)
        return out


def is_moe(definition: Definition) -> bool:
    return definition.op_type.lower() == "moe" or "moe" in definition.name.lower().split("_")


def is_gdn_prefill(definition: Definition) -> bool:
    name = definition.name.lower()
    return (definition.op_type.lower() == "gdn" or name.startswith("gdn")) and (
        "prefill" in name or "stage:prefill" in definition.tags)


def preset_for(definition: Definition) -> EvalPreset:
    if is_moe(definition):
        return EvalPreset(1.0, 0.3, 0.9, ("--atol", "1", "--rtol", "0.3", "--required-matched-ratio", "0.9"),
                          "contest preset for MoE")
    if is_gdn_prefill(definition):
        return EvalPreset(parity_flags=("--warmup-runs", "1", "--iterations", "5", "--num-trials", "3"),
                          source="contest preset for GDN prefill")
    return EvalPreset()
