"""Decisions (``promote``, ``reject``, ``archive_only``): archive first, then act, then append a
round record and regenerate the round summary. See :mod:`fibtui.services.archive` for what restoring
on reject does."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fibtui.core import stats
from fibtui.core.archive.layout import best_folder, check_candidate_id, rel_path, safe_name
from fibtui.core.archive.markdown import render_round, write_round_summary
from fibtui.core.archive.report import band_map, compare_run, freeze_floor
from fibtui.core.archive.rounds import RoundRecord, append_round, load_rounds
from fibtui.core.archive.run_data import RunData, pair_key, round_runs, run_kind
from fibtui.core.errors import CheckFailed
from fibtui.core.fsio import make_dirs, reserve_unique_path
from fibtui.services.archive.best import write_best
from fibtui.services.archive.checked_in import (
    RestoreResult,
    mirror_sources,
    restore_kernel,
    same_files,
    set_config_value,
)
from fibtui.services.archive.store import archive_snapshot, archive_sources
from fibtui.services.archive.vcs import commit_paths, differs_from_head


@dataclass
class DecisionResult:
    record: RoundRecord
    comparison: stats.Comparison | None
    written: list[Path]
    warnings: list[str]
    commit: str | None = None
    restored: RestoreResult | None = None

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        return {
            "round": self.record.round,
            "decision": self.record.decision,
            "verdict": self.record.verdict,
            "summary": self.record.summary,
            "written": [(rel_path(root, p) if root else str(p)) for p in self.written],
            "warnings": list(self.warnings),
            "commit": self.commit,
            "restored": asdict(self.restored) if self.restored else None,
            "comparison": self.comparison.to_json() if self.comparison else None,
        }


@dataclass
class RoundInputs:
    """What a decision works from: the round's runs, its baseline and candidate, the verdict."""

    archive_root: Path
    runs: list[RunData]
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    deciding: RunData
    deciding_kind: str
    comparison: stats.Comparison
    floor: stats.NoiseFloor
    settings: stats.StatsSettings
    date: str
    total_workloads: int | None


def _ref_of(run: RunData, role: str, name: str | None = None) -> dict[str, Any]:
    sols = [s for s in run.solutions(role) if name is None or s.get("name") == name]
    s = sols[0]
    return {k: s.get(k, "") for k in ("name", "source_hash", "language", "entry_point", "snapshot")}


def gather_round(
    archive_root: Path,
    *,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    settings: stats.StatsSettings | None = None,
    definition_obj: Any = None,
    workloads: Any = None,
    candidate_hash: str | None = None,
) -> RoundInputs:
    runs = round_runs(archive_root, run_ids, candidate, candidate_hash)
    total = len(workloads) if workloads is not None else None
    first = runs[-1]
    base = _ref_of(first, "baseline")
    cand = _ref_of(first, "candidate", candidate or pair_key(first, None, candidate_hash)[2])  # type: ignore[index]
    sweeps = [r for r in runs if run_kind(r, total) == "sweep"]
    deciding = sweeps[-1] if sweeps else runs[-1]
    settings = settings or stats.StatsSettings()
    # the A/A sessions of the deciding run's own key: (definition, device, timing kind)
    kind = str(deciding.record.get("timing_kind") or "")
    definition = deciding.record.get("definition")
    definition = definition if isinstance(definition, str) else None
    sessions = stats.aa_sessions(
        archive_root,
        deciding.gpu,
        exclude_runs=[r.run_id for r in runs],
        definition=definition,
        timing_kind=kind or None,
    )
    floor = stats.noise_floor(
        settings,
        sessions,
        stats.aa_key_label(definition, stats.TimingKey(kind or "unknown", deciding.gpu)),
    )
    band_of, _, _ = band_map(definition_obj, workloads, deciding.rows("baseline", base["name"]))
    comp = compare_run(deciding, base, cand, band_of, settings, floor, total)
    started = sorted(str(r.record.get("started") or "") for r in runs)
    date = (started[0][:10] if started and started[0] else "") or "undated"
    return RoundInputs(
        archive_root,
        runs,
        base,
        cand,
        deciding,
        run_kind(deciding, total),
        comp,
        floor,
        settings,
        date,
        total,
    )


