"""The round report: everything a round summary says, as a plain dict (the JSON twin of the
Markdown), built from the records alone: the run records named in the round, the round record
and the workload definition. The same records give the same report (no clock is read; dates come
from the run records)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fibtui.core import stats
from fibtui.core.archive.layout import candidate_parts, check_candidate_id
from fibtui.core.archive.rounds import RoundRecord
from fibtui.core.archive.run_data import RunData, load_run, run_kind
from fibtui.core.errors import InputError
from fibtui.core.measurement import Timed


def us_text(ms: float | None, digits: int = 3) -> str:
    return "-" if ms is None else f"{ms * 1000:.{digits}f}"


def signed_pct(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:+.{digits}f}%"


def ratio_pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1.0) * 100:+.2f}%"


def _band_sort_key(name: str) -> tuple[Any, ...]:
    nums = [int(x) for x in re.findall(r"-?\d+", name)]
    return (name.startswith("outlier"), nums, name)


def band_map(
    definition_obj: Any, workloads: Any, rows: Sequence[Timed]
) -> tuple[dict[str, str], Any, str]:
    """uuid -> band (regimes of the definition's workloads when given, else the rows' axes)."""
    if definition_obj is not None and workloads is not None:
        from fibtui.core import regimes

        try:
            report = regimes.analyze(definition_obj, workloads, rows)
        except InputError:
            report = None
        if report is not None:
            return (
                dict(report.table.select("uuid", "band").iter_rows()),
                report,
                "regimes of the definition's workloads",
            )
    return stats.bands_from_axes(rows), None, "the result rows' axes"


def _floor_from_record(rec: RoundRecord, settings: stats.StatsSettings) -> stats.NoiseFloor:
    nf = rec.noise_floor or {}
    if "tau" not in nf:
        return stats.noise_floor(settings)
    return stats.NoiseFloor(
        tau=float(nf["tau"]),
        source=str(nf.get("source", "")),
        min_gain=float(nf.get("min_gain", settings.min_gain)),
        aa_sessions=int(nf.get("aa_sessions", 0)),
        aa_p99_abs_log_g=nf.get("aa_p99_abs_log_g"),
        aa_sigma=nf.get("aa_sigma"),
        aa_promotions=int(nf.get("aa_promotions", 0)),
    )


def _settings_from_record(rec: RoundRecord) -> stats.StatsSettings:
    s = stats.StatsSettings()
    for key, value in (rec.settings or {}).items():
        if hasattr(s, key):
            setattr(s, key, type(getattr(s, key))(value))
    return s


def freeze_floor(floor: stats.NoiseFloor) -> dict[str, Any]:
    out = floor.to_json()
    out["sessions"] = [
        {"source": s.source, "kind": s.kind, "log_g": s.log_g, "sigma": s.sigma}
        for s in floor.sessions
    ]
    return out


def compare_run(
    run: RunData,
    base: dict[str, Any],
    cand: dict[str, Any],
    band_of: dict[str, str],
    settings: stats.StatsSettings,
    floor: stats.NoiseFloor,
    total: int | None = None,
) -> stats.Comparison:
    scope = "full" if run_kind(run, total) == "sweep" else "sample"
    return stats.paired_verdict(
        run.rows("baseline", base["name"]),
        run.rows("candidate", cand["name"]),
        scope=scope,
        baseline_name=base["name"],
        candidate_name=cand["name"],
        band_of=band_of,
        settings=settings,
        floor=floor,
        baseline_hash=base.get("source_hash"),
        candidate_hash=cand.get("source_hash"),
    )


def _env_line(record: dict[str, Any]) -> str:
    env = record.get("environment") or {}
    plan = ((record.get("settings") or {}).get("engine") or {}).get("plan") or {}
    parts = []
    if env.get("gpu"):
        gpu = env["gpu"] + (f" ({env['sm_count']} SMs" if env.get("sm_count") else "")
        if env.get("driver"):
            gpu += (
                f", driver {env['driver']}" if env.get("sm_count") else f" (driver {env['driver']}"
            )
        gpu += ")" if env.get("sm_count") or env.get("driver") else ""
        parts.append(gpu)
    for key in ("torch", "triton", "cuda"):
        if env.get(key):
            parts.append(f"{key} {env[key]}")
    line = ", ".join(parts) or "unknown machine"
    timing = record.get("timing_kind") or "?"
    l2 = record.get("l2_policy") or "?"
    detail = f"; timing {timing}, L2 {l2}"
    if plan.get("blocks") and plan.get("calls_per_block"):
        detail += f", latency = median over {plan['blocks']} blocks of the median of {plan['calls_per_block']} launches"
    return line + detail


def build_round_report(
    archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None
) -> dict[str, Any]:
    """Everything the round summary says, from the records alone (a plain dict: the JSON twin)."""
    settings = _settings_from_record(rec)
    floor = _floor_from_record(rec, settings)
    runs = [load_run(archive_root, r["run_id"]) for r in rec.runs]
    total = len(workloads) if workloads is not None else None
    base, cand = rec.baseline, rec.candidate
    sweeps = [r for r in runs if run_kind(r, total) == "sweep"]
    deciding = sweeps[-1] if sweeps else runs[-1]
    band_rows = deciding.rows("baseline", base["name"])
    band_of, regime_report, band_source = band_map(definition_obj, workloads, band_rows)
    comparisons = {
        run.run_id: compare_run(run, base, cand, band_of, settings, floor, total) for run in runs
    }
    run_entries = [_run_entry(run, comparisons[run.run_id], total) for run in runs]
    decisive = comparisons[deciding.run_id]
    per_band = sorted(decisive.per_band, key=lambda b: _band_sort_key(b.band))
    picks = picks_on(deciding, cand["name"], definition_obj, workloads)
    reps = _representatives(runs, total, regime_report, band_of, decisive, picks)
    gates = [r for r in runs if run_kind(r, total) == "gate"]
    matrix = _shape_matrix(runs, cand["name"], reps, band_of, per_band)
    findings = _findings(rec, run_entries, decisive, per_band, comparisons, runs, total)
    return {
        "format": "fibtui-round-summary",
        "version": 1,
        "round": rec.round,
        "date": rec.date,
        "topic": rec.topic,
        "definition": rec.definition,
        "baseline": dict(sorted(base.items())),
        "candidate": dict(sorted(cand.items())),
        "candidate_id": {
            "parts": candidate_parts(cand["name"]),
            "warnings": check_candidate_id(cand["name"]),
        },
        "hypothesis": _hypothesis_text(deciding, cand),
        "environment": _env_line(deciding.record),
        "runs": run_entries,
        "deciding_run": deciding.run_id,
        "verdict": decisive.verdict,
        "comparison": _comparison_digest(decisive),
        "arms": {
            "baseline": decisive.baseline.to_json(),
            "candidate": decisive.candidate.to_json(),
        },
        "noise_floor": {
            "tau": floor.tau,
            "source": floor.source,
            "min_gain": floor.min_gain,
            "aa_sessions": floor.aa_sessions,
            "aa_p99_abs_log_g": floor.aa_p99_abs_log_g,
            "aa_sigma": floor.aa_sigma,
            "aa_promotions": floor.aa_promotions,
            "pair_noise": asdict(decisive.noise) if decisive.noise else None,
        },
        "settings": asdict(settings),
        "band_source": band_source,
        "bands": [b.to_json() for b in per_band],
        "representatives": reps,
        "representatives_source": (
            "regimes of the deciding run's candidate latencies"
            if picks is not None and picks.representatives
            else "the gate's workloads"
            if gates
            else "regimes of the band rows"
        ),
        "gate_workloads": list(gates[0].uuids) if gates else [],
        "shape_matrix": matrix,
        "findings": findings,
        "decision": {
            "decision": rec.decision,
            "reason": rec.reason,
            "verdict": rec.verdict or decisive.verdict,
            "recommendation": decisive.recommendation(),
            "verdict_now": decisive.verdict,
        },
        "artifacts": list(rec.artifacts),
        "notes": list(rec.notes),
        "warnings": list(rec.warnings),
        "summary": rec.summary,
    }


def _run_entry(run: RunData, comp: stats.Comparison, total: int | None) -> dict[str, Any]:
    """One run of the round as the report lists it."""
    return {
        "run_id": run.run_id,
        "kind": run_kind(run, total),
        "selection": run.selection,
        "workloads": len(run.uuids),
        "repeats": run.record.get("repeats"),
        "state": run.record.get("state"),
        "started": run.record.get("started"),
        "finished": run.record.get("finished"),
        "backend": run.record.get("backend"),
        "environment": _env_line(run.record),
        "comparison": _comparison_digest(comp),
    }


def picks_on(run: RunData, candidate: str, definition_obj: Any, workloads: Any) -> Any:
    """The regime analysis of ``run``'s candidate latencies: the report whose representatives
    `fibtui regimes --results <run>/run.json --solution <candidate>` names (pins aside); None
    without the definition's workloads."""
    if definition_obj is None or workloads is None:
        return None
    from fibtui.core import regimes

    try:
        return regimes.analyze(definition_obj, workloads, run.rows("candidate", candidate))
    except InputError:
        return None


