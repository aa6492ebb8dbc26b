"""What a comparison says: its bands, guard hits and look, what a sample measured, and the
:class:`Comparison` with its recommendation and JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fibtui.core import measures
from fibtui.core.measures import FASTER, MIXED, SLOWER, UNDECIDED, WORDS, classify
from fibtui.core.stats.constants import (
    BLOCKED,
    INCOMPLETE,
    INCONCLUSIVE,
    INCORRECT,
    NOT_JUDGED,
    NOT_RUN_STATUSES,
    PROMOTE,
    REJECT,
)
from fibtui.core.stats.distributions import _NORMAL
from fibtui.core.stats.floor import NoiseFloor
from fibtui.core.stats.intervals import Interval, finite_or_none
from fibtui.core.stats.noise import PairNoise
from fibtui.core.stats.pairs import ArmSummary, WorkloadPair
from fibtui.core.status import is_tool_limit


@dataclass
class GuardHit:
    kind: str  # workload | band
    name: str
    ratio: float
    p_value: float
    detail: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BandResult:
    band: str
    workloads: int
    base_mean_ms: float
    cand_mean_ms: float
    change_pct: float  # 100 * (cand mean / base mean - 1)
    geomean_ratio: float
    ci_low: float
    ci_high: float
    wins: int
    ties: int
    losses: int
    regression: bool = False
    dispatch_candidate: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci_low"], out["ci_high"] = finite_or_none(self.ci_low), finite_or_none(self.ci_high)
        return out


@dataclass(frozen=True)
class Look:
    """Where an adaptive run is (or stopped): look ``look`` of at most ``cap``, each a repeat of
    the workloads still measured, with the critical value ``critical`` of the repeated confidence
    intervals there (:mod:`fibtui.core.sequential`). A comparison at a look uses that critical value
    where a fixed design uses ``z`` at its confidence, so every look's interval holds together with
    the others at the overall confidence."""

    look: int
    cap: int
    critical: float
    spending: str = "obrien-fleming"

    @property
    def nominal_confidence(self) -> float:
        """The two-sided confidence one interval at this look has on its own."""
        return 1.0 - 2.0 * _NORMAL.cdf(-self.critical)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "nominal_confidence": self.nominal_confidence}


@dataclass
class BandWord:
    """What one band's measured workloads say (a sample gate: its representatives)."""

    band: str
    word: str
    workloads: int
    ratio: float
    ci_low: float
    ci_high: float
    #: the band's share of the definition's latency in the regime analysis (None: not known)
    share: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci_low"], out["ci_high"] = finite_or_none(self.ci_low), finite_or_none(self.ci_high)
        return out

    def phrase(self) -> str:
        """``batch_size=1 by 24% (5% of latency)``; an undecided band shows its interval."""
        share = f"{_amount(self.share)} of latency" if self.share is not None else ""
        if self.word in (FASTER, SLOWER):
            change = 1.0 - self.ratio if self.word == FASTER else self.ratio - 1.0
            return f"{self.band} by {_amount(change)}" + (f" ({share})" if share else "")
        if self.word == UNDECIDED:
            said = (
                f"{_signed(self.ratio - 1.0)}, interval {_signed(self.ci_low - 1.0)} to "
                f"{_signed(self.ci_high - 1.0)}"
            )
            return f"{self.band} ({said}" + (f"; {share})" if share else ")")
        return self.band + (f" ({share})" if share else "")


_amount = measures.amount
_signed = measures.signed_pct
_natural = measures.natural_key


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass
class Measured:
    """What a comparison measured, band by band: ``faster`` / ``slower`` / ``unchanged`` /
    ``undecided`` where every band says the same; ``mixed`` where decided bands say different
    things (faster at one, unchanged at another), ``undecided`` where one decided word stands
    beside bands still undecided (an A/A gate: unchanged at two bands, undecided at the third is
    not "mixed"); ``text`` says it in one line ("mixed: faster at batch_size=1 by 24% (5% of
    latency); unchanged at batch_size=48 (20% of latency) and batch_size=64 (25% of latency)")."""

    word: str
    text: str
    bands: list[BandWord]
    tau: float
    #: the share of the definition's latency the measured bands hold (None: shares not known)
    share: float | None = None
    share_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["bands"] = [b.to_json() for b in self.bands]
        return out


