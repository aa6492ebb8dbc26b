"""The verdict rules: the regression guard, :func:`paired_verdict` (pairing, interval, bands,
measures, the final verdict) and the correctness-only comparison."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fibtui.core import measures
from fibtui.core.measurement import CUPTI, Timed
from fibtui.core.measures import FASTER, SLOWER, UNCHANGED, UNDECIDED, classify
from fibtui.core.stats.comparison import BandResult, Comparison, GuardHit, Look, measure, wrong_rows
from fibtui.core.stats.constants import (
    BLOCKED,
    INCOMPLETE,
    INCONCLUSIVE,
    INCORRECT,
    NO_SPEED_VERDICT,
    NOT_JUDGED,
    PROMOTE,
    REJECT,
    T_MIN_WORKLOADS,
)
from fibtui.core.stats.distributions import holm, t_cdf, t_quantile
from fibtui.core.stats.floor import NoiseFloor, StatsSettings, _pct, noise_floor
from fibtui.core.stats.intervals import Interval, _weighted_mean, exp_or_inf, interval_for
from fibtui.core.stats.noise import PairNoise, block_noise, pair_noise
from fibtui.core.stats.pairs import (
    ArmSummary,
    WorkloadPair,
    bands_from_axes,
    pair_workloads,
    summarize_arm,
)
from fibtui.core.stats.timing_keys import TimingKey, speed_blocker, timing_key_of_rows
from fibtui.core.status import PASSED, is_tool_limit


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
    if key is not None and key.kind == CUPTI:
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
