"""The measures of a paired verdict besides G (docs/measurement.md, "Three measures"): the change
of the mean latency, the projected contest score, the worst workloads, and the line that says why
the measures disagree when they do.

Every interval here comes from the same paired noise model as the guard and the bands: ``sigma``,
the noise of one paired log ratio (:func:`fibtui.core.stats.pair_noise`), and ``q``, the critical
value at the comparison's confidence (Student's t with sigma's degrees of freedom, the normal for
A/A sigma, an adaptive look's own critical value). Workload ``w`` has the baseline's mean latency
``b_w``, the candidate's ``c_w``, the paired log ratio ``d_w`` with ``r_w`` pairs, and the weight
``a_w`` (1 unless a caller weights the workloads). The noise of ``d_w`` is ``sigma / sqrt(r_w)``.

Mean latency
    ``M = sum_w a_w L_w / sum_w a_w`` for each arm; the change is ``M_c / M_b - 1``. Its interval,
    on ``l = log(M_c / M_b)``: ``l +- q SE`` with
    ``SE = sigma sqrt(sum_w (a_w c_w)^2 / r_w) / sum_w a_w c_w`` (the delta method: a change of
    ``d_w`` moves ``M_c`` by ``a_w c_w d_w``). The workloads are the fixed set measured (the whole
    benchmark of a full sweep); only the measurement noise is uncertain.

Score
    The contest's score of a solution is the arithmetic mean over workloads of its speedups:
    ``S = sum_w a_w n_w / L_w / sum_w a_w``, where the numerator ``n_w`` is the reference's latency
    (the starter kit's definition) or a named baseline solution's (e.g. a FlashInfer wrapper).
    ``score`` is the candidate's, ``score_baseline`` the baseline's (same numerators),
    ``score_delta = S_c - S_b``; the interval of ``S_c`` with the baseline's held at its value:
    ``S_c +- q SE``, ``SE = sigma sqrt(sum_w (a_w n_w / c_w)^2 / r_w) / sum_w a_w``. The
    numerators are taken as measured (a named baseline measured in another run is not paired
    with this one; the interval then errs narrow by that run's noise, which a note says).

Words
    Each measure's interval is read against the noise floor tau with :func:`classify` (on the log
    of the ratio; for the score, on ``log(S_b / S_c)`` so that ``faster`` means a higher score).

Worst workloads
    The (at most) three workloads with the largest ratio ``c_w / b_w`` above 1, each with its
    band and its interval ``exp(d_w +- q sigma / sqrt(r_w))``: named in every verdict, also when the
    guard cannot be judged.

Disagreement
    When the words of G, the mean latency and the score are not all the same and one of them is
    ``faster`` or ``slower``, one line says which and why: where G (every workload alike) and the
    mean latency (workloads weighted by their time) part, the band that moves the mean the most
    against G, with its share of the baseline's time and its change ("G faster, mean latency
    slower: batch_size=64 holds 24% of the time and is 4% slower"); where the score (workloads
    weighted by their speedup) parts from the mean latency, the band that moves the score the
    most, with its share of the score.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fibtui.core.stats import WorkloadPair

FASTER = "faster"
SLOWER = "slower"
UNCHANGED = "unchanged"
UNDECIDED = "undecided"
MIXED = "mixed"
WORDS = (FASTER, SLOWER, UNCHANGED, UNDECIDED)

#: the denominator of the starter kit's score: the definition's reference implementation
REFERENCE = "reference"
#: at most this many workloads are named as the worst
WORST_COUNT = 3


def classify(log_low: float, log_high: float, tau: float) -> str:
    """What an interval of a log ratio says against the noise floor: ``faster`` (wholly below
    -tau), ``slower`` (wholly above +tau), ``unchanged`` (wholly inside (-tau, +tau)), else
    ``undecided``."""
    if log_high < -tau:
        return FASTER
    if log_low > tau:
        return SLOWER
    if -tau < log_low and log_high < tau:
        return UNCHANGED
    return UNDECIDED


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def signed_pct(x: float, digits: int = 1) -> str:
    """``+4.0%`` for 0.04 (``+0.0%``, never ``-0.0%``, for what rounds to nothing)."""
    value = round(x * 100, digits)
    return f"{value if value != 0 else 0.0:+.{digits}f}%"


def amount(x: float) -> str:
    """``24%`` or ``4.0%`` for 0.24 and -0.04 (no sign)."""
    pct = abs(x) * 100.0
    return f"{pct:.0f}%" if pct >= 9.95 else f"{pct:.1f}%"


def natural_key(text: str) -> tuple[Any, ...]:
    """A sort key that orders ``batch_size=2`` before ``batch_size=10``."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