def measure(
    bands: Sequence[BandResult],
    tau: float,
    shares: Mapping[str, float] | None = None,
    share_source: str | None = None,
    settled: Mapping[str, str] | None = None,
) -> Measured | None:
    """The word of each band (its interval against tau, :func:`classify`; ``settled``: bands an
    adaptive rule decided, with their word) and the overall word."""
    if not bands:
        return None
    shares = shares or {}
    settled = settled or {}
    words = [
        BandWord(
            b.band,
            settled.get(b.band) or classify(math.log(b.ci_low), math.log(b.ci_high), tau),
            b.workloads,
            b.geomean_ratio,
            b.ci_low,
            b.ci_high,
            shares.get(b.band),
        )
        for b in sorted(bands, key=lambda b: _natural(b.band))
    ]
    kinds = [w for w in WORDS if any(b.word == w for b in words)]
    groups = [f"{kind} at " + _and([b.phrase() for b in words if b.word == kind]) for kind in kinds]
    decided = [k for k in kinds if k != UNDECIDED]
    if len(decided) >= 2:  # the bands measured different things: faster here, unchanged there
        word = MIXED
    elif UNDECIDED in kinds:  # one decided word is not the whole gate's while a band is open
        word = UNDECIDED
    else:
        word = kinds[0]
    text = "; ".join(groups)
    if len(kinds) > 1:
        text = f"{word}: {text}"
    known = [b.share for b in words if b.share is not None]
    share = sum(known) if shares and len(known) == len(words) else None
    return Measured(word, text, words, tau, share, share_source if share is not None else None)