def _new_record(inputs: RoundInputs, decision: str, topic: str | None, reason: str) -> RoundRecord:
    topic = safe_name(topic or inputs.candidate["name"], "round")
    name = f"{inputs.date}_{topic}"
    run_list = [
        {"run_id": r.run_id, "kind": run_kind(r, inputs.total_workloads)} for r in inputs.runs
    ]
    existing = {r.round: r for r in load_rounds(inputs.archive_root)}
    summary = ""
    if name in existing and [x["run_id"] for x in existing[name].runs] == [
        x["run_id"] for x in run_list
    ]:
        summary = existing[name].summary  # the same round decided again: same summary file
    else:
        n = 1
        base = name
        while name in existing:
            n += 1
            name = f"{base}_run{n}"
        path = reserve_unique_path(inputs.archive_root / "docs" / f"round_{name}.md")
        summary = rel_path(inputs.archive_root, path)
        name = path.name[len("round_") : -len(".md")]
    return RoundRecord(
        round=name,
        date=inputs.date,
        topic=topic,
        definition=str(inputs.deciding.record.get("definition", "")),
        baseline={k: v for k, v in inputs.baseline.items() if k != "snapshot"},
        candidate={k: v for k, v in inputs.candidate.items() if k != "snapshot"},
        runs=run_list,
        decision=decision,
        reason=reason,
        summary=summary,
        noise_floor=freeze_floor(inputs.floor),
        settings={k: v for k, v in asdict(inputs.settings).items()},
        verdict=inputs.comparison.verdict,
    )


def _finish(
    inputs: RoundInputs,
    rec: RoundRecord,
    written: list[Path],
    warnings: list[str],
    definition_obj: Any,
    workloads: Any,
) -> list[Path]:
    inside = [p for p in written if p.resolve().is_relative_to(inputs.archive_root.resolve())]
    rec.artifacts = sorted(
        {*rec.artifacts, *(rel_path(inputs.archive_root.resolve(), p.resolve()) for p in inside)}
    )
    rec.warnings = list(dict.fromkeys([*rec.warnings, *warnings]))
    append_round(inputs.archive_root, rec)
    return write_round_summary(inputs.archive_root, rec, definition_obj, workloads)


def _folders_first(archive_root: Path, *subdirs: str) -> None:
    """Make the folders a decision writes into after it has archived the candidate, before it
    archives anything: a folder that cannot be made (a file in its place, no permission, a
    read-only disk) then fails the decision with one line and nothing archived."""
    for sub in subdirs:
        make_dirs(archive_root / sub)


def _archive_candidate(
    inputs: RoundInputs, *, isolated: bool = False, decision: str
) -> tuple[Path, list[str]]:
    warnings = check_candidate_id(inputs.candidate["name"])
    snapshot = inputs.deciding.folder / inputs.candidate["snapshot"]
    meta = {
        "source_hash": inputs.candidate.get("source_hash"),
        "language": inputs.candidate.get("language"),
        "entry_point": inputs.candidate.get("entry_point"),
        "from_run": inputs.deciding.run_id,
        "snapshot": inputs.candidate["snapshot"],
        "decision": decision,
        "verdict": inputs.comparison.verdict,
        "geomean_ratio": inputs.comparison.geomean_ratio,
        "mean_latency_change": (
            inputs.comparison.mean_latency.change if inputs.comparison.mean_latency else None
        ),
    }
    return archive_snapshot(
        inputs.archive_root, snapshot, inputs.candidate["name"], isolated=isolated, meta=meta
    ), warnings