# --------------------------------------------------------------------------------------------
# Mean latency
# --------------------------------------------------------------------------------------------


@dataclass
class MeanLatencyChange:
    """The change of the mean latency over the paired workloads, with its interval."""

    base_ms: float
    cand_ms: float
    log_change: float
    log_low: float
    log_high: float
    word: str
    #: how the interval was made (the noise it used)
    method: str
    workloads: int

    @property
    def change(self) -> float:
        """``M_c / M_b - 1``: negative is faster."""
        return self.cand_ms / self.base_ms - 1.0

    @property
    def low(self) -> float:
        return _exp(self.log_low) - 1.0

    @property
    def high(self) -> float:
        return _exp(self.log_high) - 1.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["change"] = self.change
        out["interval"] = [_finite(self.low), _finite(self.high)]
        out["log_low"], out["log_high"] = _finite(self.log_low), _finite(self.log_high)
        return out

    def phrase(self) -> str:
        """``9.812 -> 9.431 us (-3.9%, interval -4.1% to -3.7%)``."""
        return (
            f"{self.base_ms * 1000:.3f} -> {self.cand_ms * 1000:.3f} us ({signed_pct(self.change)}, "
            f"interval {signed_pct(self.low)} to {signed_pct(self.high)})"
        )


def mean_latency_change(
    pairs: Sequence[WorkloadPair], sigma: float, q: float, tau: float, method: str
) -> MeanLatencyChange | None:
    """The mean latency's change and its interval from the paired noise (module docstring)."""
    pairs = [p for p in pairs if p.weight > 0]
    if not pairs:
        return None
    weight = sum(p.weight for p in pairs)
    base = sum(p.weight * p.base_mean_ms for p in pairs) / weight
    cand = sum(p.weight * p.cand_mean_ms for p in pairs) / weight
    if base <= 0 or cand <= 0:
        return None
    total = sum(p.weight * p.cand_mean_ms for p in pairs)
    se = sigma * math.sqrt(sum((p.weight * p.cand_mean_ms) ** 2 / max(p.pairs, 1) for p in pairs))
    se /= total
    log_change = math.log(cand / base)
    lo, hi = log_change - q * se, log_change + q * se
    return MeanLatencyChange(
        base, cand, log_change, lo, hi, classify(lo, hi, tau), method, len(pairs)
    )


# --------------------------------------------------------------------------------------------
# The contest score
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Numerators:
    """One denominator of the score: whose latency each workload's speedup is measured against
    (``reference``, or ``solution NAME``), uuid -> that latency in ms."""

    denominator: str
    latencies: Mapping[str, float]
    note: str | None = None
    #: how those latencies were timed when it differs from the arms' (``host-timed``), shown
    #: with the score
    qualifier: str | None = None


@dataclass
class Score:
    """The projected contest score of both arms against one denominator."""

    #: ``reference`` or ``solution NAME``
    denominator: str
    score: float
    score_baseline: float
    low: float
    high: float
    word: str
    workloads: int
    #: workloads paired but left out (no numerator for them)
    missing: int = 0
    note: str | None = None
    #: how the denominator's latencies were timed, when not as the arms' (``host-timed``)
    qualifier: str | None = None

    @property
    def delta(self) -> float:
        return self.score - self.score_baseline

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["score_delta"] = self.delta
        out["score_interval"] = [_finite(self.low), _finite(self.high)]
        out["score_delta_interval"] = [
            _finite(self.low - self.score_baseline),
            _finite(self.high - self.score_baseline),
        ]
        del out["low"], out["high"]
        return out

    def phrase(self) -> str:
        """``score 41.23 (+1.30, interval +0.80 to +1.80) against the reference``."""
        d_lo, d_hi = self.low - self.score_baseline, self.high - self.score_baseline
        how = f" ({self.qualifier})" if self.qualifier else ""
        return (
            f"score {self.score:.2f} ({self.delta:+.2f}, interval {d_lo:+.2f} to {d_hi:+.2f}) "
            f"against the {self.denominator}{how}"
        )


