"""Deciding that a candidate is faster: paired ratios, an interval, a noise floor, a verdict.

Everything here follows docs/measurement.md, "Deciding that a candidate is faster". Latency is the
decision metric; speedup against the reference is context only.

Pairing (per workload w)
    ``d_w = mean_j log(cand_wj / base_wj)``, pairing repeat j of the candidate with repeat j of
    the baseline when both exist (fibtui's paired runs time them in the same process,
    interleaved). When the two arms share no repeat numbers (two result files, or several rows per
    workload without repeat numbers) ``d_w = log(mean cand_w / mean base_w)``. Only PASSED rows
    carry a latency; a workload is paired when both arms have at least one.

Aggregate
    ``G = exp(sum_w a_w d_w / sum_w a_w)``: the geometric mean of the per-workload ratios, equal
    weights unless the caller gives weights (``a_w``).

Interval for log G (two-sided, ``confidence`` 95% by default), chosen by what is known and by
the scope of the workloads: ``full`` (they are the whole set the decision is about: a full sweep, a
result file of every workload) or ``sample`` (they stand in for it: a representative gate):
    - ``z, A/A-calibrated``: full scope with A/A history: a z-interval for this fixed set of
      workloads, SE = sqrt(sum a_w^2 sigma^2 / r_w) / sum a_w, where sigma, the noise of one
      paired log ratio, is the A/A sessions' (never below this run's own repeat-to-repeat noise).
      More repeats narrow it, as they should for a fixed set;
    - ``bootstrap``: about 20 or more workloads (full scope without A/A history, or sample scope):
      the percentile interval of a bootstrap over workloads (2,000 resamples, seed 0:
      deterministic), widened to contain the t-interval (the bootstrap runs narrow at a few dozen
      workloads; it matters for skew);
    - ``t``: 3 to 19 workloads: a Student-t interval across workloads, n - 1 degrees of freedom
      (works at one repeat);
    - sample scope with A/A history: the across-workloads interval widened to contain the z one;
    - none: fewer than 3 workloads and no A/A history: INCONCLUSIVE.
    Repeats are never bootstrapped (1-5 repeats make a bootstrap reject far more than it claims).

Noise floor
    ``tau = max(min_gain, p99 of |log G| over the A/A sessions)``; ``min_gain`` is fibtui.toml
    ``[stats] min_gain`` (default 0.01). The source is stated: ``default 1%``, ``fibtui.toml
    [stats] min_gain 2%`` or ``A/A history: N sessions``. A/A sessions (the same code against
    itself) are (1) fibtui runs under ``optimize_ops/runs`` whose baseline and candidate snapshots
    have the same ``source_hash``, and (2) the lines of ``optimize_ops/benchmarks/aa.jsonl``,
    appended by ``fibtui compare --aa`` (two runs of the same code). Sessions measured on another
    GPU than the comparison's are left out when both GPUs are known.

Verdict (the interval verdict)
    PROMOTE if the upper bound of log G < -tau; REJECT if the lower bound > -tau; otherwise
    INCONCLUSIVE. With a 95% two-sided interval, a candidate that is not faster is promoted at most
    2.5% of the time (``error_rate``); tau only lowers that.

What a sample measured (``measure``, ``Comparison.measured``)
    per band, its interval against tau: faster (wholly below -tau), slower (wholly above +tau),
    unchanged (wholly inside), else undecided; overall the bands' word when they agree, else
    ``mixed``, in one sentence with each band's change and its share of the definition's latency.
    A sample (scope ``sample``) never says PROMOTE: that is the full sweep's.

Final verdict
    ``NOT_JUDGED`` when a row says UNSUPPORTED_HERE (this machine cannot build or run a solution:
    a limit of the tool, not the kernel's failure); else ``INCORRECT`` when a row of either arm
    ran and is wrong (its counts in the recommendation); else ``INCOMPLETE`` when a workload lacks
    one arm or a job did not run to a result (INFRA_ERROR: retry it; only runs with every
    workload PASSED count); else ``BLOCKED`` when the regression guard fires and the
    interval does not say REJECT; else the interval verdict.

Regression guard
    One-sided tests that a workload's (or a band's) true ratio exceeds ``1 + guard_margin``
    (default 5%), with the noise of one paired log ratio sigma (below) and its degrees of freedom,
    Holm-corrected at 5% across the workloads (and separately across the bands). Each one that
    fires is named in ``blocked_by``.

Noise of one paired log ratio (sigma), for the guard, the band intervals and the z-interval
    the largest of this run's pooled repeat-to-repeat spread (workloads with 2+ paired repeats),
    the A/A sessions' pooled sigma and the jobs' paired blocks (``block_noise``: sqrt(pi/2) x the
    pooled spread of log(cand block / base block) / sqrt(blocks)); with none of them, the standard deviation of the per-workload ratios
    around their band's mean, scaled by sqrt(repeats) (real differences inside a band count as noise
    there, so the guard errs toward not blocking); never below 0.3%.

Latency summaries of one arm (``ArmSummary``)
    per repeat j: the mean and the p95 over workloads of that repeat's PASSED latencies; the arm's
    ``mean_latency_ms`` and ``p95_latency_ms`` are the means of those across repeats (the
    threshold a candidate is compared with is the baseline's mean across repeats, never its best
    single run); ``best_repeat_mean_ms`` (context only) and ``run_to_run_cv`` (the coefficient of
    variation of the repeat means). p95 is :func:`fibtui.core.numbers.p95`.

Bands
    per band: mean latency before and after (means over the band's workloads of their per-workload
    means), percent change of those means, the band's geometric-mean ratio with its interval
    (sigma above, Student's t with sigma's degrees of freedom), and wins / ties / losses per workload with a tie band of +-0.5% (fibtui.toml
    ``[stats] tie_band``). A band whose whole interval is below -tau while the global verdict is
    not PROMOTE is reported as a dispatch candidate: "archive as a dispatch candidate for band X".

Several candidates: :func:`leaderboard` ranks them by mean latency, then p95, then run-to-run
variance, each with its own verdict against the baseline.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core import measures, numbers
from fibtui.core.errors import InputError
from fibtui.core.measurement import Timed
from fibtui.core.measures import FASTER as FASTER
from fibtui.core.measures import MIXED as MIXED
from fibtui.core.measures import SLOWER as SLOWER
from fibtui.core.measures import UNCHANGED as UNCHANGED
from fibtui.core.measures import UNDECIDED as UNDECIDED
from fibtui.core.measures import WORDS as WORDS
from fibtui.core.measures import classify as classify
from fibtui.core.status import PASSED, is_tool_limit

if TYPE_CHECKING:
    from fibtui.core.results import ResultRow, RunTable

DEFAULT_MIN_GAIN = 0.01
DEFAULT_CONFIDENCE = 0.95
DEFAULT_GUARD_MARGIN = 0.05
DEFAULT_TIE_BAND = 0.005
GUARD_ALPHA = 0.05
MIN_NOISE = 0.003
DEFAULT_NOISE = 0.02
T_MIN_WORKLOADS = 3
BOOTSTRAP_MIN_WORKLOADS = 20
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
AA_FILE = "benchmarks/aa.jsonl"

PROMOTE = "PROMOTE"
REJECT = "REJECT"
INCONCLUSIVE = "INCONCLUSIVE"
BLOCKED = "BLOCKED"
INCOMPLETE = "INCOMPLETE"
#: every job of both arms ran and some rows are wrong (INCORRECT_*, RUNTIME_ERROR, COMPILE_ERROR,
#: TIMEOUT, a failed check): the candidate or the baseline fails, nothing is missing to retry
INCORRECT = "INCORRECT"
#: statuses that say a job did not run to a verdict of the kernel (retry it): missing, not wrong
NOT_RUN_STATUSES = frozenset({"INFRA_ERROR", "PENDING", "SKIPPED", "QUEUED", "RUNNING"})
#: a solution could not be judged on this machine (UNSUPPORTED_HERE rows): no speed verdict, and
#: not the kernel's failure either
NOT_JUDGED = "NOT_JUDGED"
#: the arms' timings cannot decide speed (CPU-interpreter wall times, or the arms timed differently
#: or on different devices): correctness only
NO_SPEED_VERDICT = "NO_SPEED_VERDICT"
CPU_INTERPRETER = "cpu-interpreter"


@dataclass(frozen=True)
class TimingKey:
    """How a latency was measured: the timing kind (``cupti``: fibtui on a GPU;
    ``cpu-interpreter``: Triton's interpreter, wall time; ``flashinfer-bench``: a file written by
    flashinfer-bench or the hand workflow around it) and the device (None when not stated).
    Verdicts, guards, dispatch advice and tau come only from GPU timings of one key."""

    kind: str
    device: str | None = None

    def label(self) -> str:
        return f"{self.kind} on {self.device}" if self.device else f"{self.kind}, device not stated"


def timing_key_of_rows(rows: Sequence[Timed]) -> TimingKey | None:
    """The key the rows themselves carry (fibtui journal rows: ``timing.kind`` and
    ``timing.environment.gpu``), or None when they carry none. Mixed rows give the first."""
    for r in rows:
        timing = r.timing
        if isinstance(timing, Mapping) and isinstance(timing.get("kind"), str):
            raw_env = timing.get("environment")
            env: Mapping[str, Any] = raw_env if isinstance(raw_env, Mapping) else {}
            device = env.get("gpu") if env.get("backend") != "interpreter" else None
            return TimingKey(str(timing["kind"]), str(device) if device else None)
    return None


def speed_blocker(base: TimingKey | None, cand: TimingKey | None) -> str | None:
    """Why these two arms' latencies cannot give a speed verdict, or None."""
    keys = [k for k in (base, cand) if k is not None]
    if any(k.kind == CPU_INTERPRETER for k in keys):
        return "CPU-interpreter timings give no speed verdict (wall times of Triton's interpreter say nothing about a GPU)"
    if base is not None and cand is not None:
        if base.kind != cand.kind:
            return f"the arms were timed differently ({base.label()} vs {cand.label()})"
        if base.device and cand.device and base.device != cand.device:
            return f"the arms were measured on different devices ({base.device} vs {cand.device})"
    return None


