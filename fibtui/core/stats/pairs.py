"""Rows to arms (:class:`ArmSummary`) and to per-workload pairs (:class:`WorkloadPair`), and bands
from the rows' own axes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fibtui.core import numbers
from fibtui.core.measurement import Timed
from fibtui.core.stats.constants import DEFAULT_TIE_BAND
from fibtui.core.status import PASSED


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
