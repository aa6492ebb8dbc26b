"""How each definition is judged: the one table of evaluation presets.

One row per definition, used by fibtui's worker (which evaluator judges a result, with which
tolerances), by the official-parity runner (the extra flags of ``flashinfer-bench run``) and shown
by ``fibtui status`` and the Runs pane.

The evaluator is chosen the way flashinfer-bench's ``resolve_evaluator`` chooses it (its registry
on the main branch, 2026-05): a definition of ``op_type`` ``sampling`` gets the sampling evaluator;
a name containing ``moe_fp8_block_scale`` the low-bit one; the two DeepSeek sparse-attention names
the sparse-attention one; a name starting ``dsa_topk_indexer`` the top-k indexer one; anything else
the default (elementwise) one. More than one match is an error there and here. What each evaluator
checks is in ``docs/evaluators.md``.

Tolerances are flashinfer-bench's defaults (atol 1e-2, rtol 1e-2, every element must match) unless
the contest's official flags say otherwise: MoE is judged with atol 1, rtol 0.3 and a required
matched ratio of 0.9; GDN prefill is timed with warmup 1, iterations 5, trials 3 (its reference is
slow).

Standard library only: the worker imports this table too (it travels to bare GPU hosts and Modal
containers), so a definition is read by duck typing (an object with ``name``, ``op_type`` and
``tags``, or the definition's JSON dict).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: the evaluators, in flashinfer-bench's registry order (the default last)
EVALUATORS = ("sampling", "lowbit", "dsa_sparse_attention", "dsa_topk_indexer", "default")

#: the matched ratio an evaluator requires when the preset sets none (flashinfer-bench's own
#: defaults): the low-bit evaluator's 0.95, every other's 1.0 (the worker's evaluators read it)
LOWBIT_MATCHED_RATIO = 0.95
DEFAULT_MATCHED_RATIO = 1.0


def default_matched_ratio(evaluator: str) -> float:
    """The matched ratio ``evaluator`` requires when none is set."""
    return LOWBIT_MATCHED_RATIO if evaluator == "lowbit" else DEFAULT_MATCHED_RATIO


#: flashinfer-bench's sparse-attention evaluator matches these names exactly
DSA_SPARSE_ATTENTION_NAMES = frozenset(
    {
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1",
        "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    }
)

#: what each evaluator is, in one line (``fibtui status``, the Runs pane, docs/evaluators.md)
EVALUATOR_SUMMARY = {
    "default": "elementwise: shape, dtype, no inf/NaN, |err| <= atol or <= rtol*|ref| for the required share",
    "lowbit": "elementwise like default; the required matched ratio defaults to 0.95; reports the worst ratio",
    "sampling": "samples in the vocabulary and inside the top-k/top-p mask; sampled distribution within TVD 0.2",
    "dsa_topk_indexer": "indices reachable through the block table, no duplicates; scores at them, sorted, vs the reference's",
    "dsa_sparse_attention": "elementwise on output (and lse, which a value-returning solution may leave out)",
}


#: flashinfer-bench's evaluator classes by fibtui's names for them
EVALUATOR_CLASSES = {
    "DefaultEvaluator": "default",
    "LowBitEvaluator": "lowbit",
    "SamplingEvaluator": "sampling",
    "DsaTopkIndexerEvaluator": "dsa_topk_indexer",
    "DsaSparseAttentionEvaluator": "dsa_sparse_attention",
}


class EvaluatorConflict(ValueError):
    """More than one evaluator claims a definition (flashinfer-bench refuses such a definition)."""


def _field(definition: Any, name: str, default: Any = "") -> Any:
    if isinstance(definition, dict):
        return definition.get(name, default)
    return getattr(definition, name, default)


def evaluator_for(definition: Any) -> str:
    """The evaluator flashinfer-bench's registry picks for this definition."""
    name = str(_field(definition, "name") or "")
    op_type = str(_field(definition, "op_type") or "")
    claims = {
        "sampling": op_type == "sampling",
        "lowbit": "moe_fp8_block_scale" in name,
        "dsa_sparse_attention": name in DSA_SPARSE_ATTENTION_NAMES,
        "dsa_topk_indexer": name.startswith("dsa_topk_indexer"),
    }
    matches = [e for e in EVALUATORS if claims.get(e)]
    if len(matches) > 1:
        raise EvaluatorConflict(
            f"definition {name!r} is claimed by several evaluators: {', '.join(matches)}"
        )
    return matches[0] if matches else "default"