# --------------------------------------------------------------------------------------------
# Distributions (Student t from the regularized incomplete beta function; normal from stdlib)
# --------------------------------------------------------------------------------------------

_NORMAL = statistics.NormalDist()


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        a * math.log(x)
        + b * math.log1p(-x)
        - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float | None) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (None or inf: the normal)."""
    if df is None or math.isinf(df) or df > 1e6:
        return _NORMAL.cdf(t)
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@lru_cache(maxsize=256)
def t_quantile(p: float, df: float | None) -> float:
    """The p-quantile of Student's t (bisection on :func:`t_cdf`; None or inf: the normal)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile p must be within (0, 1), got {p}")
    z = _NORMAL.inv_cdf(p)
    if df is None or math.isinf(df) or df > 1e6:
        return z
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > p:
        lo *= 2.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


def holm(p_values: Sequence[float], alpha: float = GUARD_ALPHA) -> list[bool]:
    """Holm's step-down correction: which hypotheses are rejected at family-wise level alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] <= alpha / (m - rank):
            rejected[i] = True
        else:
            break
    return rejected


# --------------------------------------------------------------------------------------------
# Settings and the noise floor
# --------------------------------------------------------------------------------------------


@dataclass
class StatsSettings:
    min_gain: float = DEFAULT_MIN_GAIN
    confidence: float = DEFAULT_CONFIDENCE
    guard_margin: float = DEFAULT_GUARD_MARGIN
    tie_band: float = DEFAULT_TIE_BAND
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED
    #: where min_gain came from: "default" or "fibtui.toml"
    min_gain_source: str = "default"

    @classmethod
    def from_workspace(cls, root: str | Path | None) -> StatsSettings:
        """``[stats]`` of the workspace's fibtui.toml (min_gain, confidence, guard_margin, tie_band)."""
        out = cls()
        if root is None:
            return out
        from fibtui.core.settings import get_setting, settings_path

        table = get_setting(root, "stats", {})
        if not isinstance(table, dict):
            raise InputError(settings_path(root), "expected a table", field="stats")
        limits = {
            "min_gain": (0.0, 0.5),
            "confidence": (0.5, 0.9999),
            "guard_margin": (0.0, 10.0),
            "tie_band": (0.0, 0.5),
        }
        for key, (lo, hi) in limits.items():
            if key not in table:
                continue
            value = table[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not lo <= float(value) <= hi
            ):
                raise InputError(
                    settings_path(root),
                    f"expected a number within [{lo}, {hi}], got {value!r}",
                    field=f"stats.{key}",
                )
            setattr(out, key, float(value))
            if key == "min_gain":
                out.min_gain_source = "fibtui.toml"
        return out


@dataclass
class AASession:
    """One A/A session: the same code measured against itself."""

    source: str  # a run id, or "A vs B" of the compared files
    kind: str  # paired-run | compare --aa
    log_g: float
    sigma: float | None  # noise of one paired log ratio
    workloads: int
    repeats: int
    definition: str | None = None
    gpu: str | None = None
    verdict: str | None = None  # what the comparison said at the time (tracks false promotions)
    timing_kind: str | None = None  # cupti | flashinfer-bench | cpu-interpreter (None: not known)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class NoiseFloor:
    tau: float
    source: str
    min_gain: float
    aa_sessions: int = 0
    aa_p99_abs_log_g: float | None = None
    aa_sigma: float | None = None
    aa_promotions: int = (
        0  # A/A sessions that were promoted when recorded: the real false-positive count
    )
    sessions: list[AASession] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["sessions"] = [s.to_json() for s in self.sessions]
        return out


def _pct(x: float) -> str:
    text = f"{x * 100:.2f}".rstrip("0").rstrip(".")
    return f"{text}%"


def noise_floor(
    settings: StatsSettings | None = None,
    sessions: Sequence[AASession] = (),
    key: str | None = None,
) -> NoiseFloor:
    """tau = max(min_gain, p99 |log G| over the A/A sessions), with where it came from; ``key``
    names the (definition, device, timing kind) the sessions were chosen by."""
    settings = settings or StatsSettings()
    sessions = list(sessions)
    if settings.min_gain_source == "default":
        gain_text = f"default {_pct(settings.min_gain)}"
    else:
        gain_text = f"fibtui.toml [stats] min_gain {_pct(settings.min_gain)}"
    if not sessions:
        return NoiseFloor(settings.min_gain, gain_text, settings.min_gain)
    p99 = numbers.percentile([abs(s.log_g) for s in sessions], 0.99) or 0.0
    sigmas = [
        (s.sigma, max(s.workloads * s.repeats - 1, 1))
        for s in sessions
        if s.sigma is not None and s.sigma > 0
    ]
    sigma = None
    if sigmas:
        dof = sum(w for _, w in sigmas)
        sigma = math.sqrt(sum(sg * sg * w for sg, w in sigmas) / dof)
    n = len(sessions)
    word = "session" if n == 1 else "sessions"
    promotions = sum(1 for s in sessions if s.verdict == PROMOTE)
    history = f"A/A history ({key})" if key else "A/A history"
    if p99 > settings.min_gain:
        source = f"{history}: {n} {word}, p99 |log G| {_pct(p99)}"
        tau = p99
    else:
        source = f"{gain_text}; {history}: {n} {word}, p99 |log G| {_pct(p99)}"
        tau = settings.min_gain
    return NoiseFloor(tau, source, settings.min_gain, n, p99, sigma, promotions, sessions)


# --------------------------------------------------------------------------------------------
# Rows -> arms
# --------------------------------------------------------------------------------------------


@dataclass
class Failure:
    uuid: str
    status: str
    repeat: int | None = None
    error: str | None = None
    axes: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        axes = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        rep = f" repeat {self.repeat}" if self.repeat is not None else ""
        err = f": {self.error}" if self.error else ""
        return f"{self.uuid}{' (' + axes + ')' if axes else ''}{rep} {self.status}{err}"


@dataclass
class ArmSummary:
    """One solution's rows: pass counts and latency across repeats (PASSED rows only)."""

    name: str
    role: str
    rows: int
    passed: int
    workloads: int
    repeats: int
    complete: bool
    failures: list[Failure]
    mean_latency_ms: float | None
    p95_latency_ms: float | None
    median_latency_ms: float | None
    best_repeat_mean_ms: float | None
    run_to_run_cv: float | None
    repeat_means_ms: list[float]
    repeat_p95s_ms: list[float]
    mean_reference_latency_ms: float | None = None
    mean_speedup: float | None = None
    source_hash: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["failures"] = [asdict(f) for f in self.failures]
        return out


def _repeat_key(row: Timed) -> int:
    rep = row.repeat
    return int(rep) if isinstance(rep, int) and not isinstance(rep, bool) else 0


def summarize_arm(
    name: str, rows: Sequence[Timed], role: str = "", source_hash: str | None = None
) -> ArmSummary:
    failures: list[Failure] = []
    by_repeat: dict[int, list[float]] = {}
    uuids: dict[str, None] = {}
    refs: list[float] = []
    speedups: list[float] = []
    passed = 0
    for r in rows:
        uuid = str(r.uuid)
        uuids.setdefault(uuid, None)
        status = r.status
        lat = r.latency_ms
        if status == PASSED and isinstance(lat, (int, float)) and lat > 0:
            passed += 1
            by_repeat.setdefault(_repeat_key(r), []).append(float(lat))
            ref = r.reference_latency_ms
            if isinstance(ref, (int, float)):
                refs.append(float(ref))
            spd = r.speedup
            if isinstance(spd, (int, float)):
                speedups.append(float(spd))
        else:
            failures.append(
                Failure(
                    uuid,
                    str(status) if status != PASSED else "PASSED without a latency",
                    r.repeat,
                    r.error,
                    dict(r.axes or {}),
                )
            )
    means = [numbers.mean(v) for _, v in sorted(by_repeat.items())]
    p95s = [numbers.p95(v) for _, v in sorted(by_repeat.items())]
    means_f = [float(m) for m in means if m is not None]
    p95s_f = [float(p) for p in p95s if p is not None]
    all_lat = [x for v in by_repeat.values() for x in v]
    mean = numbers.mean(means_f)
    sd = numbers.stdev(means_f)
    return ArmSummary(
        name=name,
        role=role,
        rows=len(rows),
        passed=passed,
        workloads=len(uuids),
        repeats=len(by_repeat),
        complete=bool(rows) and not failures,
        failures=failures,
        mean_latency_ms=mean,
        p95_latency_ms=numbers.mean(p95s_f),
        median_latency_ms=numbers.median(all_lat),
        best_repeat_mean_ms=min(means_f) if means_f else None,
        run_to_run_cv=(sd / mean) if sd is not None and mean else None,
        repeat_means_ms=means_f,
        repeat_p95s_ms=p95s_f,
        mean_reference_latency_ms=numbers.mean(refs),
        mean_speedup=numbers.mean(speedups),
        source_hash=source_hash,
    )


# --------------------------------------------------------------------------------------------
# Pairing
# --------------------------------------------------------------------------------------------