def _representatives(
    runs: list[RunData],
    total: int | None,
    regime_report: Any,
    band_of: dict[str, str],
    decisive: stats.Comparison,
    picks: Any = None,
) -> list[dict[str, Any]]:
    """The representatives of the round's data (``picks``: the regime analysis of the deciding
    run's candidate latencies, the same as `fibtui regimes` on that run), else the workloads the
    gate ran, else the band analysis's picks; each with its band, why it stands for it, whether
    the gate ran it, and its paired latencies in the deciding run."""
    gates = [r for r in runs if run_kind(r, total) == "gate"]
    gate_uuids = set(gates[0].uuids) if gates else set()
    if picks is not None and picks.representatives:
        rep_uuids = [r.uuid for r in picks.representatives]
        reasons = {r.uuid: r.reason for r in picks.representatives}
    else:
        rep_uuids = (
            gates[0].uuids
            if gates
            else ([r.uuid for r in regime_report.representatives] if regime_report else [])
        )
        reasons = {r.uuid: r.reason for r in regime_report.representatives} if regime_report else {}
    shares = {b.name: b.latency_share for b in regime_report.bands} if regime_report else {}
    pair_of = {p.uuid: p for p in decisive.pairs}
    reps = []
    for uuid in rep_uuids:
        p = pair_of.get(uuid)
        band = band_of.get(uuid, p.band if p else "all")
        share = shares.get(band)
        reason = reasons.get(uuid) or (
            f"band {band}"
            + (f" ({share:.0%} of the baseline latency)" if share is not None else "")
        )
        reps.append(
            {
                "uuid": uuid,
                "band": band,
                "axes": p.axes if p else {},
                "reason": reason,
                "base_ms": p.base_mean_ms if p else None,
                "cand_ms": p.cand_mean_ms if p else None,
                "ratio": p.ratio if p else None,
                "in_gate": uuid in gate_uuids if gates else None,
            }
        )
    return reps