def contest_score(
    pairs: Sequence[WorkloadPair],
    numerators: Mapping[str, float],
    sigma: float,
    q: float,
    tau: float,
    denominator: str = REFERENCE,
    note: str | None = None,
    qualifier: str | None = None,
) -> Score | None:
    """Both arms' mean speedup over ``numerators`` (uuid -> the denominator's latency in ms),
    with the interval of the candidate's (module docstring); None when no paired workload has a
    numerator."""
    pairs = [p for p in pairs if p.weight > 0]
    have = [
        p
        for p in pairs
        if isinstance(numerators.get(p.uuid), (int, float))
        and math.isfinite(numerators[p.uuid])
        and numerators[p.uuid] > 0
    ]
    if not have:
        return None
    weight = sum(p.weight for p in have)
    s_c = sum(p.weight * numerators[p.uuid] / p.cand_mean_ms for p in have) / weight
    s_b = sum(p.weight * numerators[p.uuid] / p.base_mean_ms for p in have) / weight
    se = (
        sigma
        * math.sqrt(
            sum(
                (p.weight * numerators[p.uuid] / p.cand_mean_ms) ** 2 / max(p.pairs, 1)
                for p in have
            )
        )
        / weight
    )
    lo, hi = s_c - q * se, s_c + q * se
    # faster = a higher score: the word of log(S_b / S_c), whose interval uses SE / S_c
    rel = se / s_c
    log_ratio = math.log(s_b / s_c)
    word = classify(log_ratio - q * rel, log_ratio + q * rel, tau)
    missing = len(pairs) - len(have)
    if missing and note is None:
        note = f"{missing} paired workload(s) have no {denominator} latency and are left out"
    return Score(denominator, s_c, s_b, lo, hi, word, len(have), missing, note, qualifier)


# --------------------------------------------------------------------------------------------
# The worst workloads
# --------------------------------------------------------------------------------------------


@dataclass
class WorstWorkload:
    uuid: str
    axes: dict[str, int]
    band: str
    ratio: float
    ci_low: float
    ci_high: float
    pairs: int

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["change"] = self.ratio - 1.0
        out["ci_low"], out["ci_high"] = _finite(self.ci_low), _finite(self.ci_high)
        return out

    def phrase(self) -> str:
        """``200a3ebd (batch_size=64) +3.2% [+2.6%, +3.8%], band batch_size=64``."""
        axes = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        name = self.uuid[:8] + (f" ({axes})" if axes else "")
        shown = self.band and self.band != "all" and self.band != axes
        band = f", band {self.band}" if shown else ""
        return (
            f"{name} {signed_pct(self.ratio - 1.0)} "
            f"[{signed_pct(self.ci_low - 1.0)}, {signed_pct(self.ci_high - 1.0)}]{band}"
        )


def worst_workloads(
    pairs: Sequence[WorkloadPair], sigma: float, q: float, count: int = WORST_COUNT
) -> list[WorstWorkload]:
    """The ``count`` largest slowdowns (ratio above 1), largest first, each with its interval."""
    slower = sorted((p for p in pairs if p.log_ratio > 0), key=lambda p: -p.log_ratio)
    out = []
    for p in slower[:count]:
        half = q * sigma / math.sqrt(max(p.pairs, 1))
        out.append(
            WorstWorkload(
                p.uuid,
                dict(p.axes),
                p.band,
                p.ratio,
                _exp(p.log_ratio - half),
                _exp(p.log_ratio + half),
                p.pairs,
            )
        )
    return out


def worst_line(worst: Sequence[WorstWorkload]) -> str:
    """``worst: A +3.2% [...]; B ...`` or ``worst: no workload slower``."""
    if not worst:
        return "worst: no workload slower"
    return "worst: " + "; ".join(w.phrase() for w in worst)


# --------------------------------------------------------------------------------------------
# When the measures disagree
# --------------------------------------------------------------------------------------------


def _groups(pairs: Sequence[WorkloadPair]) -> list[tuple[str, list[WorkloadPair]]]:
    """The bands of the pairs, or each workload on its own when there is one band."""
    bands: dict[str, list[WorkloadPair]] = {}
    for p in pairs:
        bands.setdefault(p.band, []).append(p)
    if len(bands) > 1:
        return sorted(bands.items(), key=lambda kv: natural_key(kv[0]))
    out = []
    for p in pairs:
        axes = ", ".join(f"{k}={v}" for k, v in p.axes.items())
        out.append((f"workload {p.uuid[:8]}" + (f" ({axes})" if axes else ""), [p]))
    return out