@dataclass
class WorkloadPair:
    uuid: str
    axes: dict[str, int]
    band: str
    base_mean_ms: float
    cand_mean_ms: float
    log_ratio: float  # d_w
    pairs: int  # r_w: paired repeats (or the smaller arm's count when unpaired)
    paired_by_repeat: bool
    pair_logs: list[float]
    outcome: str = "tie"  # win | tie | loss
    weight: float = 1.0
    #: the reference's latency on this workload (the mean over both arms' PASSED rows that carry
    #: one), the numerator of the contest score; None when no row carries it
    ref_ms: float | None = None

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def to_json(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "axes": self.axes,
            "band": self.band,
            "base_mean_ms": self.base_mean_ms,
            "cand_mean_ms": self.cand_mean_ms,
            "ratio": self.ratio,
            "log_ratio": self.log_ratio,
            "pairs": self.pairs,
            "paired_by_repeat": self.paired_by_repeat,
            "outcome": self.outcome,
            "weight": self.weight,
            "ref_ms": self.ref_ms,
        }


def _reference_latencies(rows: Iterable[Timed]) -> dict[str, list[float]]:
    """uuid -> the reference latencies the PASSED rows carry."""
    out: dict[str, list[float]] = {}
    for r in rows:
        ref = r.reference_latency_ms
        if r.status != PASSED or isinstance(ref, bool) or not isinstance(ref, (int, float)):
            continue
        if math.isfinite(ref) and ref > 0:
            out.setdefault(str(r.uuid), []).append(float(ref))
    return out


def _passed_by_repeat(rows: Iterable[Timed]) -> dict[str, dict[int | None, list[float]]]:
    out: dict[str, dict[int | None, list[float]]] = {}
    for r in rows:
        lat = r.latency_ms
        if r.status != PASSED or not isinstance(lat, (int, float)) or lat <= 0:
            continue
        rep = r.repeat
        rep = int(rep) if isinstance(rep, int) and not isinstance(rep, bool) else None
        out.setdefault(str(r.uuid), {}).setdefault(rep, []).append(float(lat))
    return out


def _devices_by_workload(rows: Iterable[Timed]) -> dict[str, frozenset[str]]:
    """uuid -> the GPUs its PASSED rows name (``timing.environment.gpu``); rows that name none
    are left out."""
    out: dict[str, set[str]] = {}
    for r in rows:
        timing = r.timing
        env = timing.get("environment") if isinstance(timing, Mapping) else None
        gpu = env.get("gpu") if isinstance(env, Mapping) else None
        if r.status == PASSED and isinstance(gpu, str) and gpu:
            out.setdefault(str(r.uuid), set()).add(gpu)
    return {u: frozenset(g) for u, g in out.items()}


def pair_workloads(
    base_rows: Sequence[Timed],
    cand_rows: Sequence[Timed],
    band_of: Mapping[str, str] | None = None,
    weights: Mapping[str, float] | None = None,
    tie_band: float = DEFAULT_TIE_BAND,
) -> tuple[list[WorkloadPair], list[str]]:
    """Per-workload paired log ratios, in the baseline's workload order, and the workloads that
    appear in one arm only (or without a PASSED latency in an arm)."""
    base = _passed_by_repeat(base_rows)
    cand = _passed_by_repeat(cand_rows)
    # a pair is two measurements on one GPU: a run whose workloads went to two devices (the
    # ones this GPU could not run, sent to a B200) pairs each workload on its own device only
    dev_b, dev_c = _devices_by_workload(base_rows), _devices_by_workload(cand_rows)
    for uuid in set(base) & set(cand):
        if dev_b.get(uuid) and dev_c.get(uuid) and dev_b[uuid] != dev_c[uuid]:
            base.pop(uuid)
    refs = _reference_latencies(list(base_rows) + list(cand_rows))
    axes_of: dict[str, dict[str, int]] = {}
    order: dict[str, None] = {}
    for r in list(base_rows) + list(cand_rows):
        uuid = str(r.uuid)
        order.setdefault(uuid, None)
        if uuid not in axes_of and r.axes:
            axes_of[uuid] = dict(r.axes)
    band_of = band_of or {}
    pairs: list[WorkloadPair] = []
    unpaired: list[str] = []
    lo_tie, hi_tie = math.log1p(-tie_band), math.log1p(tie_band)
    for uuid in order:
        b, c = base.get(uuid), cand.get(uuid)
        if not b or not c:
            unpaired.append(uuid)
            continue
        common = sorted(
            k for k in set(b) & set(c) if k is not None and len(b[k]) == 1 and len(c[k]) == 1
        )
        b_all = [x for v in b.values() for x in v]
        c_all = [x for v in c.values() for x in v]
        if common:
            logs = [math.log(c[k][0] / b[k][0]) for k in common]
            d = sum(logs) / len(logs)
            n_pairs = len(logs)
            by_repeat = True
        else:
            d = math.log((sum(c_all) / len(c_all)) / (sum(b_all) / len(b_all)))
            logs = [d]
            n_pairs = min(len(b_all), len(c_all))
            by_repeat = False
        outcome = "win" if d < lo_tie else ("loss" if d > hi_tie else "tie")
        w = 1.0 if weights is None else float(weights.get(uuid, 0.0))
        pairs.append(
            WorkloadPair(
                uuid,
                axes_of.get(uuid, {}),
                band_of.get(uuid, "all"),
                sum(b_all) / len(b_all),
                sum(c_all) / len(c_all),
                d,
                n_pairs,
                by_repeat,
                logs,
                outcome,
                w,
                sum(refs[uuid]) / len(refs[uuid]) if refs.get(uuid) else None,
            )
        )
    return pairs, unpaired


def bands_from_axes(rows: Iterable[Timed]) -> dict[str, str]:
    """uuid -> band from the rows' own axes, when no dataset is at hand: the varying axes binned as
    :func:`fibtui.core.regimes.axis_bins` does (values, then log2 or quantile bins)."""
    from fibtui.core.regimes import MAX_BANDS, MAX_BINS_COUPLED, axis_bins

    axes_of: dict[str, dict[str, int]] = {}
    for r in rows:
        ax = r.axes or {}
        uuid = str(r.uuid)
        if uuid not in axes_of:
            axes_of[uuid] = {
                k: int(v) for k, v in ax.items() if isinstance(v, int) and not isinstance(v, bool)
            }
    names = sorted({a for ax in axes_of.values() for a in ax})
    varying = [a for a in names if len({ax.get(a) for ax in axes_of.values()}) > 1]
    if not varying:
        return {u: "all" for u in axes_of}
    max_bins = MAX_BANDS if len(varying) == 1 else MAX_BINS_COUPLED
    bins_of: dict[str, list[tuple[int, int]]] = {}
    for a in varying:
        counts: dict[int, int] = {}
        for ax in axes_of.values():
            if a in ax:
                counts[ax[a]] = counts.get(ax[a], 0) + 1
        values = sorted(counts)
        bins_of[a] = axis_bins(values, [counts[v] for v in values], max_bins)[0]
    out: dict[str, str] = {}
    for uuid, ax in axes_of.items():
        parts = []
        for a in varying:
            if a not in ax:
                parts.append(f"{a}=?")
                continue
            lo, hi = next(((lo, hi) for lo, hi in bins_of[a] if lo <= ax[a] <= hi), (ax[a], ax[a]))
            parts.append(f"{a}={lo}" if lo == hi else f"{a}={lo}..{hi}")
        out[uuid] = ", ".join(parts)
    return out


# --------------------------------------------------------------------------------------------
# Noise of one paired log ratio
# --------------------------------------------------------------------------------------------


@dataclass
class PairNoise:
    sigma: float
    df: float | None  # None: the normal
    source: str
    #: measured for these rows (repeats in this run, or A/A history of the same key); False for
    #: the fallbacks, on which the guard and per-band claims are not judged
    estimated: bool = True


def pair_noise(
    pairs: Sequence[WorkloadPair],
    aa_sigma: float | None = None,
    blocks: PairNoise | None = None,
) -> PairNoise:
    """The noise of one paired log ratio: the largest of the estimates at hand (this run's
    repeat-to-repeat spread, the A/A history, the paired blocks of the jobs: :func:`block_noise`),
    else a fallback marked as not estimated."""
    ss = 0.0
    dof = 0
    for p in pairs:
        if p.paired_by_repeat and len(p.pair_logs) >= 2:
            m = sum(p.pair_logs) / len(p.pair_logs)
            ss += sum((x - m) ** 2 for x in p.pair_logs)
            dof += len(p.pair_logs) - 1
    within = math.sqrt(ss / dof) if dof >= 2 else None
    options: list[PairNoise] = []
    if within is not None:
        options.append(
            PairNoise(within, float(dof), f"repeat-to-repeat spread in this run, {dof} df")
        )
    if aa_sigma is not None and aa_sigma > 0:
        options.append(PairNoise(aa_sigma, None, "A/A history"))
    if blocks is not None:
        options.append(blocks)
    if options:
        best = max(options, key=lambda o: o.sigma)
    else:
        by_band: dict[str, list[WorkloadPair]] = {}
        for p in pairs:
            by_band.setdefault(p.band, []).append(p)
        ss = 0.0
        scale: list[float] = []
        groups = 0
        for group in by_band.values():
            if len(group) < 2:
                continue
            groups += 1
            m = sum(p.log_ratio for p in group) / len(group)
            ss += sum((p.log_ratio - m) ** 2 for p in group)
            scale += [p.pairs for p in group]
        dof = len(scale) - groups
        if dof >= 2:
            sigma = math.sqrt(ss / dof) * math.sqrt(sum(scale) / len(scale))
            best = PairNoise(
                sigma,
                float(dof),
                "spread of the per-workload ratios around their band's mean (no repeats, no A/A history; "
                "real differences inside a band count as noise)",
                estimated=False,
            )
        else:
            best = PairNoise(
                DEFAULT_NOISE, None, "the default (nothing to estimate it from)", estimated=False
            )
    if best.sigma < MIN_NOISE:
        best = PairNoise(
            MIN_NOISE, best.df, f"{best.source}, floored at {_pct(MIN_NOISE)}", best.estimated
        )
    return best