def _shape_matrix(
    runs: list[RunData],
    candidate: str,
    reps: list[dict[str, Any]],
    band_of: dict[str, str],
    per_band: list[stats.BandResult],
) -> list[dict[str, Any]]:
    """Band -> representative workload -> dominant kernel, from the kernel names the timing
    records carry (bottleneck and limiter need an NCU report, so they stay empty here)."""
    kernels: dict[str, list[str]] = {}
    for run in runs:
        for j in run.rows("candidate", candidate):
            names = j.timing.get("kernel_names") if isinstance(j.timing, dict) else None
            if names and j.uuid not in kernels:
                kernels[j.uuid] = list(names)
    rep_by_band: dict[str, str] = {}
    for r in reps:
        rep_by_band.setdefault(r["band"], r["uuid"])
    first_by_band: dict[str, str] = {}
    for uuid, band in band_of.items():
        first_by_band.setdefault(band, uuid)
    matrix = []
    for b in per_band:
        rep = rep_by_band.get(b.band) or first_by_band.get(b.band)
        found = kernels.get(rep or "", [])
        matrix.append(
            {
                "band": b.band,
                "uuid": rep,
                "dominant_kernel": found[0] if found else None,
                "bottleneck": None,
                "limiter": None,
                "source": "kernel names from the timing records; not profiled with NCU in this round",
            }
        )
    return matrix