def _direction(word: str, log_value: float) -> float:
    """-1 (faster), +1 (slower), 0 (unchanged) of a measure, from its word when decided and
    else from its point value."""
    if word == FASTER:
        return -1.0
    if word == SLOWER:
        return 1.0
    if word == UNCHANGED:
        return 0.0
    return -1.0 if log_value < 0 else (1.0 if log_value > 0 else 0.0)


def _time_reason(pairs: Sequence[WorkloadPair], toward_slower: bool) -> str | None:
    """The group whose time moves the mean latency the most in one direction, with its share of
    the baseline's time and its change."""
    pairs = [p for p in pairs if p.weight > 0]
    total = sum(p.weight * p.base_mean_ms for p in pairs)
    if total <= 0:
        return None
    best: tuple[float, str, float, float] | None = None
    for name, group in _groups(pairs):
        base = sum(p.weight * p.base_mean_ms for p in group)
        cand = sum(p.weight * p.cand_mean_ms for p in group)
        moved = (cand - base) if toward_slower else (base - cand)
        if best is None or moved > best[0]:
            best = (moved, name, base / total, cand / base - 1.0 if base > 0 else 0.0)
    if best is None or best[0] <= 0:
        return None
    _, name, share, change = best
    how = "slower" if change > 0 else "faster"
    return f"{name} holds {amount(share)} of the time and is {amount(change)} {how}"


def _score_reason(
    pairs: Sequence[WorkloadPair], numerators: Mapping[str, float], toward_lower: bool
) -> str | None:
    """The group that moves the score the most in one direction, with its share of the
    baseline's score and the change of its own speedups."""
    have = [p for p in pairs if p.weight > 0 and (numerators.get(p.uuid) or 0) > 0]
    total = sum(p.weight * numerators[p.uuid] / p.base_mean_ms for p in have)
    if total <= 0:
        return None
    best: tuple[float, str, float, float] | None = None
    for name, group in _groups(have):
        base = sum(p.weight * numerators[p.uuid] / p.base_mean_ms for p in group)
        cand = sum(p.weight * numerators[p.uuid] / p.cand_mean_ms for p in group)
        moved = (base - cand) if toward_lower else (cand - base)
        if best is None or moved > best[0]:
            best = (moved, name, base / total, cand / base - 1.0 if base > 0 else 0.0)
    if best is None or best[0] <= 0:
        return None
    _, name, share, change = best
    how = "lower" if change < 0 else "higher"
    return f"{name} gives {amount(share)} of the score and its speedup is {amount(change)} {how}"


def _differ(word_a: str, dir_a: float, word_b: str, dir_b: float) -> bool:
    """Two measures disagree when they point different ways (an undecided one by its point
    value) and at least one of them is decided faster or slower: a claim the other does not
    share. Two that point the same way, one decided and one not, differ only in how sure they
    are."""
    decided = word_a in (FASTER, SLOWER) or word_b in (FASTER, SLOWER)
    return decided and dir_a != dir_b


def _score_word(word: str) -> str:
    """A score's word as the line says it: higher for faster."""
    return {FASTER: "higher", SLOWER: "lower"}.get(word, word)


def disagreement(
    pairs: Sequence[WorkloadPair],
    g_word: str,
    log_g: float,
    mean: MeanLatencyChange | None,
    score: Score | None = None,
    numerators: Mapping[str, float] | None = None,
) -> str | None:
    """One line when G, the mean latency and the score do not say the same (module docstring),
    else None."""
    if mean is None:
        return None
    parts: list[str] = []
    m_dir = _direction(mean.word, mean.log_change)
    g_dir = _direction(g_word, log_g)
    if _differ(g_word, g_dir, mean.word, m_dir):
        # the mean weights each workload by its time; G counts each alike
        reason = _time_reason(pairs, toward_slower=m_dir > g_dir)
        part = f"G {g_word}, mean latency {mean.word}"
        parts.append(part + (f": {reason}" if reason else ""))
    s_dir = (
        _direction(score.word, math.log(score.score_baseline / score.score))
        if score is not None
        else m_dir
    )
    if score is not None and _differ(score.word, s_dir, mean.word, m_dir):
        reason = _score_reason(pairs, numerators or {}, toward_lower=s_dir > m_dir)
        lead = "" if parts else f"mean latency {mean.word}, "
        part = f"{lead}score against the {score.denominator} {_score_word(score.word)}"
        parts.append(part + (f": {reason}" if reason else ""))
    return "; ".join(parts) if parts else None