#: the variance of the median of B normal values is about (pi / 2) sigma^2 / B (large B; for B = 6
#: it is nearer 1.3 sigma^2 / B, so pi / 2 errs wide)
MEDIAN_VARIANCE = math.pi / 2.0


def _blocks_of(row: Timed) -> list[float] | None:
    """A PASSED job's block medians (a run's ``timing.block_medians_ms``, a result table row's
    ``block_medians_ms``), when it has two or more and each is a positive number."""
    blocks = row.block_medians_ms
    if not isinstance(blocks, list) or len(blocks) < 2:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in blocks):
        return None
    return [float(x) for x in blocks]


def block_noise(
    baseline_rows: Sequence[Timed], candidate_rows: Sequence[Timed]
) -> PairNoise | None:
    """The noise of one paired log ratio from the jobs' own paired blocks (docs/measurement.md,
    "The noise of one paired log ratio"): in a paired job block ``b`` of the baseline and block
    ``b`` of the candidate ran next to each other (ABBA) on the same inputs, so
    ``l_b = log(cand_b / base_b)`` varies only by the noise of one block. Pooled over the jobs,
    ``s^2 = sum_j sum_b (l_jb - mean_j)^2 / sum_j (B_j - 1)``; a job's latency is a median of ``B``
    block medians, so one paired log ratio has ``sigma^2 = (pi / 2) s^2 / B``. None when no job of
    both arms carries two or more block medians (foreign result files, single-block runs)."""
    base = {(str(r.uuid), r.repeat): r for r in baseline_rows if r.status == PASSED}
    ss_over_b = 0.0
    dof = 0
    jobs = 0
    sizes: set[int] = set()
    for c in candidate_rows:
        if c.status != PASSED:
            continue
        b = base.get((str(c.uuid), c.repeat))
        cb, bb = _blocks_of(c), _blocks_of(b) if b is not None else None
        if cb is None or bb is None or len(cb) != len(bb):
            continue
        logs = [math.log(x / y) for x, y in zip(cb, bb, strict=True)]
        m = sum(logs) / len(logs)
        ss_over_b += sum((x - m) ** 2 for x in logs) / len(logs)
        dof += len(logs) - 1
        jobs += 1
        sizes.add(len(logs))
    if dof < 2:
        return None
    sigma = math.sqrt(MEDIAN_VARIANCE * ss_over_b / dof)
    size = "/".join(str(n) for n in sorted(sizes))
    return PairNoise(
        sigma,
        float(dof),
        f"paired blocks of {jobs} job(s): sqrt(pi/2) x block spread / sqrt({size}), {dof} df",
    )


# --------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------


def exp_or_inf(x: float) -> float:
    """``math.exp``, but infinity past the float range: an interval whose critical value is huge
    (Student's t with one degree of freedom at an early look of an adaptive run) has an end no
    ratio can reach, which is what infinity says."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def finite_or_none(x: float | None) -> float | None:
    """``x`` when it is a finite number, else None (JSON has no infinity)."""
    return x if x is not None and math.isfinite(x) else None


@dataclass
class Interval:
    log_low: float
    log_high: float
    method: str
    df: float | None = None

    @property
    def low(self) -> float:
        return exp_or_inf(self.log_low)

    @property
    def high(self) -> float:
        return exp_or_inf(self.log_high)


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


def _weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


def _t_interval(d: Sequence[float], w: Sequence[float], confidence: float) -> Interval:
    n = len(d)
    mean = _weighted_mean(d, w)
    total = sum(w)
    var = (
        sum(wi * wi * (di - mean) ** 2 for di, wi in zip(d, w, strict=True))
        / (total * total)
        * n
        / (n - 1)
    )
    se = math.sqrt(var)
    q = t_quantile(0.5 + confidence / 2.0, float(n - 1))
    return Interval(
        mean - q * se, mean + q * se, f"t across {n} workloads, {n - 1} df", float(n - 1)
    )


def _bootstrap(
    d: Sequence[float], w: Sequence[float], confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the (weighted) mean over workloads resampled with replacement
    (from :data:`BOOTSTRAP_COLUMNAR_WORKLOADS` workloads on, drawn by polars, column-wise)."""
    n = len(d)
    if n >= BOOTSTRAP_COLUMNAR_WORKLOADS:
        return _bootstrap_columnar(d, w, confidence, resamples, seed)
    rng = random.Random(seed)
    means: list[float] = []
    if len(set(w)) == 1:
        draws = rng.choices(d, k=n * resamples)
        means = [sum(draws[b * n : (b + 1) * n]) / n for b in range(resamples)]
    else:
        idx = rng.choices(range(n), k=n * resamples)
        wd = [wi * di for wi, di in zip(w, d, strict=True)]
        for b in range(resamples):
            chunk = idx[b * n : (b + 1) * n]
            tw = sum(map(w.__getitem__, chunk))
            means.append(sum(map(wd.__getitem__, chunk)) / tw if tw > 0 else 0.0)
    alpha = 1.0 - confidence
    lo = numbers.percentile(means, alpha / 2.0)
    hi = numbers.percentile(means, 1.0 - alpha / 2.0)
    assert lo is not None and hi is not None
    return lo, hi


#: from this many workloads on the bootstrap draws its resamples with polars (100,000 workloads
#: x 2,000 resamples are 200 million draws: minutes in Python, seconds column-wise)
BOOTSTRAP_COLUMNAR_WORKLOADS = 5000
#: the most draws one bootstrap makes (workloads x resamples); past it, fewer resamples (never
#: fewer than BOOTSTRAP_MIN_RESAMPLES). With that many workloads the percentile interval of the
#: mean is the t-interval's, which it is widened to anyway.
BOOTSTRAP_MAX_DRAWS = 20_000_000
BOOTSTRAP_MIN_RESAMPLES = 200