def _hypothesis_text(run: RunData, ref: dict[str, Any]) -> str | None:
    """The candidate's own statement of its hypothesis: the module docstring of its entry file
    (Python), or its leading comment block (C++/CUDA), from the run's snapshot."""
    import ast

    snapshot = next(
        (
            s.get("snapshot")
            for s in run.record.get("solutions") or []
            if s.get("role") == "candidate" and s.get("name") == ref["name"]
        ),
        None,
    )
    entry = (ref.get("entry_point") or "").split("::", 1)[0]
    if not snapshot or not entry:
        return None
    path = run.folder / snapshot / "sources" / entry
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    doc: str | None = None
    if path.suffix == ".py":
        try:
            doc = ast.get_docstring(ast.parse(text))
        except (SyntaxError, ValueError):
            doc = None
    else:
        lines = []
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("//"):
                lines.append(stripped[2:].strip())
            elif stripped.startswith(("/*", "*")):
                lines.append(stripped.strip("/* ").strip())
            elif stripped or lines:
                break
        doc = "\n".join(lines).strip() or None
    if not doc:
        return None
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()]
    return "\n\n".join(paragraphs[:4])[:2000]


def _comparison_digest(c: stats.Comparison) -> dict[str, Any]:
    wins, ties, losses = c.wins
    iv = c.interval
    return {
        "verdict": c.verdict,
        "interval_verdict": c.interval_verdict,
        "geomean_ratio": c.geomean_ratio,
        "ci_low": stats.finite_or_none(iv.low) if iv else None,
        "ci_high": stats.finite_or_none(iv.high) if iv else None,
        "interval_method": iv.method if iv else None,
        "confidence": c.confidence,
        "tau": c.tau.tau,
        "tau_source": c.tau.source,
        "workloads": c.workloads,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "tie_band": c.tie_band,
        "blocked_by": c.blocked_by,
        "dispatch_bands": c.dispatch_bands,
        "complete": c.complete,
        "failures": c.failures,
        "baseline": _arm_digest(c.baseline),
        "candidate": _arm_digest(c.candidate),
        "recommendation": c.recommendation(),
        **_measures_digest(c),
    }


def _measures_digest(c: stats.Comparison) -> dict[str, Any]:
    """The mean latency (which decides), the projected score, the worst workloads and the
    disagreement line of a comparison (the same fields as ``fibtui compare --json``)."""
    out = c.to_json()
    keys = (
        "mean_latency_change",
        "mean_latency_interval",
        "mean_latency_verdict",
        "p95_latency_change",
        "score",
        "score_baseline",
        "score_delta",
        "score_interval",
        "score_denominator",
        "scores",
        "words",
        "worst_workloads",
        "disagreement",
        "verdict_lines",
    )
    return {k: out[k] for k in keys}


def _arm_digest(a: stats.ArmSummary) -> dict[str, Any]:
    return {
        "name": a.name,
        "mean_latency_ms": a.mean_latency_ms,
        "p95_latency_ms": a.p95_latency_ms,
        "median_latency_ms": a.median_latency_ms,
        "best_repeat_mean_ms": a.best_repeat_mean_ms,
        "run_to_run_cv": a.run_to_run_cv,
        "repeats": a.repeats,
        "workloads": a.workloads,
        "passed": a.passed,
        "rows": a.rows,
        "mean_reference_latency_ms": a.mean_reference_latency_ms,
        "mean_speedup": a.mean_speedup,
    }


def band_word(b: stats.BandResult, tie: float) -> str:
    if b.regression:
        return "regression beyond the guard"
    if b.ci_high < 1.0 and b.geomean_ratio < 1.0 - tie:
        return "improvement"
    if b.ci_low > 1.0 and b.geomean_ratio > 1.0 + tie:
        return "slower"
    return "flat"