@dataclass
class Comparison:
    baseline: ArmSummary
    candidate: ArmSummary
    verdict: str
    interval_verdict: str
    geomean_ratio: float | None
    log_g: float | None
    interval: Interval | None
    tau: NoiseFloor
    confidence: float
    noise: PairNoise | None
    workloads: int
    pairs: list[WorkloadPair]
    unpaired: list[str]
    per_band: list[BandResult]
    guard: list[GuardHit]
    guard_margin: float
    tie_band: float
    complete: bool
    failures: list[str]
    notes: list[str] = field(default_factory=list)
    weighted: bool = False
    scope: str = "full"
    #: why the timings give no speed verdict (CPU interpreter, mixed timing kinds or devices)
    no_speed_reason: str | None = None
    #: what the bands measured (faster / slower / unchanged / mixed / undecided), when the band
    #: intervals were judged: a sample gate's headline
    measured: Measured | None = None
    #: an adaptive run's look (its intervals are repeated confidence intervals), else None
    look: Look | None = None
    #: the change of the mean latency with its interval (fibtui.core.measures), and what that
    #: interval says against tau (PROMOTE | REJECT | INCONCLUSIVE): the interval that decides
    mean_latency: measures.MeanLatencyChange | None = None
    mean_latency_verdict: str = INCONCLUSIVE
    #: the projected contest score against each denominator (the reference first, when the rows
    #: carry its latency; a named baseline solution after it)
    scores: list[measures.Score] = field(default_factory=list)
    #: the largest slowdowns (at most three), named in every verdict
    worst: list[measures.WorstWorkload] = field(default_factory=list)
    #: one line when G, the mean latency and the score do not say the same, else None
    disagreement: str | None = None
    #: what keeps a faster candidate from promoting until a person looks (``fibtui promote
    #: --force`` after review): latencies below the roofline floor of their workload (faster
    #: than physics allows), timed calls the gate did not check (docs/measurement.md, "A gate no
    #: candidate can game")
    integrity: list[str] = field(default_factory=list)

    @property
    def g_word(self) -> str:
        """What G's interval says against tau (faster / slower / unchanged / undecided)."""
        if self.interval is None:
            return UNDECIDED
        return classify(self.interval.log_low, self.interval.log_high, self.tau.tau)

    @property
    def score(self) -> measures.Score | None:
        """The first projected score (against the reference when the rows carry its latency)."""
        return self.scores[0] if self.scores else None

    @property
    def p95_change(self) -> float | None:
        b, c = self.baseline.p95_latency_ms, self.candidate.p95_latency_ms
        return c / b - 1.0 if b and c else None

    def latency_line(self) -> str | None:
        """The headline: ``avg 9.812 -> 9.431 us (-3.9%, interval -4.1% to -3.7%); p95 30.100 ->
        28.900 us (-4.0%)`` (None without a speed comparison)."""
        m = self.mean_latency
        if m is None:
            return None
        over = f" of these {m.workloads} workloads" if self.scope == "sample" else ""
        line = f"avg latency{over} {m.phrase()}"
        b, c = self.baseline.p95_latency_ms, self.candidate.p95_latency_ms
        if b and c:
            line += (
                f"; p95 {b * 1000:.3f} -> {c * 1000:.3f} us ({measures.signed_pct(c / b - 1.0)})"
            )
        return line

    def short_line(self) -> str:
        """One short line for a list of runs: ``avg -5.1% [-5.3%, -5.0%], p95 +0.0%; G 0.8974``."""
        m = self.mean_latency
        if m is None:
            return ""
        line = (
            f"avg {measures.signed_pct(m.change)} [{measures.signed_pct(m.low)}, "
            f"{measures.signed_pct(m.high)}]"
        )
        if self.p95_change is not None:
            line += f", p95 {measures.signed_pct(self.p95_change)}"
        if self.geomean_ratio is not None:
            line += f"; G {self.geomean_ratio:.4f}"
        return line

    def context_line(self) -> str | None:
        """Speedup as context: G with its interval, then each projected score."""
        if self.geomean_ratio is None:
            return None
        iv = self.interval
        kind = "repeated interval" if self.look is not None else "interval"
        parts = [
            f"G {self.geomean_ratio:.4f} ({measures.signed_pct(self.geomean_ratio - 1.0, 2)}"
            + (f", {kind} [{iv.low:.4f}, {iv.high:.4f}])" if iv else ", no interval)")
        ]
        parts += [s.phrase() for s in self.scores]
        return "; ".join(parts)

    def worst_line(self) -> str | None:
        """The worst workloads (``worst: ...``), None without a speed comparison."""
        if self.mean_latency is None:
            return None
        return measures.worst_line(self.worst)

    def verdict_lines(self) -> list[str]:
        """What every view of a verdict says, in order, as plain text (the CLI, the Promotion
        pane and the round summary show these): avg and p95 latency first, speedup (G, the
        projected score) as context, the worst workloads, and the disagreement line."""
        lines = [self.latency_line(), self.context_line(), self.worst_line()]
        if self.disagreement:
            lines.append(f"the measures disagree: {self.disagreement}")
        return [line for line in lines if line]

    @property
    def blocked_by(self) -> list[str]:
        return [f"{g.kind} {g.name}: {g.detail}" for g in self.guard] + list(self.integrity)

    @property
    def dispatch_bands(self) -> list[str]:
        return [b.band for b in self.per_band if b.dispatch_candidate]

    @property
    def error_rate(self) -> float:
        return (1.0 - self.confidence) / 2.0

    @property
    def wins(self) -> tuple[int, int, int]:
        return (
            sum(p.outcome == "win" for p in self.pairs),
            sum(p.outcome == "tie" for p in self.pairs),
            sum(p.outcome == "loss" for p in self.pairs),
        )

    def recommendation(self) -> str:
        """One sentence: what to do with this candidate."""
        if self.verdict == NOT_JUDGED:
            reasons = sorted(
                {
                    f.error or f.status
                    for arm in (self.baseline, self.candidate)
                    for f in arm.failures
                    if is_tool_limit(f.status)
                }
            )
            return (
                "not judged here, not a kernel failure: "
                + ("; ".join(reasons[:2]) or "this machine cannot build or run a solution")
                + " (run it where it can: a GPU host, or Modal's B200 with --backend modal)"
            )
        if self.no_speed_reason is not None and self.verdict != NOT_JUDGED:
            correct = (
                f"correctness: baseline {self.baseline.passed}/{self.baseline.rows}, candidate "
                f"{self.candidate.passed}/{self.candidate.rows} PASSED"
            )
            if self.verdict == INCOMPLETE:
                correct += " (fix or retry the failures)"
            elif self.verdict == INCORRECT:
                correct = (
                    f"incorrect: baseline {failure_counts(self.baseline)}; candidate "
                    f"{failure_counts(self.candidate)} (fix the failures)"
                )
            return (
                f"no speed verdict: {self.no_speed_reason}; {correct}; measure both on one GPU "
                "(--backend local or modal) to decide"
            )
        if self.verdict == INCOMPLETE:
            return (
                "incomplete: only runs with every workload PASSED count; fix or retry the failures"
            )
        if self.verdict == INCORRECT:
            return (
                f"incorrect: baseline {failure_counts(self.baseline)}; candidate "
                f"{failure_counts(self.candidate)}; every job ran, so fix the failures "
                "(a retry gives the same rows)"
            )
        if self.verdict == PROMOTE:
            return (
                "promote: the mean latency is faster beyond the noise floor, no regression "
                "beyond the guard"
            )
        extra = ""
        if self.dispatch_bands:
            extra = "; archive as a dispatch candidate for band " + ", ".join(self.dispatch_bands)
        if self.verdict == BLOCKED and self.integrity and not self.guard:
            return (
                "do not promote before a person looks: "
                + "; ".join(self.integrity)
                + " (fibtui promote --force once it is understood)"
            )
        if self.verdict == BLOCKED:
            return (
                "do not promote: the guard found a regression ("
                + "; ".join(self.blocked_by)
                + ")"
                + extra
            )
        if self.verdict == REJECT:
            return "reject: the mean latency is not faster by the noise floor" + extra
        return (
            "inconclusive: measure more (more repeats or workloads), or reject when the budget is spent"
            + extra
        )

    def to_json(self) -> dict[str, Any]:
        wins, ties, losses = self.wins
        iv = self.interval
        return {
            "verdict": self.verdict,
            "interval_verdict": self.interval_verdict,
            "recommendation": self.recommendation(),
            "baseline": self.baseline.name,
            "candidate": self.candidate.name,
            "geomean_ratio": self.geomean_ratio,
            "log_g": self.log_g,
            "ci_low": finite_or_none(iv.low) if iv else None,
            "ci_high": finite_or_none(iv.high) if iv else None,
            "log_ci": [finite_or_none(iv.log_low), finite_or_none(iv.log_high)] if iv else None,
            "interval_method": iv.method if iv else None,
            "confidence": self.confidence,
            "error_rate": self.error_rate,
            "tau": self.tau.tau,
            "tau_source": self.tau.source,
            "noise_floor": self.tau.to_json(),
            "pair_noise": asdict(self.noise) if self.noise else None,
            "workloads": self.workloads,
            "unpaired": list(self.unpaired),
            "wins": wins,
            "ties": ties,
            "losses": losses,
            "tie_band": self.tie_band,
            "weighted": self.weighted,
            "scope": self.scope,
            "per_band": [b.to_json() for b in self.per_band],
            "dispatch_bands": self.dispatch_bands,
            "blocked_by": self.blocked_by,
            "integrity": list(self.integrity),
            "guard": [g.to_json() for g in self.guard],
            "guard_margin": self.guard_margin,
            "complete": self.complete,
            "failures": list(self.failures),
            "threshold": {
                "baseline_mean_ms": self.baseline.mean_latency_ms,
                "rule": "the baseline's mean across repeats, never its best single run",
            },
            "arms": {"baseline": self.baseline.to_json(), "candidate": self.candidate.to_json()},
            "per_workload": [p.to_json() for p in self.pairs],
            "notes": list(self.notes),
            "no_speed_reason": self.no_speed_reason,
            "guard_judged": self.noise is not None and self.noise.estimated,
            "measured": self.measured.to_json() if self.measured else None,
            "look": self.look.to_json() if self.look else None,
            **self._measures_json(),
        }

    def _measures_json(self) -> dict[str, Any]:
        """The mean latency, the projected score, G's word, the worst workloads, the
        disagreement (the keys: fibtui/verbs/compare.py's docstring)."""
        m, s = self.mean_latency, self.score
        return {
            "mean_latency_change": m.change if m else None,
            "mean_latency_interval": [finite_or_none(m.low), finite_or_none(m.high)] if m else None,
            "mean_latency_verdict": self.mean_latency_verdict if m else None,
            "mean_latency": m.to_json() if m else None,
            "p95_latency_change": self.p95_change,
            "score": s.score if s else None,
            "score_baseline": s.score_baseline if s else None,
            "score_delta": s.delta if s else None,
            "score_interval": ([finite_or_none(s.low), finite_or_none(s.high)] if s else None),
            "score_denominator": s.denominator if s else None,
            "scores": [x.to_json() for x in self.scores],
            "words": {
                "g": self.g_word if self.geomean_ratio is not None else None,
                "mean_latency": m.word if m else None,
                "score": s.word if s else None,
            },
            "worst_workloads": [w.to_json() for w in self.worst],
            "disagreement": self.disagreement,
            "verdict_lines": self.verdict_lines(),
        }


def wrong_rows(*arms: ArmSummary) -> bool:
    """Did a row of these arms run and come out wrong (not a job that never ran to a result)?"""
    return any(f.status not in NOT_RUN_STATUSES for arm in arms for f in arm.failures)


def failure_counts(arm: ArmSummary) -> str:
    """``3/6 PASSED, 2 INCORRECT_NUMERICAL, 1 RUNTIME_ERROR``: an arm's rows by status."""
    by: dict[str, int] = {}
    for f in arm.failures:
        by[f.status] = by.get(f.status, 0) + 1
    rest = "".join(f", {n} {status}" for status, n in sorted(by.items(), key=lambda x: -x[1]))
    return f"{arm.passed}/{arm.rows} PASSED{rest}"