def bootstrap_resamples(n: int, resamples: int) -> int:
    """How many resamples a bootstrap over ``n`` workloads draws (the method line says it)."""
    if n * resamples <= BOOTSTRAP_MAX_DRAWS:
        return resamples
    return max(min(resamples, BOOTSTRAP_MIN_RESAMPLES), BOOTSTRAP_MAX_DRAWS // n)


def _bootstrap_columnar(
    d: Sequence[float], w: Sequence[float], confidence: float, resamples: int, seed: int
) -> tuple[float, float]:
    """:func:`_bootstrap` for many workloads: the same percentile interval of the weighted mean,
    its resamples drawn by polars (seeded, so the interval is the same on every run), a few at a
    time so memory stays bounded."""
    import polars as pl

    n = len(d)
    frame = pl.DataFrame(
        {"wd": [wi * di for wi, di in zip(w, d, strict=True)], "w": list(w)},
        schema={"wd": pl.Float64, "w": pl.Float64},
    )
    per_chunk = max(1, 2_000_000 // n)
    means: list[float] = []
    done = 0
    while done < resamples:
        k = min(per_chunk, resamples - done)
        drawn = frame.sample(n=n * k, with_replacement=True, seed=seed + done).with_columns(
            (pl.int_range(pl.len()) // n).alias("b")
        )
        sums = drawn.group_by("b").agg(pl.col("wd").sum(), pl.col("w").sum()).sort("b")
        for wd_sum, w_sum in zip(sums["wd"].to_list(), sums["w"].to_list(), strict=True):
            means.append(wd_sum / w_sum if w_sum > 0 else 0.0)
        done += k
    alpha = 1.0 - confidence
    lo = numbers.percentile(means, alpha / 2.0)
    hi = numbers.percentile(means, 1.0 - alpha / 2.0)
    assert lo is not None and hi is not None
    return lo, hi


def _z_interval(
    pairs: Sequence[WorkloadPair], sigma: float, confidence: float, source: str
) -> Interval:
    total = sum(p.weight for p in pairs)
    mean = sum(p.weight * p.log_ratio for p in pairs) / total
    se = math.sqrt(sum(p.weight**2 * sigma**2 / max(p.pairs, 1) for p in pairs)) / total
    q = _NORMAL.inv_cdf(0.5 + confidence / 2.0)
    return Interval(mean - q * se, mean + q * se, f"z, A/A-calibrated noise {source}", None)


def interval_for(
    pairs: Sequence[WorkloadPair],
    confidence: float,
    aa_noise: PairNoise | None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    scope: str = "full",
) -> Interval | None:
    """The interval for log G (see the module docstring for which one)."""
    pairs = [p for p in pairs if p.weight > 0]
    n = len(pairs)
    if n == 0:
        return None
    z = (
        _z_interval(pairs, aa_noise.sigma, confidence, _pct(aa_noise.sigma))
        if aa_noise is not None
        else None
    )
    if z is not None and (scope == "full" or n < T_MIN_WORKLOADS):
        return z
    if n < T_MIN_WORKLOADS:
        return None
    d = [p.log_ratio for p in pairs]
    w = [p.weight for p in pairs]
    across = _t_interval(d, w, confidence)
    if n >= BOOTSTRAP_MIN_WORKLOADS:
        resamples = bootstrap_resamples(n, resamples)
        lo, hi = _bootstrap(d, w, confidence, resamples, seed)
        across = Interval(
            min(lo, across.log_low),
            max(hi, across.log_high),
            f"bootstrap over {n} workloads, {resamples} resamples, seed {seed}, widened to the t-interval",
            across.df,
        )
    if z is not None:
        return Interval(
            min(z.log_low, across.log_low),
            max(z.log_high, across.log_high),
            f"the wider of ({across.method}) and ({z.method})",
            across.df,
        )
    return across


def _guard(
    pairs: Sequence[WorkloadPair], noise: PairNoise, margin: float, tau: float, confidence: float
) -> tuple[list[GuardHit], list[BandResult]]:
    limit = math.log1p(margin)
    hits: list[GuardHit] = []
    # Workloads
    p_values = []
    for p in pairs:
        se = noise.sigma / math.sqrt(max(p.pairs, 1))
        p_values.append(1.0 - t_cdf((p.log_ratio - limit) / se, noise.df))
    for p, flag, pv in zip(pairs, holm(p_values), p_values, strict=True):
        if flag:
            axes = ", ".join(f"{k}={v}" for k, v in p.axes.items())
            hits.append(
                GuardHit(
                    "workload",
                    p.uuid + (f" ({axes})" if axes else ""),
                    p.ratio,
                    pv,
                    f"{(p.ratio - 1) * 100:+.1f}% (ratio {p.ratio:.3f}, beyond +{_pct(margin)} "
                    f"with confidence, Holm p={pv:.2g})",
                )
            )
    # Bands
    groups: dict[str, list[WorkloadPair]] = {}
    for p in pairs:
        groups.setdefault(p.band, []).append(p)
    bands: list[BandResult] = []
    band_p: list[float] = []
    # Student's t with sigma's degrees of freedom (the normal for A/A sigma, treated as known)
    z = t_quantile(0.5 + confidence / 2.0, noise.df)
    for name, group in groups.items():
        n = len(group)
        log_g = sum(p.log_ratio for p in group) / n
        se = noise.sigma * math.sqrt(sum(1.0 / max(p.pairs, 1) for p in group)) / n
        base_mean = sum(p.base_mean_ms for p in group) / n
        cand_mean = sum(p.cand_mean_ms for p in group) / n
        bands.append(
            BandResult(
                band=name,
                workloads=n,
                base_mean_ms=base_mean,
                cand_mean_ms=cand_mean,
                change_pct=100.0 * (cand_mean / base_mean - 1.0),
                geomean_ratio=math.exp(log_g),
                ci_low=exp_or_inf(log_g - z * se),
                ci_high=exp_or_inf(log_g + z * se),
                wins=sum(p.outcome == "win" for p in group),
                ties=sum(p.outcome == "tie" for p in group),
                losses=sum(p.outcome == "loss" for p in group),
                dispatch_candidate=(log_g + z * se)
                < -tau,  # cleared below when the global verdict is PROMOTE
            )
        )
        band_p.append(1.0 - t_cdf((log_g - limit) / se, noise.df))
    if len(bands) > 1:
        for b, flag, pv in zip(bands, holm(band_p), band_p, strict=True):
            if flag:
                b.regression = True
                hits.append(
                    GuardHit(
                        "band",
                        b.band,
                        b.geomean_ratio,
                        pv,
                        f"{(b.geomean_ratio - 1) * 100:+.1f}% (geomean ratio {b.geomean_ratio:.3f}, beyond "
                        f"+{_pct(margin)} with confidence, Holm p={pv:.2g})",
                    )
                )
    return hits, bands


def paired_verdict(
    baseline_rows: Sequence[Timed],
    candidate_rows: Sequence[Timed],
    *,
    baseline_name: str = "baseline",
    candidate_name: str = "candidate",
    band_of: Mapping[str, str] | None = None,
    weights: Mapping[str, float] | None = None,
    settings: StatsSettings | None = None,
    floor: NoiseFloor | None = None,
    baseline_hash: str | None = None,
    candidate_hash: str | None = None,
    scope: str = "full",
    timing: tuple[TimingKey | None, TimingKey | None] | None = None,
    band_shares: Mapping[str, float] | None = None,
    share_source: str | None = None,
    look: Look | None = None,
    decided: Mapping[str, str] | None = None,
    score_numerators: Sequence[measures.Numerators] = (),
    floors_ms: Mapping[str, float] | None = None,
) -> Comparison:
    """Compare a candidate's rows with the baseline's (see the module docstring).

    ``floors_ms``: uuid -> the workload's roofline floor on the rows' device; a candidate latency
    below it (faster than physics allows, under a cold L2) keeps a PROMOTE from standing until a
    person confirms, as do timed calls the gate did not check (``timing.checks.rotation``
    false).

    ``score_numerators``: other denominators of the projected contest score than the reference
    (a named baseline solution's latencies per workload), each scored after the reference's.

    ``scope``: ``full`` when the workloads are the whole set the decision is about (a full
    sweep), ``sample`` when they stand in for it (a representative gate, a selection). A sample
    never says PROMOTE: it says what it measured (``measured``: per band, against tau).

    ``band_shares``: band -> its share of the definition's latency (the regime analysis), named in
    ``measured``. ``look``: an adaptive run's look; its intervals use the look's critical value.
    ``decided``: an adaptive run's workloads its rule stopped as decided (uuid -> the word it
    decided: faster, slower or unchanged). A stop is final: a band whose every workload stopped
    decided with one word keeps that word, though the pooled noise of the run's end (other
    workloads went on) can widen its interval at the last look.

    ``timing``: how each arm was timed (default: what the rows carry); CPU-interpreter timings, or
    arms timed differently or on different devices, give NO_SPEED_VERDICT: correctness only."""
    if scope not in ("full", "sample"):
        raise ValueError(f"scope must be 'full' or 'sample', got {scope!r}")
    overall = settings or StatsSettings()
    settings = overall
    if look is not None:  # the repeated interval at this look: its critical value, not z
        from dataclasses import replace

        settings = replace(overall, confidence=look.nominal_confidence)
    floor = floor or noise_floor(settings)
    if band_of is None:
        band_of = bands_from_axes(list(baseline_rows) + list(candidate_rows))
    base = summarize_arm(baseline_name, baseline_rows, "baseline", baseline_hash)
    cand = summarize_arm(candidate_name, candidate_rows, "candidate", candidate_hash)
    pairs, unpaired = pair_workloads(
        baseline_rows, candidate_rows, band_of, weights, settings.tie_band
    )
    notes: list[str] = []
    if weights is not None:
        dropped = [p for p in pairs if p.weight <= 0]
        if dropped:
            notes.append(f"{len(dropped)} workload(s) have no positive weight and do not count")
        pairs = [p for p in pairs if p.weight > 0]
    failures = [f"baseline {f.describe()}" for f in base.failures] + [
        f"candidate {f.describe()}" for f in cand.failures
    ]
    base_uuids = {str(r.uuid) for r in baseline_rows}
    cand_uuids = {str(r.uuid) for r in candidate_rows}
    for uuid in unpaired:
        if uuid not in cand_uuids:
            failures.append(f"candidate has no result for workload {uuid}")
        elif uuid not in base_uuids:
            failures.append(f"baseline has no result for workload {uuid}")
    complete = not failures and bool(pairs)
    if timing is None:
        timing = (timing_key_of_rows(baseline_rows), timing_key_of_rows(candidate_rows))
    no_speed = speed_blocker(*timing)
    if no_speed is not None:
        return _correctness_only(
            base,
            cand,
            pairs,
            unpaired,
            failures,
            notes,
            floor,
            overall,
            scope,
            weights is not None,
            no_speed,
        )
    if not pairs:
        notes.append("no workload has a PASSED latency in both arms")
    log_g = (
        _weighted_mean([p.log_ratio for p in pairs], [p.weight for p in pairs]) if pairs else None
    )
    noise = (
        pair_noise(pairs, floor.aa_sigma, block_noise(baseline_rows, candidate_rows))
        if pairs
        else None
    )
    aa_noise = noise if (noise is not None and floor.aa_sigma is not None) else None
    interval = interval_for(
        pairs, settings.confidence, aa_noise, settings.bootstrap_resamples, settings.seed, scope
    )
    tau = floor.tau
    if interval is None:
        interval_verdict = INCONCLUSIVE
        if pairs:
            notes.append(
                f"{len(pairs)} paired workload(s): an interval needs {T_MIN_WORKLOADS}+ workloads or A/A history"
            )
    elif interval.log_high < -tau:
        interval_verdict = PROMOTE
    elif interval.log_low > -tau:
        interval_verdict = REJECT
    else:
        interval_verdict = INCONCLUSIVE
    mean, mean_verdict, scores, worst, disagree = _measures(
        pairs,
        noise,
        settings.confidence,
        tau,
        log_g,
        interval,
        [_reference_numerators(pairs, timing[0]), *score_numerators],
    )
    notes += [f"score against the {s.denominator}: {s.note}" for s in scores if s.note]
    hits: list[GuardHit] = []
    bands: list[BandResult] = []
    guard_judged = noise is not None and noise.estimated
    if guard_judged:
        assert noise is not None
        hits, bands = _guard(pairs, noise, settings.guard_margin, tau, settings.confidence)
    elif noise is not None:
        notes.append(
            "the regression guard and the per-band intervals cannot be judged: no noise estimate for these "
            "rows (one value per workload and no A/A history of this definition, device and timing); "
            "measure with --repeats 2 or more, or record an A/A session (fibtui compare --aa)"
        )
    if any(is_tool_limit(f.status) for f in base.failures + cand.failures):
        verdict = NOT_JUDGED
    elif not complete:
        verdict = INCORRECT if wrong_rows(base, cand) else INCOMPLETE
    elif hits and mean_verdict != REJECT:
        verdict = BLOCKED
    elif mean_verdict == PROMOTE and not guard_judged:
        verdict = INCONCLUSIVE  # promotion needs the guard, and the guard needs a noise estimate
    elif mean_verdict == PROMOTE and scope == "sample":
        verdict = INCONCLUSIVE  # PROMOTE is the full sweep's: a sample says what it measured
        notes.append(
            "the mean latency of these workloads is faster beyond tau, but a sample never "
            "promotes: run the full sweep (--workloads all) to decide"
        )
    else:
        verdict = mean_verdict  # the mean latency decides; G is context
    integrity = _integrity(candidate_rows, floors_ms)
    if verdict == PROMOTE and integrity:
        verdict = BLOCKED
    if verdict == PROMOTE:
        for b in bands:
            b.dispatch_candidate = False
    if look is not None:
        notes.append(
            f"adaptive run: look {look.look} of at most {look.cap}; its intervals are repeated "
            f"{overall.confidence:.0%} intervals (critical value {look.critical:.3f}, "
            f"{look.spending} spending)"
        )
    return Comparison(
        baseline=base,
        candidate=cand,
        verdict=verdict,
        interval_verdict=interval_verdict,
        geomean_ratio=math.exp(log_g) if log_g is not None else None,
        log_g=log_g,
        interval=interval,
        tau=floor,
        confidence=overall.confidence,
        noise=noise,
        workloads=len(pairs),
        pairs=pairs,
        unpaired=unpaired,
        per_band=bands,
        guard=hits,
        guard_margin=settings.guard_margin,
        tie_band=settings.tie_band,
        complete=complete,
        failures=failures,
        notes=notes,
        weighted=weights is not None,
        scope=scope,
        measured=(
            measure(bands, tau, band_shares, share_source, settled_bands(pairs, decided))
            if complete
            else None
        ),
        look=look,
        mean_latency=mean,
        mean_latency_verdict=mean_verdict,
        scores=scores,
        worst=worst,
        disagreement=disagree,
        integrity=integrity,
    )


def _measures(
    pairs: Sequence[WorkloadPair],
    noise: PairNoise | None,
    confidence: float,
    tau: float,
    log_g: float | None,
    interval: Interval | None,
    numerators: Sequence[measures.Numerators],
) -> tuple[
    measures.MeanLatencyChange | None,
    str,
    list[measures.Score],
    list[measures.WorstWorkload],
    str | None,
]:
    """The mean latency's change and its verdict, the projected scores, the worst workloads and
    the disagreement line, all from the paired noise ``noise`` (fibtui.core.measures)."""
    if noise is None or not pairs or log_g is None:
        return None, INCONCLUSIVE, [], [], None
    q = t_quantile(0.5 + confidence / 2.0, noise.df)
    dist = "normal" if noise.df is None else f"t, {noise.df:.0f} df"
    method = f"paired noise {_pct(noise.sigma)} ({noise.source}; {dist})"
    mean = measures.mean_latency_change(pairs, noise.sigma, q, tau, method)
    if mean is None:
        verdict = INCONCLUSIVE
    elif mean.log_high < -tau:
        verdict = PROMOTE
    elif mean.log_low > -tau:
        verdict = REJECT
    else:
        verdict = INCONCLUSIVE
    scores: list[measures.Score] = []
    used: list[measures.Numerators] = []
    for num in numerators:
        s = measures.contest_score(
            pairs, num.latencies, noise.sigma, q, tau, num.denominator, num.note, num.qualifier
        )
        if s is not None:
            scores.append(s)
            used.append(num)
    worst = measures.worst_workloads(pairs, noise.sigma, q)
    g_word = classify(interval.log_low, interval.log_high, tau) if interval else UNDECIDED
    disagree = measures.disagreement(
        pairs,
        g_word,
        log_g,
        mean,
        scores[0] if scores else None,
        used[0].latencies if used else None,
    )
    return mean, verdict, scores, worst, disagree


#: what the reference latency of fibtui's own timing is (fibtui/worker/reference.py)
HOST_TIMED_REFERENCE = (
    "the reference's latency in fibtui's own timing is the host wall time of three synchronized "
    "calls, not device time as the contest's: this score reads high; `fibtui run --timing "
    "official` times the reference as flashinfer-bench does"
)


def _reference_numerators(
    pairs: Sequence[WorkloadPair], key: TimingKey | None
) -> measures.Numerators:
    """The reference's latencies as the score's first denominator (the starter kit's)."""
    refs = {p.uuid: p.ref_ms for p in pairs if p.ref_ms is not None}
    if key is not None and key.kind == "cupti":
        return measures.Numerators(measures.REFERENCE, refs, HOST_TIMED_REFERENCE, "host-timed")
    return measures.Numerators(measures.REFERENCE, refs)


def _integrity(rows: Sequence[Timed], floors_ms: Mapping[str, float] | None) -> list[str]:
    """What a PROMOTE of these candidate rows must not stand on without a person: latencies
    below their workload's roofline floor under a cold L2 (a warm L2 may hold the inputs), and
    timed calls the gate's checks did not cover."""
    out: list[str] = []
    below: list[tuple[float, str]] = []
    unchecked = 0
    for r in rows:
        timing = r.timing
        timing = timing if isinstance(timing, Mapping) else {}
        checks = timing.get("checks")
        if isinstance(checks, Mapping) and checks.get("rotation") is False:
            unchecked += 1
        lat = r.latency_ms
        uuid = str(r.uuid)
        floor_ms = (floors_ms or {}).get(uuid)
        if (
            r.status == PASSED
            and isinstance(lat, (int, float))
            and floor_ms
            and timing.get("l2_policy", "cold") == "cold"
            and lat < floor_ms
        ):
            below.append((lat / floor_ms, uuid))
    if below:
        below.sort()
        ratio, uuid = below[0]
        out.append(
            f"faster than physics: {len(below)} latency(ies) below the roofline floor of their "
            f"workload (speed of light over 100%; {uuid[:8]} at {100 / ratio:.0f}%)"
        )
    if unchecked:
        out.append(f"{unchecked} row(s) timed without the gate's checks (rotation off)")
    return out


def settled_bands(
    pairs: Sequence[WorkloadPair], decided: Mapping[str, str] | None
) -> dict[str, str]:
    """Band -> the word an adaptive rule decided for every workload of it (one word)."""
    if not decided:
        return {}
    words: dict[str, set[str]] = {}
    for p in pairs:
        words.setdefault(p.band, set()).add(decided.get(p.uuid, ""))
    return {
        band: next(iter(ws))
        for band, ws in words.items()
        if len(ws) == 1 and next(iter(ws)) in (FASTER, SLOWER, UNCHANGED)
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


def _correctness_only(
    base: ArmSummary,
    cand: ArmSummary,
    pairs: list[WorkloadPair],
    unpaired: list[str],
    failures: list[str],
    notes: list[str],
    floor: NoiseFloor,
    settings: StatsSettings,
    scope: str,
    weighted: bool,
    reason: str,
) -> Comparison:
    """A comparison that states correctness only: no G, no interval, no guard, no bands."""
    if any(is_tool_limit(f.status) for f in base.failures + cand.failures):
        verdict = NOT_JUDGED
    elif failures:
        verdict = INCORRECT if wrong_rows(base, cand) else INCOMPLETE
    else:
        verdict = NO_SPEED_VERDICT
    notes = [*notes, f"no speed verdict: {reason}"]
    return Comparison(
        baseline=base,
        candidate=cand,
        verdict=verdict,
        interval_verdict=NO_SPEED_VERDICT,
        geomean_ratio=None,
        log_g=None,
        interval=None,
        tau=floor,
        confidence=settings.confidence,
        noise=None,
        workloads=len(pairs),
        pairs=[],
        unpaired=unpaired,
        per_band=[],
        guard=[],
        guard_margin=settings.guard_margin,
        tie_band=settings.tie_band,
        complete=not failures and bool(pairs),
        failures=failures,
        notes=notes,
        weighted=weighted,
        scope=scope,
        no_speed_reason=reason,
    )


# --------------------------------------------------------------------------------------------
# Several candidates
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# A/A history
# --------------------------------------------------------------------------------------------


def aa_session_from(
    comparison: Comparison,
    source: str,
    kind: str,
    definition: str | None = None,
    gpu: str | None = None,
    timing_kind: str | None = None,
) -> AASession:
    """An A/A session from a comparison of the same code with itself."""
    sigma = None
    logs = [x for p in comparison.pairs if p.paired_by_repeat for x in p.pair_logs]
    if len(logs) >= 2:
        sigma = numbers.stdev(logs)
    elif len(comparison.pairs) >= 2:
        spread = numbers.stdev([p.log_ratio for p in comparison.pairs])
        reps = sum(p.pairs for p in comparison.pairs) / len(comparison.pairs)
        sigma = spread * math.sqrt(reps) if spread is not None else None
    repeats = max((p.pairs for p in comparison.pairs), default=0)
    return AASession(
        source=source,
        kind=kind,
        log_g=comparison.log_g or 0.0,
        sigma=sigma,
        workloads=comparison.workloads,
        repeats=repeats,
        definition=definition,
        gpu=gpu,
        verdict=comparison.verdict,
        timing_kind=timing_kind,
    )


class _BadField(Exception):
    """(field, message) of a bad value in an A/A line."""


def _count(obj: Mapping[str, Any], key: str, default: int) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10**9:
        raise _BadField(key, f"expected a whole number from 0 to 10^9, got {str(value)[:40]}")
    return value


def _text_value(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _BadField("timing_kind", f"expected text, got {str(value)[:40]}")
    return value


def _text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _BadField(key, f"expected text, got {str(value)[:40]}")
    return value


def load_aa_file(path: Path) -> list[AASession]:
    """The sessions of ``optimize_ops/benchmarks/aa.jsonl`` (a broken line is a clear error)."""
    from fibtui.core.dataset import iter_jsonl

    if not path.is_file():
        return []
    out: list[AASession] = []
    for number, obj in iter_jsonl(path):
        try:
            log_g = float(obj["log_g"])
            sigma = obj.get("sigma")
            sigma = float(sigma) if sigma is not None else None
            gpu = obj.get("gpu")
            timing_kind = obj.get("timing_kind")
            if timing_kind is None and gpu:
                timing_kind = (
                    "cupti"  # sessions recorded before the timing kind was: GPU runs had a gpu
                )
            session = AASession(
                source=str(obj.get("source", "")),
                kind=str(obj.get("kind", "compare --aa")),
                log_g=log_g,
                sigma=sigma,
                workloads=_count(obj, "workloads", 0),
                repeats=_count(obj, "repeats", 1),
                definition=_text(obj, "definition"),
                gpu=_text(obj, "gpu"),
                verdict=_text(obj, "verdict"),
                timing_kind=_text_value(timing_kind),
            )
        except KeyError as exc:
            raise InputError(
                path, "required field is missing", line=number, field=str(exc.args[0])
            ) from None
        except _BadField as exc:
            raise InputError(path, exc.args[1], line=number, field=exc.args[0]) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise InputError(path, f"bad value: {exc}", line=number) from None
        if not math.isfinite(log_g):
            raise InputError(path, "log_g must be a finite number", line=number, field="log_g")
        if sigma is not None and not (math.isfinite(sigma) and sigma >= 0):
            raise InputError(path, "sigma must be a finite number >= 0", line=number, field="sigma")
        out.append(session)
    return out


def aa_sessions(
    archive_root: Path,
    gpu: str | None = None,
    exclude_runs: Iterable[str] = (),
    *,
    definition: str | None = None,
    timing_kind: str | None = None,
) -> list[AASession]:
    """The A/A sessions of an archive (same-code paired runs plus ``benchmarks/aa.jsonl``) of one
    key: with ``timing_kind``, sessions of that (definition, device, timing kind) only; without
    it, sessions on another GPU than ``gpu`` are left out when both are known. CPU-interpreter
    sessions never calibrate anything."""
    import json

    from fibtui.core.runs import jobs_of, list_runs

    exclude = set(exclude_runs)
    sessions: list[AASession] = []
    for listing in list_runs(archive_root):
        if listing.run_id in exclude or listing.state != "complete":
            continue
        if listing.record is None or not listing.record.same_code_pair:
            continue  # no run.json, or its solutions are no A/A pair: not read
        record_path = listing.path / "run.json"
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        sols = record.get("solutions") or []
        base = [s for s in sols if s.get("role") == "baseline" and s.get("source_hash")]
        cands = [s for s in sols if s.get("role") == "candidate" and s.get("source_hash")]
        if len(base) != 1 or not cands:
            continue
        jobs = jobs_of(record)
        for c in cands:
            if c["source_hash"] != base[0]["source_hash"]:
                continue
            b_rows = [j for j in jobs if j.role == "baseline"]
            c_rows = [j for j in jobs if j.role == "candidate" and j.solution == c.get("name")]
            comp = paired_verdict(
                b_rows,
                c_rows,
                baseline_name=base[0].get("name", ""),
                candidate_name=c.get("name", ""),
            )
            if not comp.pairs:
                continue
            run_kind = record.get("timing_kind")
            run_gpu = (
                (record.get("environment") or {}).get("gpu")
                if run_kind != CPU_INTERPRETER
                else None
            )
            sessions.append(
                aa_session_from(
                    comp,
                    listing.run_id,
                    "paired-run",
                    record.get("definition"),
                    run_gpu,
                    run_kind if isinstance(run_kind, str) else None,
                )
            )
    sessions += load_aa_file(archive_root / AA_FILE)
    sessions = [s for s in sessions if s.timing_kind != CPU_INTERPRETER]
    if timing_kind is not None:
        return [
            s
            for s in sessions
            if s.timing_kind == timing_kind
            and s.gpu == gpu
            and (definition is None or s.definition == definition)
        ]
    if gpu:
        sessions = [s for s in sessions if not s.gpu or s.gpu == gpu]
    return sessions


def aa_key_label(definition: str | None, key: TimingKey) -> str:
    return (
        f"{definition or 'definition not stated'}, {key.device or 'device not stated'}, {key.kind}"
    )


def timing_key_of_source(src: Source) -> TimingKey:
    """How a compared file's latencies were measured: fibtui runs say it (cupti or
    cpu-interpreter, and the GPU); every other result format is flashinfer-bench's timing (its
    traces, or the hand workflow's files written from it)."""
    kind = (
        src.table.meta.get("timing_kind")
        if src.table.source_format == "fibtui-run"
        else "flashinfer-bench"
    )
    kind = kind if isinstance(kind, str) and kind else "unknown"
    return TimingKey(kind, src.gpu if kind != CPU_INTERPRETER else None)


def record_aa_session(archive_root: Path, session: AASession) -> Path:
    """Append one A/A session to ``optimize_ops/benchmarks/aa.jsonl``."""
    import json

    from fibtui.core.fsio import append_line

    path = archive_root / AA_FILE
    append_line(path, json.dumps(session.to_json(), sort_keys=True))
    return path


# --------------------------------------------------------------------------------------------
# Comparing what a user names: result files, run folders, run ids
# --------------------------------------------------------------------------------------------


@dataclass
class Source:
    """One side of ``fibtui compare``: a result table, and what its file says about itself."""

    spec: str
    path: Path
    table: RunTable
    run_id: str | None = None
    selection: str | None = None
    hashes: dict[tuple[str, str], str] = field(default_factory=dict)  # (role, name) -> source hash
    gpu: str | None = None
    #: a fibtui run's adaptive plan (its header's ``settings.adaptive``), None for a fixed design
    adaptive: dict[str, Any] | None = None
    #: an adaptive run's workloads stopped as decided: uuid -> the word decided
    decided: dict[str, str] = field(default_factory=dict)
    #: a run timed with ``--timing official``: (uuid, solution, role, repeat) -> the job's
    #: official-equivalent (latency, reference latency) in ms (``timing.official``)
    official: dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]] = (
        field(default_factory=dict)
    )

    @property
    def label(self) -> str:
        return self.run_id or self.path.name


#: the timing kind of the official-equivalent latencies (fibtui.worker.official_timing.KIND)
OFFICIAL_KIND = "official-equivalent"


def _official_of(
    jobs: Any,
) -> dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]]:
    """A run record's official-equivalent latencies by job (``timing.official``), finite and
    positive ones only."""
    out: dict[tuple[str, str | None, str | None, int | None], tuple[float, float | None]] = {}
    for job in jobs if isinstance(jobs, list) else []:
        timing = job.get("timing") if isinstance(job, dict) else None
        off = timing.get("official") if isinstance(timing, dict) else None
        if not isinstance(off, dict):
            continue
        lat, ref = off.get("latency_ms"), off.get("reference_latency_ms")
        if (
            isinstance(lat, bool)
            or not isinstance(lat, (int, float))
            or not (math.isfinite(lat) and lat > 0)
        ):
            continue
        good_ref = (
            isinstance(ref, (int, float))
            and not isinstance(ref, bool)
            and math.isfinite(ref)
            and ref > 0
        )
        repeat = job.get("repeat")
        out[
            (
                str(job.get("uuid")),
                job.get("solution"),
                job.get("role"),
                repeat if isinstance(repeat, int) else None,
            )
        ] = (
            float(lat),
            float(ref) if good_ref and ref is not None else None,
        )
    return out


def official_view(src: Source) -> Source:
    """``src`` with every job's official-equivalent latency and reference latency in place of
    fibtui's own (timing kind ``official-equivalent``): what ``--timing official`` decides on. A
    PASSED job that was not timed so has no latency there (the comparison is then incomplete)."""
    from dataclasses import replace

    if src.table.source_format != "fibtui-run" or not src.official:
        raise InputError(
            src.path,
            "holds no official-equivalent timings: time the run with `fibtui run --timing official`",
            field="jobs[].timing.official",
        )
    rows = []
    for r in src.table.rows:
        off = src.official.get((r.uuid, r.solution, r.role, r.repeat))
        lat, ref = off if off is not None else (None, None)
        rows.append(
            replace(
                r,
                latency_ms=lat,
                reference_latency_ms=ref,
                speedup=ref / lat if lat and ref else None,
                block_medians_ms=None,
            )
        )
    # the CPU interpreter's numbers stay the interpreter's, whichever method timed them
    kind = src.table.meta.get("timing_kind")
    kind = kind if kind == CPU_INTERPRETER else OFFICIAL_KIND
    table = replace(src.table, rows=rows, meta={**src.table.meta, "timing_kind": kind})
    return replace(src, table=table)


#: the reason of an adaptive run's stop line for a workload whose interval was decided (the stop
#: reasons are fibtui.core.sequential's; this one is read here too, and sequential imports stats)
STOP_DECIDED = "decided"


def decided_stops(record: Mapping[str, Any]) -> dict[str, str]:
    """An adaptive run's workloads its rule stopped as decided (run.json's ``adaptive.workloads``):
    uuid -> the word decided."""
    stops = (record.get("adaptive") or {}).get("workloads") or {}
    if not isinstance(stops, dict):
        return {}
    return {
        str(uuid): str(stop.get("word"))
        for uuid, stop in stops.items()
        if isinstance(stop, dict) and stop.get("reason") == STOP_DECIDED
    }


def load_source(spec: str, archive_root: Path | None = None, axes_lookup: Any = None) -> Source:
    """A result file ``load_results`` reads, a run folder, or a run id under ``<archive>/runs``.
    Each file is read once: a run record's table and its run facts come from the one document."""
    from fibtui.core.results import load_results_and_document
    from fibtui.core.runs import build_record

    p = Path(spec).expanduser()
    folder: Path | None = None
    if p.is_dir():
        folder = p
    elif (
        not p.exists()
        and archive_root is not None
        and (archive_root / "runs" / spec / "journal.jsonl").is_file()
    ):
        folder = archive_root / "runs" / spec
    if folder is not None:
        path = folder / "run.json"
        if path.is_file():
            table, document = load_results_and_document(path, axes_lookup)
        elif (folder / "journal.jsonl").is_file():  # no run.json yet: the record of the journal
            return source_of_record(spec, path, build_record(folder).to_json())
        else:
            raise InputError(folder, "folder is not a fibtui run (no run.json or journal.jsonl)")
    elif p.is_file():
        path = p
        table, document = load_results_and_document(p, axes_lookup)
    else:
        hint = ""
        if archive_root is not None and (archive_root / "runs").is_dir():
            known = sorted(
                x.name for x in (archive_root / "runs").iterdir() if (x / "journal.jsonl").is_file()
            )
            hint = f" (runs here: {', '.join(known[-5:])})" if known else ""
        raise InputError(
            spec, f"not a result file, a run folder, or a run id under optimize_ops/runs{hint}"
        )
    record = document if isinstance(document, dict) else {}
    return _source(spec, path, table, record)


def source_of_record(
    spec: str, path: Path, record: dict[str, Any], axes_lookup: Any = None
) -> Source:
    """One side of a comparison from a run record already in memory (``run.json``'s content, or
    :meth:`fibtui.core.runs.RunRecord.to_json`): nothing is read from disk. ``path`` is where
    the record is said to come from (its run.json)."""
    from fibtui.core.results import read_run_record

    table = read_run_record(path, record)
    if axes_lookup is not None:  # as load_results does
        for r in table.rows:
            if not r.axes:
                found = axes_lookup(r.definition, r.uuid)
                if found:
                    r.axes = dict(found)
    return _source(spec, path, table, record)


def _source(spec: str, path: Path, table: RunTable, record: Mapping[str, Any]) -> Source:
    """The source of a table and, for a fibtui run, what its record says about the run."""
    from fibtui.core.results import has_workload_latencies

    src = Source(spec=spec, path=path, table=table)
    if table.source_format == "fibtui-run":
        src.run_id = table.meta.get("run_id")
        src.selection = record.get("workload_selection")
        src.official = _official_of(record.get("jobs"))
        adaptive = (record.get("settings") or {}).get("adaptive")
        src.adaptive = adaptive if isinstance(adaptive, dict) else None
        if src.adaptive is not None:
            src.decided = decided_stops(record)
        for s in record.get("solutions") or []:
            if isinstance(s, dict) and s.get("source_hash"):
                src.hashes[(str(s.get("role")), str(s.get("name")))] = str(s["source_hash"])
    env = table.meta.get("environment")
    if isinstance(env, dict):
        src.gpu = env.get("gpu") or env.get("hardware")
    if not has_workload_latencies(table.source_format):
        raise InputError(
            path,
            f"a {table.source_format} file has no per-workload latencies to pair; give a result file with them",
        )
    return src


def _arm_name(src: Source, solution: str | None) -> str:
    return solution or src.path.stem


def _group(rows: Sequence[ResultRow]) -> dict[str, list[ResultRow]]:
    out: dict[str, list[ResultRow]] = {}
    for r in rows:
        out.setdefault(r.solution or "", []).append(r)
    return out


def select_arms(
    base: Source,
    cand: Source | None,
    solution_base: str | None = None,
    solution_cand: str | None = None,
) -> tuple[str, list[ResultRow], dict[str, list[ResultRow]]]:
    """(baseline name, baseline rows, {candidate name: rows}) from the two sources (see
    ``fibtui compare --help``)."""

    def pick(src: Source, role: str, name: str | None, flag: str) -> dict[str, list[ResultRow]]:
        rows = list(src.table.rows)
        if name is not None:
            mine = [r for r in rows if r.solution == name]
            if not mine:
                names = ", ".join(sorted({str(r.solution) for r in rows})) or "none"
                raise InputError(
                    src.path, f"no rows for solution {name!r}; solutions here: {names}", field=flag
                )
            roled = [r for r in mine if r.role == role]
            return {name: roled or mine}
        roled = [r for r in rows if r.role == role]
        if roled:
            return _group(roled)
        if any(r.role for r in rows) and role == "baseline":
            return {}
        return _group(rows)

    base_groups = pick(base, "baseline", solution_base, "--solution-base")
    if not base_groups:
        raise InputError(
            base.path,
            "has no baseline rows: name the baseline solution with --solution-base",
            field="BASE",
        )
    if len(base_groups) > 1:
        raise InputError(
            base.path,
            f"holds {len(base_groups)} solutions ({', '.join(n or '(unnamed)' for n in base_groups)}); "
            "pick the baseline with --solution-base",
            field="--solution-base",
        )
    base_name, base_rows = next(iter(base_groups.items()))
    other = cand if cand is not None else base
    if cand is None:
        taken = {id(r) for r in base_rows}
        rest = [r for r in base.table.rows if id(r) not in taken]
        if solution_cand is not None:
            rest = [r for r in rest if r.solution == solution_cand]
            if not rest:
                raise InputError(
                    base.path,
                    f"no candidate rows for solution {solution_cand!r}",
                    field="--solution-cand",
                )
        groups = _group([r for r in rest if r.role in (None, "candidate")])
        if not groups:
            raise InputError(
                base.path,
                "holds only one solution: give CAND too (another result file or run id)",
                field="CAND",
            )
    else:
        groups = pick(other, "candidate", solution_cand, "--solution-cand")
        if (
            other.path.resolve() == base.path.resolve()
            and solution_cand is None
            and len(groups) > 1
        ):
            groups = {n: rows for n, rows in groups.items() if n != base_name}
        if not groups:
            raise InputError(other.path, "has no candidate rows", field="CAND")
    cands = {
        (_arm_name(other, n) if n else _arm_name(other, None)): rows for n, rows in groups.items()
    }
    return _arm_name(base, base_name or None), base_rows, cands


@dataclass
class CompareOutcome:
    baseline: str
    base: Source
    cand: Source
    scope: str
    entries: list[LeaderboardEntry]
    notes: list[str] = field(default_factory=list)
    #: the same comparison on the official-equivalent latencies, when the runs carry them and
    #: fibtui's own timing decided (shown beside it, deciding nothing)
    official: CompareOutcome | None = None

    @property
    def single(self) -> Comparison | None:
        return self.entries[0].comparison if len(self.entries) == 1 else None

    def official_lines(self) -> list[str]:
        """One line per candidate with its official-equivalent latency, beside fibtui's own."""
        if self.official is None:
            return []
        out = []
        for e in self.official.entries:
            c = e.comparison
            if c is None or c.mean_latency is None:
                continue
            score = f"; {c.score.phrase()}" if c.score is not None else ""
            who = f"{c.candidate.name}: " if len(self.official.entries) > 1 else ""
            out.append(
                f"official-equivalent timing ({who}flashinfer-bench main's method, deciding "
                f"nothing here): {c.verdict}; {c.latency_line()}{score}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        common: dict[str, Any] = {
            "base": self.base.spec,
            "cand": self.cand.spec,
            "scope": self.scope,
            "compare_notes": list(self.notes),
        }
        if self.official is not None:
            common["official"] = self.official.to_json()
        if self.single is not None:
            return {**self.single.to_json(), **common}
        return {
            "baseline": self.baseline,
            **common,
            "leaderboard": [e.to_json() for e in self.entries],
            "comparisons": [
                e.comparison.to_json() for e in self.entries if e.comparison is not None
            ],
        }


def compare_sources(
    base: Source,
    cand: Source | None,
    *,
    solution_base: str | None = None,
    solution_cand: str | None = None,
    settings: StatsSettings | None = None,
    archive_root: Path | None = None,
    band_of: Mapping[str, str] | None = None,
    total_workloads: int | None = None,
    band_shares: Mapping[str, float] | None = None,
    share_source: str | None = None,
    look: Look | None = None,
    score_numerators: Sequence[measures.Numerators] = (),
    floors_ms: Mapping[str, float] | None = None,
) -> CompareOutcome:
    """Pair the baseline with every candidate of the two sources, each with its own verdict
    (``band_shares``, ``share_source`` and ``look``: see :func:`paired_verdict`; an adaptive
    run's decided stops come with its source when ``look`` is given)."""
    settings = settings or StatsSettings()
    base_name, base_rows, cands = select_arms(base, cand, solution_base, solution_cand)
    other = cand if cand is not None else base
    key_base, key_cand = timing_key_of_source(base), timing_key_of_source(other)
    definition = base.table.definition or other.table.definition
    runs = [x for x in (base.run_id, other.run_id) if x]
    sessions: list[AASession] = []
    key_label = aa_key_label(definition, key_base)
    if archive_root is not None and speed_blocker(key_base, key_cand) is None:
        sessions = aa_sessions(
            archive_root,
            key_base.device,
            exclude_runs=runs,
            definition=definition,
            timing_kind=key_base.kind,
        )
    floor = noise_floor(settings, sessions, key_label)
    uuids = {str(r.uuid) for r in base_rows}
    if total_workloads is not None:
        scope = "full" if len(uuids) >= total_workloads else "sample"
    elif other.selection or base.selection:
        scope = "full" if (other.selection or base.selection) == "all" else "sample"
    else:
        scope = "full"
    hashes: dict[str, str] = {}
    for src in (base, other):
        for (_role, name), h in src.hashes.items():
            hashes.setdefault(name, h)
    entries = leaderboard(
        base_rows,
        cands,
        baseline_name=base_name,
        hashes=hashes,
        band_of=band_of,
        settings=settings,
        floor=floor,
        scope=scope,
        timing=(key_base, key_cand),
        band_shares=band_shares,
        share_source=share_source,
        look=look,
        decided=base.decided if look is not None else None,
        score_numerators=score_numerators,
        floors_ms=floors_ms,
    )
    notes = []
    if scope == "sample":
        notes.append(
            f"{len(uuids)} workloads stand in for the whole set (a gate or a selection): promotion needs the full set"
        )
    return CompareOutcome(base_name, base, other, scope, entries, notes)
