"""The noise of one paired log ratio: this run's repeats, the A/A history, the jobs' paired
blocks, else a fallback."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fibtui.core.measurement import Timed
from fibtui.core.stats.constants import DEFAULT_NOISE, MIN_NOISE
from fibtui.core.stats.floor import _pct
from fibtui.core.stats.pairs import WorkloadPair
from fibtui.core.status import PASSED


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