@dataclass(frozen=True)
class EvalPreset:
    atol: float = 1e-2
    rtol: float = 1e-2
    #: the share of elements that must be within tolerance; None: the evaluator's own default
    #: (1.0, or 0.95 for the low-bit evaluator)
    matched_ratio: float | None = None
    #: extra flags of `flashinfer-bench run` for the official shape of this definition
    parity_flags: tuple[str, ...] = field(default_factory=tuple)
    source: str = "flashinfer-bench defaults"
    evaluator: str = "default"

    @property
    def required_ratio(self) -> float:
        """The matched ratio that applies (the evaluator's default when none is set)."""
        if self.matched_ratio is not None:
            return self.matched_ratio
        return default_matched_ratio(self.evaluator)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["parity_flags"] = list(self.parity_flags)
        out["required_ratio"] = self.required_ratio
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> EvalPreset:
        """A preset from its JSON (:meth:`to_json`) or from a run's engine settings, which carry
        the same ``atol``/``rtol``/``matched_ratio``/``evaluator`` keys."""
        fields = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        fields["parity_flags"] = tuple(fields.get("parity_flags") or ())
        return cls(**fields)

    def describe(self) -> str:
        """One line: evaluator, tolerances, flags (``fibtui status``, the Runs pane)."""
        flags = f"; parity flags {' '.join(self.parity_flags)}" if self.parity_flags else ""
        return (
            f"{self.evaluator} evaluator, atol {self.atol:g} rtol {self.rtol:g} matched ratio "
            f"{self.required_ratio:g} ({self.source}{flags})"
        )


def is_moe(definition: Any) -> bool:
    op_type = str(_field(definition, "op_type") or "").lower()
    return op_type == "moe" or "moe" in str(_field(definition, "name") or "").lower().split("_")


def is_gdn_prefill(definition: Any) -> bool:
    name = str(_field(definition, "name") or "").lower()
    op_type = str(_field(definition, "op_type") or "").lower()
    tags = _field(definition, "tags", ()) or ()
    return (op_type == "gdn" or name.startswith("gdn")) and (
        "prefill" in name or "stage:prefill" in tags
    )


def preset_for(definition: Any) -> EvalPreset:
    evaluator = evaluator_for(definition)
    if is_moe(definition):
        return EvalPreset(
            1.0,
            0.3,
            0.9,
            ("--atol", "1", "--rtol", "0.3", "--required-matched-ratio", "0.9"),
            "contest preset for MoE",
            evaluator,
        )
    if is_gdn_prefill(definition):
        return EvalPreset(
            parity_flags=("--warmup-runs", "1", "--iterations", "5", "--num-trials", "3"),
            source="contest preset for GDN prefill",
            evaluator=evaluator,
        )
    return EvalPreset(evaluator=evaluator)


#: flashinfer-bench's timing defaults (its ``ResolvedEvalConfig``: warmup_runs, iterations,
#: num_trials), which a definition's contest flags override
BENCH_TIMING_DEFAULTS = {"warmup": 10, "iterations": 50, "trials": 3}
_TIMING_FLAGS = {"--warmup-runs": "warmup", "--iterations": "iterations", "--num-trials": "trials"}


def official_timing(preset: EvalPreset) -> dict[str, int]:
    """Warm-up, iterations and trials as the contest's command times this definition: its
    parity flags where they set them, else flashinfer-bench's defaults."""
    out = dict(BENCH_TIMING_DEFAULTS)
    flags = list(preset.parity_flags)
    for flag, key in _TIMING_FLAGS.items():
        if flag in flags[:-1]:
            out[key] = int(flags[flags.index(flag) + 1])
    return out


def describe_judging(engine: dict[str, Any] | None) -> str | None:
    """How a run's results were judged, from its engine settings (``settings.engine`` of a run
    record): ``dsa_topk_indexer evaluator, atol 0.01 rtol 0.01 matched ratio 1``; None for a run
    recorded before evaluators were named."""
    if not isinstance(engine, dict) or not isinstance(engine.get("evaluator"), str):
        return None
    preset = EvalPreset.from_json(engine)
    return (
        f"{preset.evaluator} evaluator, atol {preset.atol:g} rtol {preset.rtol:g} "
        f"matched ratio {preset.required_ratio:g}"
    )