def _findings(
    rec: RoundRecord,
    run_entries: list[dict[str, Any]],
    c: stats.Comparison,
    bands: list[stats.BandResult],
    comparisons: dict[str, stats.Comparison],
    runs: list[RunData],
    total: int | None,
) -> list[str]:
    out: list[str] = []
    b, k = c.baseline, c.candidate
    m = c.mean_latency
    if m is not None:
        p95_change = c.p95_change
        out.append(
            f"Mean latency {us_text(m.base_ms)} -> {us_text(m.cand_ms)} us "
            f"({signed_pct(m.change * 100)}, {c.confidence:.0%} interval {signed_pct(m.low * 100)} to "
            f"{signed_pct(m.high * 100)}); PROMOTE needs the whole interval below "
            f"{signed_pct((math.exp(-c.tau.tau) - 1) * 100)} (tau {c.tau.tau * 100:.2f}%): "
            f"{c.mean_latency_verdict}. p95 {us_text(b.p95_latency_ms)} -> {us_text(k.p95_latency_ms)} us "
            f"({signed_pct(p95_change * 100 if p95_change is not None else None)})."
        )
    if c.geomean_ratio is not None and c.interval is not None:
        out.append(
            f"Geometric-mean latency ratio (context) {c.geomean_ratio:.4f} ({ratio_pct(c.geomean_ratio)}), "
            f"{c.confidence:.0%} interval [{c.interval.low:.4f}, {c.interval.high:.4f}]: {c.g_word}."
        )
    for s in c.scores:
        out.append(f"Projected contest {s.phrase()}: baseline {s.score_baseline:.2f}.")
    if c.worst_line():
        out.append(f"{(c.worst_line() or '').capitalize()}.")
    if c.disagreement:
        out.append(f"The measures disagree: {c.disagreement}.")
    if rec.verdict and c.verdict != rec.verdict:
        out.append(
            f"The round was decided {rec.verdict} under the rule of its time; today's rule (the mean "
            f"latency decides, G is context) says {c.verdict}."
        )
    wins, ties, losses = c.wins
    out.append(
        f"Paired per workload: {wins} wins, {ties} ties, {losses} losses (tie band +-{c.tie_band * 100:.1f}%)."
    )
    improved = [x for x in bands if band_word(x, c.tie_band) == "improvement"]
    flat = [x for x in bands if band_word(x, c.tie_band) == "flat"]
    if improved:
        best = min(improved, key=lambda x: x.geomean_ratio)
        out.append(
            f"The gain is in {', '.join(x.band for x in improved)}; largest in {best.band} "
            f"({signed_pct(best.change_pct)}, {best.wins}/{best.workloads} wins)."
        )
    if flat:
        out.append(
            f"Flat (interval includes no change, or within the tie band): {', '.join(x.band for x in flat)}."
        )
    if c.guard:
        out.append("Regression guard fired: " + "; ".join(c.blocked_by) + ".")
    else:
        out.append(
            f"No workload or band is slower beyond +{c.guard_margin:.0%} with confidence (regression guard, Holm)."
        )
    if c.dispatch_bands:
        out.append("Archive as a dispatch candidate for band " + ", ".join(c.dispatch_bands) + ".")
    for run, entry in zip(runs, run_entries, strict=True):
        if entry["kind"] == "gate":
            g = comparisons[run.run_id]
            if g.geomean_ratio is not None:
                iv = (
                    f", interval [{g.interval.low:.4f}, {g.interval.high:.4f}]"
                    if g.interval
                    else ""
                )
                gm = g.mean_latency
                mean = (
                    f"mean latency {signed_pct(gm.change * 100)} [{signed_pct(gm.low * 100)}, "
                    f"{signed_pct(gm.high * 100)}], "
                    if gm is not None
                    else ""
                )
                out.append(
                    f"Representative gate ({g.workloads} workloads): {mean}ratio {g.geomean_ratio:.4f}{iv} -> {g.verdict}"
                    + (
                        f"; the gate's bands {', '.join(g.dispatch_bands)} already won with confidence"
                        if g.dispatch_bands
                        else ""
                    )
                    + "."
                )
    if b.run_to_run_cv is not None and k.run_to_run_cv is not None:
        out.append(
            f"Run-to-run variation of the mean across {b.repeats} repeats: baseline {b.run_to_run_cv * 100:.2f}%, "
            f"candidate {k.run_to_run_cv * 100:.2f}%."
        )
    if c.noise is not None:
        out.append(f"Noise of one paired ratio: {c.noise.sigma * 100:.2f}% ({c.noise.source}).")
    if c.failures:
        out.append(
            f"Incomplete: {len(c.failures)} failure(s): "
            + "; ".join(c.failures[:5])
            + ("; ..." if len(c.failures) > 5 else "")
            + "."
        )
    else:
        rows = b.rows + k.rows
        out.append(f"Every counted job PASSED ({rows}/{rows} in the deciding run).")
    return out
