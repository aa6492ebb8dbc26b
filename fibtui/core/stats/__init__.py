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

The modules, one concern each (every name is importable from ``fibtui.core.stats`` as well):
``constants`` (defaults, verdict words), ``timing_keys`` (how a latency was measured),
``distributions`` (t, normal, Holm), ``floor`` (settings, the noise floor tau), ``pairs`` (rows to
arms and per-workload pairs), ``noise`` (the noise of one paired log ratio), ``intervals`` (the
interval for log G), ``comparison`` (a comparison's parts and its words), ``verdict`` (the guard
and :func:`paired_verdict`), ``leaderboard``, ``aa`` (A/A history) and ``sources`` (what a user
names: files, run folders, run ids, a record in memory). The rows they read are typed
(:class:`fibtui.core.measurement.Timed`: a result row or a run's job).
"""

from __future__ import annotations

from fibtui.core.measures import FASTER as FASTER
from fibtui.core.measures import MIXED as MIXED
from fibtui.core.measures import SLOWER as SLOWER
from fibtui.core.measures import UNCHANGED as UNCHANGED
from fibtui.core.measures import UNDECIDED as UNDECIDED
from fibtui.core.measures import WORDS as WORDS
from fibtui.core.measures import classify as classify
from fibtui.core.stats.aa import aa_key_label as aa_key_label
from fibtui.core.stats.aa import aa_session_from as aa_session_from
from fibtui.core.stats.aa import aa_sessions as aa_sessions
from fibtui.core.stats.aa import load_aa_file as load_aa_file
from fibtui.core.stats.aa import record_aa_session as record_aa_session
from fibtui.core.stats.comparison import BandResult as BandResult
from fibtui.core.stats.comparison import BandWord as BandWord
from fibtui.core.stats.comparison import Comparison as Comparison
from fibtui.core.stats.comparison import GuardHit as GuardHit
from fibtui.core.stats.comparison import Look as Look
from fibtui.core.stats.comparison import Measured as Measured
from fibtui.core.stats.comparison import failure_counts as failure_counts
from fibtui.core.stats.comparison import measure as measure
from fibtui.core.stats.comparison import wrong_rows as wrong_rows
from fibtui.core.stats.constants import AA_FILE as AA_FILE
from fibtui.core.stats.constants import BLOCKED as BLOCKED
from fibtui.core.stats.constants import BOOTSTRAP_MIN_WORKLOADS as BOOTSTRAP_MIN_WORKLOADS
from fibtui.core.stats.constants import BOOTSTRAP_RESAMPLES as BOOTSTRAP_RESAMPLES
from fibtui.core.stats.constants import BOOTSTRAP_SEED as BOOTSTRAP_SEED
from fibtui.core.stats.constants import CPU_INTERPRETER as CPU_INTERPRETER
from fibtui.core.stats.constants import DEFAULT_CONFIDENCE as DEFAULT_CONFIDENCE
from fibtui.core.stats.constants import DEFAULT_GUARD_MARGIN as DEFAULT_GUARD_MARGIN
from fibtui.core.stats.constants import DEFAULT_MIN_GAIN as DEFAULT_MIN_GAIN
from fibtui.core.stats.constants import DEFAULT_NOISE as DEFAULT_NOISE
from fibtui.core.stats.constants import DEFAULT_TIE_BAND as DEFAULT_TIE_BAND
from fibtui.core.stats.constants import GUARD_ALPHA as GUARD_ALPHA
from fibtui.core.stats.constants import INCOMPLETE as INCOMPLETE
from fibtui.core.stats.constants import INCONCLUSIVE as INCONCLUSIVE
from fibtui.core.stats.constants import INCORRECT as INCORRECT
from fibtui.core.stats.constants import MIN_NOISE as MIN_NOISE
from fibtui.core.stats.constants import NO_SPEED_VERDICT as NO_SPEED_VERDICT
from fibtui.core.stats.constants import NOT_JUDGED as NOT_JUDGED
from fibtui.core.stats.constants import NOT_RUN_STATUSES as NOT_RUN_STATUSES
from fibtui.core.stats.constants import PROMOTE as PROMOTE
from fibtui.core.stats.constants import REJECT as REJECT
from fibtui.core.stats.constants import T_MIN_WORKLOADS as T_MIN_WORKLOADS
from fibtui.core.stats.distributions import holm as holm
from fibtui.core.stats.distributions import incomplete_beta as incomplete_beta
from fibtui.core.stats.distributions import t_cdf as t_cdf
from fibtui.core.stats.distributions import t_quantile as t_quantile
from fibtui.core.stats.floor import AASession as AASession
from fibtui.core.stats.floor import NoiseFloor as NoiseFloor
from fibtui.core.stats.floor import StatsSettings as StatsSettings
from fibtui.core.stats.floor import noise_floor as noise_floor
from fibtui.core.stats.intervals import BOOTSTRAP_COLUMNAR_WORKLOADS as BOOTSTRAP_COLUMNAR_WORKLOADS
from fibtui.core.stats.intervals import BOOTSTRAP_MAX_DRAWS as BOOTSTRAP_MAX_DRAWS
from fibtui.core.stats.intervals import BOOTSTRAP_MIN_RESAMPLES as BOOTSTRAP_MIN_RESAMPLES
from fibtui.core.stats.intervals import Interval as Interval
from fibtui.core.stats.intervals import _bootstrap_columnar as _bootstrap_columnar
from fibtui.core.stats.intervals import _t_interval as _t_interval
from fibtui.core.stats.intervals import bootstrap_resamples as bootstrap_resamples
from fibtui.core.stats.intervals import exp_or_inf as exp_or_inf
from fibtui.core.stats.intervals import finite_or_none as finite_or_none
from fibtui.core.stats.intervals import interval_for as interval_for
from fibtui.core.stats.leaderboard import LeaderboardEntry as LeaderboardEntry
from fibtui.core.stats.leaderboard import leaderboard as leaderboard
from fibtui.core.stats.noise import MEDIAN_VARIANCE as MEDIAN_VARIANCE
from fibtui.core.stats.noise import PairNoise as PairNoise
from fibtui.core.stats.noise import block_noise as block_noise
from fibtui.core.stats.noise import pair_noise as pair_noise
from fibtui.core.stats.pairs import ArmSummary as ArmSummary
from fibtui.core.stats.pairs import Failure as Failure
from fibtui.core.stats.pairs import WorkloadPair as WorkloadPair
from fibtui.core.stats.pairs import bands_from_axes as bands_from_axes
from fibtui.core.stats.pairs import pair_workloads as pair_workloads
from fibtui.core.stats.pairs import summarize_arm as summarize_arm
from fibtui.core.stats.sources import OFFICIAL_KIND as OFFICIAL_KIND
from fibtui.core.stats.sources import STOP_DECIDED as STOP_DECIDED
from fibtui.core.stats.sources import CompareOutcome as CompareOutcome
from fibtui.core.stats.sources import Source as Source
from fibtui.core.stats.sources import compare_sources as compare_sources
from fibtui.core.stats.sources import decided_stops as decided_stops
from fibtui.core.stats.sources import load_source as load_source
from fibtui.core.stats.sources import official_view as official_view
from fibtui.core.stats.sources import select_arms as select_arms
from fibtui.core.stats.sources import source_of_record as source_of_record
from fibtui.core.stats.sources import timing_key_of_source as timing_key_of_source
from fibtui.core.stats.timing_keys import TimingKey as TimingKey
from fibtui.core.stats.timing_keys import speed_blocker as speed_blocker
from fibtui.core.stats.timing_keys import timing_key_of_rows as timing_key_of_rows
from fibtui.core.stats.verdict import HOST_TIMED_REFERENCE as HOST_TIMED_REFERENCE
from fibtui.core.stats.verdict import paired_verdict as paired_verdict
from fibtui.core.stats.verdict import settled_bands as settled_bands
from fibtui.core.status import PASSED as PASSED
