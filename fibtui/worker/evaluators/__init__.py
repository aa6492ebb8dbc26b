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
module imports. Each evaluator claims its definitions in one row of
:data:`fibtui.core.presets.CLAIMS` (standard library, so core reads it too); this package's
``__init__`` loads the module of each row by its name (``fibtui.worker.evaluators.<name>``, the
default's ``base``) and takes its ``EVALUATOR``. Adding an evaluator is its module and its row.
"""

from __future__ import annotations

import importlib
from typing import Any

from fibtui.core import presets
from fibtui.core.presets import evaluator_for
from fibtui.worker.evaluators.base import Evaluator, Judging

__all__ = ["Evaluator", "Judging", "for_definition", "get"]

_LOADED: dict[str, Evaluator] = {}


def _registry() -> dict[str, Evaluator]:
    """Every evaluator of the table by name, each module imported once."""
    for claim in presets.CLAIMS:
        name = claim.name
        if name not in _LOADED:
            module = importlib.import_module(
                f"fibtui.worker.evaluators.{'base' if name == 'default' else name}"
            )
            evaluator: Evaluator = module.EVALUATOR
            if evaluator.name != name:
                raise ValueError(f"{module.__name__}.EVALUATOR is {evaluator.name!r}, not {name!r}")
            _LOADED[name] = evaluator
    return {c.name: _LOADED[c.name] for c in presets.CLAIMS}


def get(name: str) -> Evaluator:
    registry = _registry()
    if name not in registry:
        raise ValueError(f"unknown evaluator {name!r} (known: {', '.join(sorted(registry))})")
    return registry[name]


def for_definition(definition: dict[str, Any], name: str | None = None) -> Evaluator:
    """The evaluator named by the run's preset, else the one the registry picks."""
    return get(name or evaluator_for(definition))
