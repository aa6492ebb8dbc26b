"""Adaptive repeats: a sequential rule that stops repeating a workload once its paired interval
is decided, and stops the whole run once its verdict is, without inflating the error rate.

Everything here follows docs/measurement.md, "Adaptive repeats". It is pure: the runner
(:class:`fibtui.runners.local.LocalRunner`) asks :func:`schedule` what to run next and writes
down what it says.

Looks
    An adaptive run repeats in passes: pass ``k`` measures repeat ``k`` of every workload still
    undecided. After a pass every workload still measured has ``k`` paired repeats; that is look
    ``k`` of at most ``cap`` (``--repeats N`` under ``--adaptive``).

Repeated confidence intervals
    At look ``k`` a paired log ratio's interval is ``mean +- c_k sigma / sqrt(k)`` where a fixed
    design would use ``z``. The critical values ``c_1..c_K`` come from an alpha-spending function
    (Lan and DeMets' O'Brien-Fleming type, by default): of the overall two-sided error
    ``alpha = 1 - confidence``, the share ``f(k / K)`` may have been spent by look ``k``, and ``c_k``
    is set so that the chance that the standardized mean first leaves ``(-c_j, c_j)`` at look ``k``
    is ``f(k / K) - f((k - 1) / K)``. That chance is computed exactly for the running sum of
    independent normal increments (numerical integration of its density over the looks), so the
    chance that *any* look's interval misses the true value is ``f(1) = alpha``: every decision the
    rule takes at whatever look it stops, holds at the overall confidence.

Decided
    An interval of a log ratio is decided when it lies wholly below ``-tau`` (faster), wholly above
    ``+tau`` (slower) or wholly inside ``(-tau, +tau)`` (unchanged):
    :func:`fibtui.core.stats.classify`.

The rule (:func:`schedule`, after each pass)
    - a workload with a failed job stops (``failed``: more repeats cannot make it count);
    - every workload stops when the run's verdict is decided (``gate decided``): on the full set,
      the mean latency's interval says PROMOTE or REJECT (the interval that decides; G is
      context) and no workload's interval straddles the guard's
      margin; on a sample (a representative gate), every band's word is decided;
    - a workload stops when its own interval is decided (``decided``), or at the cap (``cap``);
    - every other workload gets its next repeat.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from fibtui.core import stats
from fibtui.core.measurement import Timed
from fibtui.core.status import PASSED

OBRIEN_FLEMING = "obrien-fleming"
POCOCK = "pocock"
SPENDINGS = (OBRIEN_FLEMING, POCOCK)
#: the most looks (``--repeats`` under ``--adaptive``)
MAX_CAP = 50
#: the cap under ``--adaptive`` when ``--repeats`` is not given
DEFAULT_CAP = 10
#: grid points of the numerical integration per look (Simpson's rule; 101 already agrees with
#: 401 to 4 decimals)
_GRID = 201

_NORMAL = statistics.NormalDist()
_SQRT_2PI = math.sqrt(2.0 * math.pi)

#: why a workload stopped (the journal's ``stop`` lines)
DECIDED = stats.STOP_DECIDED
GATE_DECIDED = "gate decided"
CAP = "cap"
FAILED = "failed"


# --------------------------------------------------------------------------------------------
# Spending functions and critical values
# --------------------------------------------------------------------------------------------


def _upper(x: float) -> float:
    """P(Z > x) for a standard normal Z, accurate far into the tail."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def spent(t: float, alpha: float, spending: str = OBRIEN_FLEMING) -> float:
    """The two-sided error ``f(t)`` that may be spent by information fraction ``t``:
    O'Brien-Fleming type ``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))`` (spends little early, so the last
    look is close to a fixed design's), or Pocock type ``alpha ln(1 + (e - 1) t)``."""
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == OBRIEN_FLEMING:
        return 2.0 * _upper(_NORMAL.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))
    if spending == POCOCK:
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    raise ValueError(f"spending must be one of {', '.join(SPENDINGS)}, got {spending!r}")


def _simpson(n: int) -> list[float]:
    return [1.0] + [4.0 if i % 2 else 2.0 for i in range(1, n - 1)] + [1.0]


def _crossing(xs: list[float], mass: list[float], b: float) -> float:
    """The chance of being outside (-b, b) at the next look, having stayed inside until now:
    ``mass`` is the density (times its integration weight) at ``xs`` of the sum so far on the
    region not crossed; the next increment is a standard normal."""
    if not xs:
        return 2.0 * _upper(b)
    return sum(m * (_upper(b - x) + _upper(b + x)) for x, m in zip(xs, mass, strict=True))


