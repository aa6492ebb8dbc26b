"""The Markdown round summary (``docs/round_<date>_<topic>.md``) of the round report, and writing
it with its ``.json`` twin."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from fibtui.core import stats
from fibtui.core.archive.report import band_word, build_round_report, ratio_pct, signed_pct, us_text
from fibtui.core.archive.rounds import RoundRecord
from fibtui.core.fsio import atomic_write_text


def _md_arm_row(label: str, run_label: str, a: dict[str, Any], passed_total: str) -> str:
    cv = "-" if a["run_to_run_cv"] is None else f"{a['run_to_run_cv'] * 100:.2f}%"
    ref = "-" if a["mean_reference_latency_ms"] is None else f"{a['mean_reference_latency_ms']:.4f}"
    spd = "-" if a["mean_speedup"] is None else f"{a['mean_speedup']:.1f}x"
    return (
        f"| {label} | {run_label} | **{us_text(a['mean_latency_ms'])}** | **{us_text(a['p95_latency_ms'])}** | "
        f"{us_text(a['median_latency_ms'])} | {us_text(a['best_repeat_mean_ms'])} | {cv} | {ref} | {spd} | {passed_total} |"
    )


def round_summary_markdown(report: dict[str, Any]) -> str:
    """The Markdown round summary of :func:`build_round_report`'s data: one section after another."""
    lines: list[str] = []
    for section in _SECTIONS:
        lines += section(report)
    return "\n".join(lines) + "\n"


def _md_heading(r: dict[str, Any]) -> list[str]:
    """The title and the round's facts: date, definition, the two solutions, machine, runs, decision."""
    base, cand = r["baseline"], r["candidate"]
    lines: list[str] = []
    add = lines.append
    add(f"# Round {r['date']}: `{cand['name']}` vs `{base['name']}`")
    add("")
    add(f"- Date: {r['date']} (from the run records)")
    add(f"- Definition: `{r['definition']}`")
    add(
        f"- Baseline: `{base['name']}` (source hash `{base.get('source_hash') or '?'}`, entry point `{base.get('entry_point') or '?'}`)"
    )
    parts = r["candidate_id"]["parts"]
    hyp = (
        f"; hypothesis id: version {parts['version']}, band {parts['band']}, change {parts['change']}"
        if parts
        else ""
    )
    add(f"- Candidate: `{cand['name']}` (source hash `{cand.get('source_hash') or '?'}`{hyp})")
    add(f"- Machine: {r['environment']}")
    for run in r["runs"]:
        kind = {"gate": "representative gate", "sweep": "full sweep"}.get(run["kind"], "selection")
        add(
            f"- Run `{run['run_id']}`: {kind}, {run['workloads']} workloads x {run['repeats']} repeats, "
            f"baseline and candidate paired in one process ({run['backend']}), {run['state']}"
        )
    add(f"- Decision: **{r['decision']['decision']}** (verdict {r['verdict']})")
    add("")
    return lines


def _md_candidate(r: dict[str, Any]) -> list[str]:
    """The candidate's own statement of its hypothesis (none when its entry file has no docstring)."""
    if not r.get("hypothesis"):
        return []
    cand = r["candidate"]
    lines: list[str] = []
    add = lines.append
    add("## Candidate")
    add("")
    add(f"From the docstring of the candidate's entry file (`{cand.get('entry_point') or '?'}`):")
    add("")
    for para in r["hypothesis"].split("\n\n"):
        add(f"> {para}")
        add(">")
    lines.pop()
    add("")
    return lines