def promote(
    inputs: RoundInputs,
    *,
    workspace_root: Path | None = None,
    source_dir: Path | None = None,
    config_path: Path | None = None,
    topic: str | None = None,
    force: bool = False,
    new_name: str | None = None,
    operator: str | None = None,
    model: str | None = None,
    commit: bool = True,
    definition_obj: Any = None,
    workloads: Any = None,
    notes: list[str] | None = None,
) -> DecisionResult:
    """Promote the round's candidate: archive its snapshot, write the best snapshot, install it as
    the checked-in kernel, rename the solution in config.toml, record the round, regenerate the
    summary, commit. Refused (CheckFailed) unless the verdict is PROMOTE on a full sweep."""
    comp = inputs.comparison
    if not force:
        if inputs.deciding_kind != "sweep":
            raise CheckFailed(
                f"promotion needs the full set of workloads: the newest run of this pair, {inputs.deciding.run_id}, "
                f"is a {inputs.deciding_kind} (run fibtui run --workloads all --repeats 3 with the same "
                "baseline and candidate, or pass --force)"
            )
        if comp.verdict != stats.PROMOTE:
            raise CheckFailed(
                f"verdict is {comp.verdict}, not PROMOTE: {comp.recommendation()} (pass --force to promote anyway)"
            )
    written: list[Path] = []
    language = inputs.candidate.get("language") or "triton"
    _folders_first(inputs.archive_root, "docs", best_folder(inputs.archive_root, language).name)
    snap, warnings = _archive_candidate(inputs, decision="promoted")
    written.append(snap)
    latency_ms = comp.candidate.mean_latency_ms
    entry_file = (inputs.candidate.get("entry_point") or "kernel.py::").split("::", 1)[
        0
    ] or "kernel.py"
    if latency_ms is not None:
        written += write_best(
            inputs.archive_root,
            inputs.deciding.folder / inputs.candidate["snapshot"],
            language=language,
            entry_file=entry_file,
            operator=operator or inputs.deciding.record.get("definition", "operator"),
            model=model or inputs.candidate["name"],
            latency_us=latency_ms * 1000.0,
            meta={
                "candidate": inputs.candidate["name"],
                "source_hash": inputs.candidate.get("source_hash"),
                "from_run": inputs.deciding.run_id,
                "mean_latency_ms": latency_ms,
                "p95_latency_ms": comp.candidate.p95_latency_ms,
            },
        )
    rec = _new_record(inputs, "promoted", topic, reason=_verdict_reason(comp))
    rec.notes = list(notes or [])
    changed_ws: list[Path] = []
    if source_dir is not None and workspace_root is not None and source_dir.is_dir():
        cand_sources = inputs.deciding.folder / inputs.candidate["snapshot"] / "sources"
        if differs_from_head(workspace_root, source_dir) and not same_files(
            source_dir, cand_sources
        ):
            kept = archive_sources(
                inputs.archive_root,
                source_dir,
                f"{safe_name(inputs.candidate['name'])}_replaced_workspace",
                isolated=True,
                meta={"what": "the workspace's kernel with uncommitted edits, replaced by promote"},
            )
            written.append(kept)
            rec.notes.append(
                "the workspace's kernel had uncommitted edits; they were archived before the promoted kernel replaced them"
            )
    if source_dir is not None:
        mirror_sources(
            inputs.deciding.folder / inputs.candidate["snapshot"] / "sources", source_dir
        )
        changed_ws.append(source_dir)
        rec.notes.append(f"installed as the checked-in kernel ({source_dir.name}/ under solution/)")
    if config_path is not None:
        name = new_name or f"{rec.definition}_{inputs.candidate['name']}"
        set_config_value(config_path, "solution.name", name)
        changed_ws.append(config_path)
        rec.notes.append(f"config.toml [solution] name = {name!r}")
    paths = _finish(inputs, rec, written, warnings, definition_obj, workloads)
    written += paths
    sha = None
    if commit and workspace_root is not None:
        sha = commit_paths(
            workspace_root,
            [*changed_ws, inputs.archive_root],
            f"fibtui promote {inputs.candidate['name']} ({rec.reason})",
        )
    return DecisionResult(rec, comp, written + changed_ws, rec.warnings, sha)


def _verdict_reason(comp: stats.Comparison) -> str:
    if comp.geomean_ratio is None:
        return f"verdict {comp.verdict}"
    iv = f", interval [{comp.interval.low:.4f}, {comp.interval.high:.4f}]" if comp.interval else ""
    forced = "" if comp.verdict == stats.PROMOTE else " (promoted with --force)"
    m = comp.mean_latency
    mean = (
        f"mean latency {m.change * 100:+.2f}% [{m.low * 100:+.2f}%, {m.high * 100:+.2f}%], "
        if m is not None
        else ""
    )
    return (
        f"{comp.verdict}: {mean}geomean latency ratio {comp.geomean_ratio:.4f}{iv}, noise floor "
        f"{comp.tau.tau * 100:.2f}%{forced}"
    )


