"""Several candidates against one baseline, ranked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fibtui.core.measurement import Timed
from fibtui.core.stats.comparison import Comparison
from fibtui.core.stats.intervals import finite_or_none
from fibtui.core.stats.pairs import ArmSummary
from fibtui.core.stats.verdict import paired_verdict


@dataclass
class LeaderboardEntry:
    rank: int
    name: str
    comparison: Comparison | None  # None for the baseline's own row

    @property
    def arm(self) -> ArmSummary:
        assert self.comparison is not None
        return self.comparison.candidate

    def to_json(self) -> dict[str, Any]:
        c = self.comparison
        assert c is not None
        a = c.candidate
        return {
            "rank": self.rank,
            "name": self.name,
            "mean_latency_ms": a.mean_latency_ms,
            "p95_latency_ms": a.p95_latency_ms,
            "run_to_run_cv": a.run_to_run_cv,
            "complete": a.complete,
            "verdict": c.verdict,
            "mean_latency_change": c.mean_latency.change if c.mean_latency else None,
            "score": c.score.score if c.score else None,
            "score_delta": c.score.delta if c.score else None,
            "geomean_ratio": c.geomean_ratio,
            "ci_low": finite_or_none(c.interval.low) if c.interval else None,
            "ci_high": finite_or_none(c.interval.high) if c.interval else None,
            "blocked_by": c.blocked_by,
            "dispatch_bands": c.dispatch_bands,
        }


def _rank_key(a: ArmSummary) -> tuple[int, float, float, float]:
    """Complete first; then mean, p95, run-to-run CV, each compared to 9 significant digits (equal
    means are equal, whatever order the floating-point sums ran in)."""

    def key(x: float | None) -> float:
        return float("inf") if x is None else float(f"{x:.9g}")

    return (
        0 if a.complete else 1,
        key(a.mean_latency_ms),
        key(a.p95_latency_ms),
        key(a.run_to_run_cv),
    )


def leaderboard(
    baseline_rows: Sequence[Timed],
    candidates: Mapping[str, Sequence[Timed]],
    *,
    baseline_name: str = "baseline",
    hashes: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> list[LeaderboardEntry]:
    """Every candidate against the baseline, ranked by mean latency, then p95, then run-to-run
    variance (complete candidates first)."""
    hashes = hashes or {}
    comps = [
        paired_verdict(
            baseline_rows,
            rows,
            baseline_name=baseline_name,
            candidate_name=name,
            candidate_hash=hashes.get(name),
            baseline_hash=hashes.get(baseline_name),
            **kwargs,
        )
        for name, rows in candidates.items()
    ]
    comps.sort(key=lambda c: (_rank_key(c.candidate), c.candidate.name))
    return [LeaderboardEntry(i + 1, c.candidate.name, c) for i, c in enumerate(comps)]