def _md_verdict(r: dict[str, Any]) -> list[str]:
    """The verdict, its interval against the noise floor, and what blocked it."""
    comp = r["comparison"]
    lines: list[str] = []
    add = lines.append
    add("## Verdict")
    add("")
    iv = "-" if comp["ci_low"] is None else f"[{comp['ci_low']:.4f}, {comp['ci_high']:.4f}]"
    ratio = (
        "-"
        if comp["geomean_ratio"] is None
        else f"{comp['geomean_ratio']:.4f} ({ratio_pct(comp['geomean_ratio'])})"
    )
    where = (
        "full sweep"
        if any(x["kind"] == "sweep" and x["run_id"] == r["deciding_run"] for x in r["runs"])
        else "deciding run"
    )
    tau = r["noise_floor"]["tau"]
    mean = comp.get("mean_latency_change")
    if mean is not None:
        lo, hi = comp["mean_latency_interval"]
        add(
            f"**{comp['verdict']}** on the {where} `{r['deciding_run']}`: mean latency "
            f"{us_text(comp['baseline']['mean_latency_ms'])} -> {us_text(comp['candidate']['mean_latency_ms'])} us "
            f"({signed_pct(mean * 100)}, {comp['confidence']:.0%} interval {signed_pct(lo * 100 if lo is not None else None)} "
            f"to {signed_pct(hi * 100 if hi is not None else None)}, from the paired noise). Noise floor tau = "
            f"{tau * 100:.2f}% (source: {r['noise_floor']['source']}): PROMOTE needs the whole interval below "
            f"{signed_pct((math.exp(-tau) - 1) * 100)} and no regression beyond the guard."
        )
    else:
        add(f"**{comp['verdict']}** on the {where} `{r['deciding_run']}`.")
    add("")
    for line in comp.get("verdict_lines") or []:
        add(f"- {line[0].upper() + line[1:]}.")
    if comp.get("verdict_lines"):
        add(
            f"- G, speedup as context: {comp['interval_method'] or 'no interval (too few workloads)'}."
        )
    else:
        add(
            f"- Geometric-mean latency ratio G = {ratio}, {comp['confidence']:.0%} interval {iv} "
            f"by {comp['interval_method'] or 'no interval (too few workloads)'}."
        )
    add(f"- {comp['recommendation'][0].upper() + comp['recommendation'][1:]}.")
    if comp["blocked_by"]:
        add("- Blocked by: " + "; ".join(comp["blocked_by"]))
    add(
        f"- Threshold: the baseline's mean across repeats, {us_text(comp['baseline']['mean_latency_ms'])} us "
        f"(its best single repeat, {us_text(comp['baseline']['best_repeat_mean_ms'])} us, is context only)."
    )
    add("")
    return lines


def _md_results(r: dict[str, Any]) -> list[str]:
    """Per run: both arms' latencies, then the paired deltas."""
    lines: list[str] = []
    add = lines.append
    add("## Results")
    add("")
    add(
        "Latency is the decision metric (mean and p95 over workloads, averaged across repeats; the mean latency's "
        "interval decides); speedup against the reference is context only."
    )
    add("")
    add(
        "| Solution | Run | Mean (us) | P95 (us) | Median (us) | Best single repeat mean (us) | Run-to-run CV | Mean ref (ms) | Mean speedup | Passed |"
    )
    add(
        "|----------|-----|----------:|---------:|------------:|-----------------------------:|--------------:|--------------:|-------------:|-------:|"
    )
    for run in r["runs"]:
        c = run["comparison"]
        label = f"{run['kind']} `{run['run_id']}`"
        for role in ("candidate", "baseline"):
            a = c[role]
            add(_md_arm_row(f"{role} `{a['name']}`", label, a, f"{a['passed']}/{a['rows']}"))
    add("")
    add("Paired deltas (candidate vs baseline, same run):")
    add("")
    for run in r["runs"]:
        c = run["comparison"]
        if c["geomean_ratio"] is None:
            continue
        b, k = c["baseline"], c["candidate"]
        mean_d = (
            (k["mean_latency_ms"] / b["mean_latency_ms"] - 1) * 100
            if b["mean_latency_ms"] and k["mean_latency_ms"]
            else None
        )
        p95_d = (
            (k["p95_latency_ms"] / b["p95_latency_ms"] - 1) * 100
            if b["p95_latency_ms"] and k["p95_latency_ms"]
            else None
        )
        iv_text = (
            "" if c["ci_low"] is None else f", interval [{c['ci_low']:.4f}, {c['ci_high']:.4f}]"
        )
        m_iv = c.get("mean_latency_interval")
        mean_iv = (
            f" [{signed_pct(m_iv[0] * 100)}, {signed_pct(m_iv[1] * 100)}]"
            if m_iv and None not in m_iv
            else ""
        )
        add(
            f"- {run['kind']} `{run['run_id']}`: **{signed_pct(mean_d)} mean latency**{mean_iv}, {signed_pct(p95_d)} p95 latency; "
            f"geomean ratio {c['geomean_ratio']:.4f}{iv_text}; {c['wins']} wins, {c['ties']} ties, {c['losses']} losses "
            f"-> {c['verdict']}"
        )
    add("")
    return lines