def archive_only(
    inputs: RoundInputs,
    *,
    topic: str | None = None,
    reason: str | None = None,
    definition_obj: Any = None,
    workloads: Any = None,
    notes: list[str] | None = None,
) -> DecisionResult:
    """Keep the candidate (a local win, a dispatch candidate) without promoting it."""
    comp = inputs.comparison
    _folders_first(inputs.archive_root, "docs")
    snap, warnings = _archive_candidate(inputs, decision="archived")
    default_reason = comp.recommendation()
    rec = _new_record(inputs, "archived", topic, reason or default_reason)
    rec.notes = list(notes or [])
    written = [snap] + _finish(inputs, rec, [snap], warnings, definition_obj, workloads)
    return DecisionResult(rec, comp, written, rec.warnings)


def reject(
    inputs: RoundInputs | None,
    *,
    workspace_root: Path,
    source_dir: Path,
    archive_root: Path,
    language: str,
    candidate_name: str | None = None,
    topic: str | None = None,
    reason: str | None = None,
    definition_obj: Any = None,
    workloads: Any = None,
) -> DecisionResult:
    """Reject: archive the rejected candidate (its run snapshot, and the workspace's edited kernel
    when it differs from the last commit), then restore the checked-in kernel (module docstring)."""
    written: list[Path] = []
    warnings: list[str] = []
    name = candidate_name or (inputs.candidate["name"] if inputs else None) or "rejected"
    if inputs is not None:
        _folders_first(archive_root, "docs")
        snap, warnings = _archive_candidate(inputs, decision="rejected")
        written.append(snap)
    if source_dir.is_dir() and differs_from_head(workspace_root, source_dir):
        written.append(
            archive_sources(
                archive_root,
                source_dir,
                f"{safe_name(name)}_workspace",
                isolated=True,
                meta={
                    "decision": "rejected",
                    "what": "the workspace's kernel as it was before the restore",
                },
            )
        )
    restored = restore_kernel(
        workspace_root, source_dir, archive_root=archive_root, language=language
    )
    rec = None
    if inputs is not None:
        rec = _new_record(inputs, "rejected", topic, reason or inputs.comparison.recommendation())
        rec.notes = [f"checked-in kernel restored from {restored.source}"]
        written += _finish(inputs, rec, written, warnings, definition_obj, workloads)
    else:
        rec = RoundRecord(
            round="",
            date="",
            topic=topic or "",
            definition="",
            baseline={},
            candidate={"name": name},
            runs=[],
            decision="rejected",
            reason=reason or "",
            notes=[f"restored from {restored.source}"],
        )
    return DecisionResult(
        rec, inputs.comparison if inputs else None, written, warnings, None, restored
    )


def summary_for_runs(
    archive_root: Path,
    run_ids: list[str] | None,
    candidate: str | None = None,
    settings: stats.StatsSettings | None = None,
    definition_obj: Any = None,
    workloads: Any = None,
) -> tuple[str, dict[str, Any]]:
    """A summary of runs that have no decision yet (printed; nothing written)."""
    inputs = gather_round(
        archive_root,
        run_ids=run_ids,
        candidate=candidate,
        settings=settings,
        definition_obj=definition_obj,
        workloads=workloads,
    )
    topic = safe_name(inputs.candidate["name"], "round")
    rec = RoundRecord(
        round=f"{inputs.date}_{topic}",
        date=inputs.date,
        topic=topic,
        definition=str(inputs.deciding.record.get("definition", "")),
        baseline={k: v for k, v in inputs.baseline.items() if k != "snapshot"},
        candidate={k: v for k, v in inputs.candidate.items() if k != "snapshot"},
        runs=[
            {"run_id": r.run_id, "kind": run_kind(r, inputs.total_workloads)} for r in inputs.runs
        ],
        decision="undecided",
        summary=f"docs/round_{inputs.date}_{topic}.md",
        noise_floor=freeze_floor(inputs.floor),
        settings=asdict(inputs.settings),
        verdict=inputs.comparison.verdict,
    )
    return render_round(archive_root, rec, definition_obj, workloads)
