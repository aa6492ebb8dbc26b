"""Baseline against candidate (:func:`diff_summaries`, :func:`diff_reports`, :func:`diff_bands`):
per kernel and band, each compact metric before / after / delta / percent, with classification
changes flagged."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fibtui.core.ncu.classify import HostGaps
from fibtui.core.ncu.records import NcuReport
from fibtui.core.ncu.summary import KernelSummary, summarize

DIFF_FIELDS: tuple[str, ...] = (
    "duration_us",
    "compute_throughput_pct",
    "memory_throughput_pct",
    "dram_throughput_pct",
    "l2_hit_rate_pct",
    "registers_per_thread",
    "dynamic_shared_memory_bytes",
    "static_shared_memory_bytes",
    "theoretical_occupancy_pct",
    "achieved_occupancy_pct",
    "waves_per_sm",
    "grid_blocks",
    "block_threads",
    "block_limit_registers",
    "block_limit_shared_memory",
    "block_limit_warps",
    "block_limit_blocks",
    "l2_persisting_size_bytes",
    "local_spilling_requests",
)


@dataclass
class MetricDelta:
    metric: str
    before: float | None
    after: float | None

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    @property
    def pct(self) -> float | None:
        d = self.delta
        return None if d is None or not self.before else d / abs(self.before) * 100.0

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "before": self.before,
            "after": self.after,
            "delta": self.delta,
            "pct": self.pct,
        }


@dataclass
class KernelDiff:
    band: str | None
    kernel: str
    baseline: KernelSummary
    candidate: KernelSummary
    metrics: list[MetricDelta]

    @property
    def changes(self) -> list[str]:
        """Classification changes, in words (empty when nothing changed)."""
        out = []
        b, c = self.baseline.classification, self.candidate.classification
        if b.bottleneck != c.bottleneck:
            out.append(f"bottleneck {b.bottleneck or '?'} -> {c.bottleneck or '?'}")
        if b.limiter != c.limiter:
            out.append(f"limiter {b.limiter or 'none'} -> {c.limiter or 'none'}")
        if b.grid_too_small != c.grid_too_small:
            out.append("grid too small" if c.grid_too_small else "grid no longer too small")
        kinds_b = {f.kind for f in b.findings}
        kinds_c = {f.kind for f in c.findings}
        out += [f"new finding: {k}" for k in sorted(kinds_c - kinds_b) if not k.endswith("-bound")]
        out += [f"gone: {k}" for k in sorted(kinds_b - kinds_c) if not k.endswith("-bound")]
        return out

    @property
    def classification_changed(self) -> bool:
        b, c = self.baseline.classification, self.candidate.classification
        return (b.bottleneck, b.limiter, b.grid_too_small) != (
            c.bottleneck,
            c.limiter,
            c.grid_too_small,
        )

    def to_json(self) -> dict[str, Any]:
        b, c = self.baseline.classification, self.candidate.classification
        return {
            "band": self.band,
            "kernel": self.kernel,
            "instances": {"before": self.baseline.instances, "after": self.candidate.instances},
            "bottleneck": {"before": b.bottleneck, "after": c.bottleneck},
            "limiter": {"before": b.limiter, "after": c.limiter},
            "classification_changed": self.classification_changed,
            "changes": self.changes,
            "metrics": [m.to_json() for m in self.metrics],
        }


@dataclass
class ReportDiff:
    pairs: list[KernelDiff]
    only_in_baseline: list[tuple[str | None, str]]
    only_in_candidate: list[tuple[str | None, str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "pairs": [p.to_json() for p in self.pairs],
            "only_in_baseline": [{"band": b, "kernel": k} for b, k in self.only_in_baseline],
            "only_in_candidate": [{"band": b, "kernel": k} for b, k in self.only_in_candidate],
            "classification_changed": [
                {"band": p.band, "kernel": p.kernel, "changes": p.changes}
                for p in self.pairs
                if p.classification_changed
            ],
        }


def _base_name(name: str) -> str:
    """``void k<float>(float*, int)`` -> ``k``: for matching a mangled/demangled pair."""
    head = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    return head.split()[-1] if head.split() else name


def diff_kernel(base: KernelSummary, cand: KernelSummary) -> KernelDiff:
    deltas = [
        MetricDelta(k, base.get(k), cand.get(k))
        for k in DIFF_FIELDS
        if base.get(k) is not None or cand.get(k) is not None
    ]
    return KernelDiff(
        base.band if base.band is not None else cand.band, base.name, base, cand, deltas
    )


def diff_summaries(base: Sequence[KernelSummary], cand: Sequence[KernelSummary]) -> ReportDiff:
    """Match kernels by (band, name); a side without bands matches by name alone; a last pass
    matches on the bare function name. Unmatched kernels are listed per side."""
    left, right = list(base), list(cand)
    pairs: list[KernelDiff] = []

    def match(key: Callable[[KernelSummary, KernelSummary], bool]) -> None:
        for b in list(left):
            for c in right:
                if key(b, c):
                    pairs.append(diff_kernel(b, c))
                    left.remove(b)
                    right.remove(c)
                    break

    match(lambda b, c: b.band == c.band and b.name == c.name)
    match(lambda b, c: (b.band is None or c.band is None) and b.name == c.name)
    match(
        lambda b, c: (
            (b.band == c.band or b.band is None or c.band is None)
            and _base_name(b.name) == _base_name(c.name)
        )
    )
    return ReportDiff(pairs, [(s.band, s.name) for s in left], [(s.band, s.name) for s in right])


def diff_reports(
    base: NcuReport,
    cand: NcuReport,
    host_base: HostGaps | None = None,
    host_cand: HostGaps | None = None,
) -> ReportDiff:
    return diff_summaries(summarize(base, host_base), summarize(cand, host_cand))


def diff_bands(
    base: Mapping[str, NcuReport | Sequence[KernelSummary]],
    cand: Mapping[str, NcuReport | Sequence[KernelSummary]],
) -> ReportDiff:
    """Per band: ``{band label: report}`` on each side; kernels are relabelled with the band."""

    def flatten(side: Mapping[str, NcuReport | Sequence[KernelSummary]]) -> list[KernelSummary]:
        out = []
        for label, item in side.items():
            for s in summarize(item) if isinstance(item, NcuReport) else item:
                out.append(KernelSummary(**{**s.__dict__, "band": label}))
        return out

    return diff_summaries(flatten(base), flatten(cand))