def _md_noise_floor(r: dict[str, Any]) -> list[str]:
    """tau, its source and the A/A history behind it."""
    lines: list[str] = []
    add = lines.append
    add("## Noise floor")
    add("")
    nf = r["noise_floor"]
    add(
        f"- tau = {nf['tau'] * 100:.2f}% in log latency: {nf['source']}; smallest gain worth having {nf['min_gain'] * 100:.2f}%."
    )
    if nf["aa_sessions"]:
        sigma = "-" if nf["aa_sigma"] is None else f"{nf['aa_sigma'] * 100:.2f}%"
        add(
            f"- A/A history: {nf['aa_sessions']} session(s), p99 |log G| {nf['aa_p99_abs_log_g'] * 100:.3f}%, noise of one "
            f"paired ratio {sigma}; {nf['aa_promotions']} of them would have been promoted."
        )
    else:
        add(
            "- A/A history: none (record one with `fibtui compare --aa RUN_A RUN_B` on two runs of the same code)."
        )
    if nf["pair_noise"]:
        add(
            f"- Noise of one paired ratio in the deciding run: {nf['pair_noise']['sigma'] * 100:.2f}% ({nf['pair_noise']['source']})."
        )
    add("")
    return lines


def _md_bands(r: dict[str, Any]) -> list[str]:
    """Per band: the means before and after, the ratio with its interval, wins/ties/losses."""
    comp = r["comparison"]
    lines: list[str] = []
    add = lines.append
    add("## Bands")
    add("")
    add(
        f"Bands from {r['band_source']}; per band: mean latency over its workloads before and after, change of those means, "
        f"geometric-mean ratio with its {comp['confidence']:.0%} interval, wins/ties/losses (tie band +-{comp['tie_band'] * 100:.1f}%)."
    )
    add("")
    add(
        "| Band | Workloads | Baseline mean (us) | Candidate mean (us) | Change | Geomean ratio | Interval | Wins/Ties/Losses |"
    )
    add(
        "|------|----------:|-------------------:|--------------------:|-------:|--------------:|---------:|-----------------:|"
    )
    for b in r["bands"]:
        add(
            f"| `{b['band']}` | {b['workloads']} | {us_text(b['base_mean_ms'])} | {us_text(b['cand_mean_ms'])} | "
            f"{signed_pct(b['change_pct'])} | {b['geomean_ratio']:.4f} | [{b['ci_low']:.4f}, {b['ci_high']:.4f}] | "
            f"{b['wins']}/{b['ties']}/{b['losses']} |"
        )
    add("")
    tie = comp["tie_band"]
    for b in r["bands"]:
        br = stats.BandResult(**b)
        word = band_word(br, tie)
        add(
            f"- `{b['band']}`: {word} ({signed_pct(b['change_pct'])}, `{us_text(b['base_mean_ms'])} -> {us_text(b['cand_mean_ms'])} us`), "
            f"with `{b['wins']}/{b['workloads']}` wins"
            + (" - dispatch candidate" if b["dispatch_candidate"] else "")
        )
    add("")
    return lines


