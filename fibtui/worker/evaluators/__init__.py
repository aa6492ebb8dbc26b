"""Evaluators: who judges a solution's outputs, chosen per definition as flashinfer-bench chooses.

The choice is :func:`fibtui.core.presets.evaluator_for` (one table for the worker, the parity
runner, ``fibtui status`` and the Runs pane). Each evaluator is a module of its own:

- ``default``: every output elementwise against the reference (fibtui.worker.check);
- ``lowbit``: the same with a required matched ratio of 0.95 unless one is set (MoE FP8);
- ``dsa_sparse_attention``: elementwise, but a value-returning solution may return ``output``
  alone (``lse`` is then not checked);
- ``dsa_topk_indexer``: the returned indices must be reachable through the block table and
  distinct; then the scores at the returned indices, sorted, are compared with the scores at the
  reference's (order and ties do not matter);
- ``sampling``: samples must lie in the vocabulary and inside the top-k / top-p mask over many
  calls, and the sampled distribution must be within a total-variation distance of the masked
  probabilities.

An evaluator may also prepare a workload's random inputs the way the official one does (the top-k
indexer packs a random K cache into its FP8 page layout; sampling turns random probabilities into
a distribution). docs/evaluators.md describes each in full.

The interface (:class:`Evaluator`, :class:`Judging`) lives in ``base``, which every evaluator
module imports; this package's ``__init__`` is the registry and imports the modules.
"""

from __future__ import annotations

from typing import Any

from fibtui.core.presets import evaluator_for
from fibtui.worker.evaluators.base import Evaluator, Judging

__all__ = ["Evaluator", "Judging", "for_definition", "get"]


def _registry() -> dict[str, Evaluator]:
    from fibtui.worker.evaluators.dsa_sparse_attention import DsaSparseAttention
    from fibtui.worker.evaluators.dsa_topk_indexer import DsaTopkIndexer
    from fibtui.worker.evaluators.lowbit import LowBit
    from fibtui.worker.evaluators.sampling import Sampling

    return {
        e.name: e
        for e in (Evaluator(), LowBit(), Sampling(), DsaTopkIndexer(), DsaSparseAttention())
    }


def get(name: str) -> Evaluator:
    registry = _registry()
    if name not in registry:
        raise ValueError(f"unknown evaluator {name!r} (known: {', '.join(sorted(registry))})")
    return registry[name]


def for_definition(definition: dict[str, Any], name: str | None = None) -> Evaluator:
    """The evaluator named by the run's preset, else the one the registry picks."""
    return get(name or evaluator_for(definition))