def _boundary(xs: list[float], mass: list[float], target: float, k: int) -> float:
    """The b with ``_crossing(b) = target`` (bisection: the crossing falls as b grows)."""
    lo, hi = 0.0, 60.0 * math.sqrt(k)
    if _crossing(xs, mass, hi) >= target:
        return hi
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if _crossing(xs, mass, mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _step(xs: list[float], mass: list[float], b: float) -> tuple[list[float], list[float]]:
    """The density of the sum one increment later, on (-b, b) (Simpson's rule)."""
    width = 2.0 * b / (_GRID - 1)
    ys = [-b + i * width for i in range(_GRID)]
    if xs:
        dens = [
            sum(m * math.exp(-0.5 * (y - x) ** 2) for x, m in zip(xs, mass, strict=True))
            / _SQRT_2PI
            for y in ys
        ]
    else:
        dens = [math.exp(-0.5 * y * y) / _SQRT_2PI for y in ys]
    weights = _simpson(_GRID)
    return ys, [d * w * width / 3.0 for d, w in zip(dens, weights, strict=True)]


@lru_cache(maxsize=64)
def critical_values(
    cap: int, confidence: float = stats.DEFAULT_CONFIDENCE, spending: str = OBRIEN_FLEMING
) -> tuple[float, ...]:
    """``c_1..c_cap`` (z scale) of the repeated confidence intervals: the standardized mean of
    ``k`` paired repeats stays within ``+-c_k`` at every look with probability ``confidence``.

    Numerical integration over the looks of the sum ``S_k`` of ``k`` standard normal increments:
    its density on the region not yet crossed, ``g_k(y) = int g_{k-1}(x) phi(y - x) dx`` over
    ``|x| < b_{k-1}``, and ``b_k = c_k sqrt(k)`` found by bisection so that the chance of first
    crossing at look ``k`` is the error spent there."""
    if not 1 <= cap <= MAX_CAP:
        raise ValueError(f"the cap must be within [1, {MAX_CAP}], got {cap}")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be within [0.5, 1), got {confidence}")
    alpha = 1.0 - confidence
    out: list[float] = []
    xs: list[float] = []
    mass: list[float] = []
    before = 0.0
    for k in range(1, cap + 1):
        now = spent(k / cap, alpha, spending)
        b = _boundary(xs, mass, now - before, k)
        before = now
        out.append(b / math.sqrt(k))
        if k < cap:
            xs, mass = _step(xs, mass, b)
    return tuple(out)


@dataclass(frozen=True)
class SequentialPlan:
    """The adaptive design of a run: at most ``cap`` looks, the overall ``confidence``, the
    spending function. Stored in the run header's ``settings.adaptive``."""

    cap: int
    confidence: float = stats.DEFAULT_CONFIDENCE
    spending: str = OBRIEN_FLEMING

    def __post_init__(self) -> None:
        if self.spending not in SPENDINGS:
            raise ValueError(f"spending must be one of {', '.join(SPENDINGS)}")
        critical_values(self.cap, self.confidence, self.spending)  # checks cap and confidence

    def critical(self, look: int) -> float:
        """``c_look`` (a look past the cap uses the last one)."""
        values = critical_values(self.cap, self.confidence, self.spending)
        return values[min(max(look, 1), self.cap) - 1]

    def look(self, k: int) -> stats.Look:
        return stats.Look(min(max(k, 1), self.cap), self.cap, self.critical(k), self.spending)

    def to_json(self) -> dict[str, Any]:
        return {
            "cap": self.cap,
            "confidence": self.confidence,
            "spending": self.spending,
            "critical_values": list(critical_values(self.cap, self.confidence, self.spending)),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SequentialPlan:
        return cls(
            int(obj["cap"]),
            float(obj.get("confidence", stats.DEFAULT_CONFIDENCE)),
            str(obj.get("spending", OBRIEN_FLEMING)),
        )


# --------------------------------------------------------------------------------------------
# One look at the rows of a run
# --------------------------------------------------------------------------------------------


@dataclass
class WorkloadState:
    """A workload at a look: its paired repeats, and what its interval says (for every
    candidate: decided only when decided for each)."""

    uuid: str
    repeats: int
    word: str = stats.UNDECIDED
    decided: bool = False
    failed: bool = False
    detail: str = ""


@dataclass
class Assessment:
    look: int
    gate_decided: bool
    gate_detail: str
    workloads: dict[str, WorkloadState] = field(default_factory=dict)


def _role_rows(rows: Iterable[Timed]) -> tuple[list[Timed], dict[str, list[Timed]]]:
    base: list[Timed] = []
    cands: dict[str, list[Timed]] = {}
    for r in rows:
        role = r.role
        if role == "baseline":
            base.append(r)
        elif role == "candidate":
            cands.setdefault(str(r.solution), []).append(r)
    return base, cands


def _workload_interval(
    pair: stats.WorkloadPair, noise: stats.PairNoise, plan: SequentialPlan
) -> tuple[float, float, float]:
    """(low, high, critical) of one workload's log ratio at its own look (its paired repeats):
    the look's critical value, as a Student t quantile of the same tail when sigma was estimated
    with few degrees of freedom."""
    c = critical_t(plan.critical(pair.pairs), noise.df)
    half = c * noise.sigma / math.sqrt(max(pair.pairs, 1))
    return pair.log_ratio - half, pair.log_ratio + half, c


def critical_t(c: float, df: float | None) -> float:
    """The critical value ``c`` (normal) moved to Student's t with ``df`` degrees of freedom at the
    same two-sided tail (None: the normal, sigma known)."""
    if df is None:
        return c
    return stats.t_quantile(_NORMAL.cdf(c), df)


@dataclass
class AdaptiveRule:
    """The rule of one adaptive run. ``floor_for(key)``: the noise floor for the rows' timing key
    (A/A history of the definition, device and timing kind); ``bands_for(rows)``: uuid -> band
    (the regime analysis), None for bands from the rows' axes; ``timing``: how the arms were
    timed when the rows do not say (tests)."""

    plan: SequentialPlan
    scope: str = "sample"
    settings: stats.StatsSettings = field(default_factory=stats.StatsSettings)
    floor_for: Callable[[stats.TimingKey | None], stats.NoiseFloor] | None = None
    bands_for: Callable[[Sequence[Timed]], Mapping[str, str] | None] | None = None
    timing: tuple[stats.TimingKey | None, stats.TimingKey | None] | None = None

    def compare(
        self,
        rows: Sequence[Timed],
        look: int,
        fixed: bool = False,
        decided: Mapping[str, str] | None = None,
    ) -> dict[str, stats.Comparison]:
        """Each candidate against the baseline at this look (``fixed``: as a fixed design, with
        no look: what the same rows say with every repeat planned up front; ``decided``: the
        workloads stopped as decided, whose word stands)."""
        base, cands = _role_rows(rows)
        key = stats.timing_key_of_rows(base)
        floor = (
            self.floor_for(key) if self.floor_for is not None else stats.noise_floor(self.settings)
        )
        band_of = self.bands_for(base) if self.bands_for is not None else None
        return {
            name: stats.paired_verdict(
                base,
                crows,
                baseline_name="baseline",
                candidate_name=name,
                band_of=band_of,
                settings=self.settings,
                floor=floor,
                scope=self.scope,
                timing=self.timing,
                look=None if fixed else self.plan.look(look),
                decided=None if fixed else decided,
            )
            for name, crows in cands.items()
        }

    def assess(self, rows: Sequence[Timed], repeats: Mapping[str, int]) -> Assessment:
        """What the rows say after a pass; ``repeats``: uuid -> completed repeats."""
        look = max(repeats.values(), default=0)
        comps = self.compare(rows, look) if look > 0 else {}
        states = {u: WorkloadState(u, n) for u, n in repeats.items()}
        for r in rows:
            state = states.get(str(r.uuid))
            if state is not None and r.status != PASSED:
                state.failed = True
        gate = [self._gate(c) for c in comps.values()]
        gate_decided = bool(gate) and all(decided for decided, _ in gate)
        gate_detail = "; ".join(detail for _, detail in gate)
        for uuid, state in states.items():
            words = [self._workload(c, uuid) for c in comps.values()]
            state.decided = bool(words) and all(decided for _, decided, _ in words)
            state.word = words[0][0] if len({w[0] for w in words}) == 1 else stats.MIXED
            state.detail = "; ".join(detail for _, _, detail in words if detail)
        return Assessment(look, gate_decided, gate_detail, states)

    def _workload(self, c: stats.Comparison, uuid: str) -> tuple[str, bool, str]:
        """(word, decided, detail) of one workload: decided when its interval is (and, on the full
        set, when it does not straddle the guard's margin: the guard could still fire there)."""
        pair = next((p for p in c.pairs if p.uuid == uuid), None)
        if pair is None or c.noise is None or not c.noise.estimated or c.no_speed_reason:
            return stats.UNDECIDED, False, c.no_speed_reason or ""
        lo, hi, crit = _workload_interval(pair, c.noise, self.plan)
        word = stats.classify(lo, hi, c.tau.tau)
        straddles = self.scope == "full" and self._straddles(pair, c)
        detail = (
            f"{c.candidate.name}: {word}, ratio {pair.ratio:.4f} [{stats.exp_or_inf(lo):.4f}, "
            f"{stats.exp_or_inf(hi):.4f}] after {pair.pairs} repeat(s) (critical value {crit:.3f})"
        )
        if straddles:
            detail += f"; could still be beyond the guard's +{c.guard_margin:.0%}"
        return word, word != stats.UNDECIDED and not straddles, detail

    def _straddles(self, pair: stats.WorkloadPair, c: stats.Comparison) -> bool:
        """Does this workload's interval hold the guard's margin, log(1 + margin)?"""
        assert c.noise is not None
        lo, hi, _ = _workload_interval(pair, c.noise, self.plan)
        return lo <= math.log1p(c.guard_margin) <= hi

    def _gate(self, c: stats.Comparison) -> tuple[bool, str]:
        name = c.candidate.name
        if c.no_speed_reason is not None:
            return False, f"{name}: no speed verdict ({c.no_speed_reason})"
        if not c.complete:
            return False, f"{name}: {c.verdict}"
        if self.scope == "sample":
            m = c.measured
            if m is None:
                return False, f"{name}: the band intervals are not judged"
            undecided = [b.band for b in m.bands if b.word == stats.UNDECIDED]
            return not undecided, f"{name}: {m.text}"
        # the mean latency's interval decides the full set (G is context)
        verdict = c.mean_latency_verdict
        if verdict not in (stats.PROMOTE, stats.REJECT) or c.noise is None:
            return False, f"{name}: mean-latency interval verdict {verdict}"
        straddle = [p.uuid for p in c.pairs if self._straddles(p, c)]
        if straddle:
            return False, (
                f"{name}: mean-latency interval verdict {verdict}, but {len(straddle)} "
                f"workload(s) could still be beyond the guard's +{c.guard_margin:.0%}"
            )
        change = c.mean_latency.change if c.mean_latency is not None else 0.0
        return True, f"{name}: {c.verdict} (mean latency {change * 100:+.2f}%)"


# --------------------------------------------------------------------------------------------
# Scheduling: what the runner does after a pass
# --------------------------------------------------------------------------------------------


@dataclass
class Stop:
    """One workload stops being repeated (a journal ``stop`` line)."""

    uuid: str
    repeats: int
    reason: str  # decided | gate decided | cap | failed
    detail: str = ""
    look: int = 0
    #: what its own interval said then (faster | slower | unchanged | undecided | mixed)
    word: str = stats.UNDECIDED

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "repeats": self.repeats,
            "reason": self.reason,
            "word": self.word,
            "detail": self.detail,
            "look": self.look,
        }


@dataclass
class Step:
    """What to do now: run these (uuid, repeat) groups; write these stops."""

    run: list[tuple[str, int]] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    assessment: Assessment | None = None


def completed(
    groups: Mapping[tuple[str, int], int], results: Iterable[Timed]
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """(uuid -> repeats whose every job has a result, uuid -> repeats still open, in order).
    ``groups``: (uuid, repeat) -> the number of jobs (solutions) of that group."""
    have: dict[tuple[str, int], int] = {}
    for r in results:
        key = (str(r.uuid), int(r.repeat or 0))
        have[key] = have.get(key, 0) + 1
    done: dict[str, int] = {}
    open_: dict[str, list[int]] = {}
    for (uuid, repeat), n in sorted(groups.items(), key=lambda kv: kv[0][1]):
        done.setdefault(uuid, 0)
        open_.setdefault(uuid, [])
        if have.get((uuid, repeat), 0) >= n:
            done[uuid] += 1
        else:
            open_[uuid].append(repeat)
    return done, open_


def schedule(
    rule: AdaptiveRule,
    groups: Mapping[tuple[str, int], int],
    results: Sequence[Timed],
    stopped: Iterable[str] = (),
) -> Step:
    """After a pass (or at the start, or on resume): the groups to run next and the workloads that
    stop. A pass interrupted half-way is finished first, without a look."""
    done, open_ = completed(groups, results)
    stopped = set(stopped)
    active = [u for u in done if u not in stopped]
    if not active:
        return Step()
    top = max(done[u] for u in active)
    behind = [u for u in active if done[u] < top and open_[u]]
    if top == 0 or behind:  # the first pass, or one to finish
        return Step(run=[(u, open_[u][0]) for u in (behind or active) if open_[u]])
    assessment = rule.assess(results, {u: done[u] for u in done})
    step = Step(assessment=assessment)
    for uuid in active:
        state = assessment.workloads[uuid]
        if state.failed:
            reason = FAILED
        elif assessment.gate_decided:
            reason = GATE_DECIDED
        elif state.decided:
            reason = DECIDED
        elif not open_[uuid] or done[uuid] >= rule.plan.cap:
            reason = CAP
        else:
            step.run.append((uuid, open_[uuid][0]))
            continue
        detail = assessment.gate_detail if reason == GATE_DECIDED else state.detail
        step.stops.append(Stop(uuid, done[uuid], reason, detail, assessment.look, state.word))
    return step


def run_outcome(stops: Iterable[Mapping[str, Any]]) -> tuple[str, str]:
    """Why a finished adaptive run stopped, from its workloads' stops: (word, sentence); word is
    ``decided`` (the run's verdict, or every workload's interval), ``cap reached``, ``failed``, or
    ``every repeat ran`` (no stop: the rule failed and the run went on as a fixed design)."""
    stops = list(stops)
    if not stops:
        return "every repeat ran", "the rule stopped no workload: every planned repeat ran"
    reasons = [str(s.get("reason")) for s in stops]
    looks = max((int(s.get("repeats") or 0) for s in stops), default=0)
    if FAILED in reasons:
        n = reasons.count(FAILED)
        return FAILED, f"{n} workload(s) had a failed job; the others stopped as the rule said"
    if GATE_DECIDED in reasons:
        detail = next(str(s.get("detail") or "") for s in stops if s.get("reason") == GATE_DECIDED)
        return DECIDED, f"the run's verdict was decided after {looks} repeat(s): {detail}"
    if reasons and all(r == DECIDED for r in reasons):
        return DECIDED, f"every workload's interval was decided (at most {looks} repeat(s))"
    n = reasons.count(CAP)
    return "cap reached", f"{n} workload(s) were still undecided at the cap of {looks} repeat(s)"


def groups_of(rows: Iterable[Timed]) -> dict[tuple[str, int], int]:
    """(uuid, repeat) -> the number of rows (jobs) of that group in a record."""
    out: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (str(r.uuid), int(r.repeat or 0))
        out[key] = out.get(key, 0) + 1
    return out


@dataclass
class Replay:
    """A fixed-design record run through the adaptive rule: the rows the adaptive design would
    have measured (the same values, up to where the rule stopped each workload), its stops, and
    the comparisons of both designs."""

    rows: list[Timed]
    stops: list[Stop]
    planned: int
    fixed: dict[str, stats.Comparison]
    adaptive: dict[str, stats.Comparison]

    @property
    def saved(self) -> float:
        """The share of the fixed design's jobs the adaptive design did not need."""
        return 1.0 - len(self.rows) / self.planned if self.planned else 0.0


def replay(rule: AdaptiveRule, rows: Sequence[Timed]) -> Replay:
    """What the adaptive rule would have done on a fixed-design record (``rule.plan.cap`` is the
    record's repeats): pass by pass, the repeats it asks for are taken from the record."""
    by_group: dict[tuple[str, int], list[Timed]] = {}
    for r in rows:
        key = (str(r.uuid), int(r.repeat or 0))
        by_group.setdefault(key, []).append(r)
    groups = {k: len(v) for k, v in by_group.items()}
    taken: list[Timed] = []
    stopped: dict[str, Stop] = {}
    while True:
        step = schedule(rule, groups, taken, stopped)
        for stop in step.stops:
            stopped[stop.uuid] = stop
        new = [r for key in step.run for r in by_group.get(key, [])]
        if not new:
            break
        taken += new
    done, _ = completed(groups, rows)
    looks = completed(groups, taken)[0]
    return Replay(
        taken,
        list(stopped.values()),
        len(rows),
        rule.compare(rows, max(done.values(), default=1), fixed=True),
        rule.compare(
            taken,
            max(looks.values(), default=1),
            decided={s.uuid: s.word for s in stopped.values() if s.reason == DECIDED},
        ),
    )