def _md_representatives(r: dict[str, Any]) -> list[str]:
    """The representative workloads and why each was picked."""
    lines: list[str] = []
    add = lines.append
    add("## Representative workloads")
    add("")
    source = r.get("representatives_source")
    gate = r.get("gate_workloads") or []
    if source == "regimes of the deciding run's candidate latencies":
        add(
            f"Picked by the regime analysis of the deciding run's candidate latencies, as `fibtui regimes "
            f"--results optimize_ops/runs/{r['deciding_run']}/run.json --solution {r['candidate']['name']}` "
            "picks them (pins aside)."
        )
        add("")
    add("| UUID | Band | Baseline (us) | Candidate (us) | Ratio | In the gate | Why |")
    add("|------|------|--------------:|---------------:|------:|:-----------:|-----|")
    for rep in r["representatives"]:
        ratio_text = "-" if rep["ratio"] is None else f"{rep['ratio']:.4f}"
        in_gate = {True: "yes", False: "no"}.get(rep.get("in_gate"), "-")
        add(
            f"| `{rep['uuid']}` | `{rep['band']}` | {us_text(rep['base_ms'])} | {us_text(rep['cand_ms'])} | {ratio_text} | "
            f"{in_gate} | {rep['reason']} |"
        )
    add("")
    picked = {rep["uuid"] for rep in r["representatives"]}
    others = [u for u in gate if u not in picked]
    if others:
        add(
            "The representative gate also ran "
            + ", ".join(f"`{u}`" for u in others)
            + ": the representatives "
            "when it started, chosen from the latencies known then."
        )
        add("")
    return lines


def _md_shape_matrix(r: dict[str, Any]) -> list[str]:
    """Band -> workload -> dominant kernel (bottleneck and limiter need an NCU report)."""
    lines: list[str] = []
    add = lines.append
    add("## Shape matrix")
    add("")
    add("| Band | Workload | Dominant kernel | Bottleneck | Limiter |")
    add("|------|----------|-----------------|------------|---------|")
    for m in r["shape_matrix"]:
        add(
            f"| `{m['band']}` | `{m['uuid'] or '-'}` | {('`' + m['dominant_kernel'] + '`') if m['dominant_kernel'] else '-'} | "
            f"{m['bottleneck'] or 'not profiled'} | {m['limiter'] or 'not profiled'} |"
        )
    add("")
    add(
        "Kernel names come from the timing records; bottleneck and limiter need an NCU report of the band "
        "(`fibtui ncu profile`)."
    )
    add("")
    return lines


def _md_findings(r: dict[str, Any]) -> list[str]:
    """The findings, one bullet each."""
    lines: list[str] = []
    add = lines.append
    add("## Findings")
    add("")
    for f in r["findings"]:
        add(f"- {f}")
    add("")
    return lines


def _md_decision(r: dict[str, Any]) -> list[str]:
    """The decision, its reason, notes, warnings, the archived paths, and where the text comes from."""
    cand = r["candidate"]
    lines: list[str] = []
    add = lines.append
    add("## Decision")
    add("")
    d = r["decision"]
    add(f"**{d['decision'].capitalize()}** `{cand['name']}` (verdict {d['verdict']}).")
    add("")
    if d["reason"]:
        add(f"Reason: {d['reason']}")
        add("")
    for note in r["notes"]:
        add(f"- {note}")
    for w in r["warnings"]:
        add(f"- Warning: {w}")
    if r["artifacts"]:
        if r["notes"] or r["warnings"]:
            add("")
        add("Archived (paths under `optimize_ops/`):")
        add("")
        for a in r["artifacts"]:
            add(f"- `{a}`")
    add("")
    add(
        "Generated by fibtui from the run records and the round record; regenerate with `fibtui round summary`."
    )
    return lines


_SECTIONS = (
    _md_heading,
    _md_candidate,
    _md_verdict,
    _md_results,
    _md_noise_floor,
    _md_bands,
    _md_representatives,
    _md_shape_matrix,
    _md_findings,
    _md_decision,
)


def render_round(
    archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None
) -> tuple[str, dict[str, Any]]:
    report = build_round_report(archive_root, rec, definition_obj, workloads)
    return round_summary_markdown(report), report


def write_round_summary(
    archive_root: Path, rec: RoundRecord, definition_obj: Any = None, workloads: Any = None
) -> list[Path]:
    """(Re)generate ``docs/round_<date>_<topic>.md`` and its ``.json`` twin from the records."""
    md, report = render_round(archive_root, rec, definition_obj, workloads)
    md_path = archive_root / rec.summary
    json_path = md_path.with_suffix(".json")
    atomic_write_text(md_path, md)
    atomic_write_text(json_path, json.dumps(report, indent=1, sort_keys=False) + "\n")
    return [md_path, json_path]
