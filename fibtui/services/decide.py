"""The decisions of a round as workspace-level services, shared by the CLI verbs (compare,
promote, reject, archive) and the TUI's Promotion pane: which runs make the round, the verdict,
and what promoting, rejecting or archiving writes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

from fibtui.core import measures, stats
from fibtui.core.errors import FibError, InputError, UsageError
from fibtui.core.settings import get_setting
from fibtui.core.workspace import SolutionConfig, Workspace

if TYPE_CHECKING:
    from fibtui.core.dataset import Dataset, Definition, WorkloadSet
    from fibtui.core.results import AxesLookup
    from fibtui.core.runs import RunRecord
    from fibtui.services import archive


def dataset_for(
    ws: Workspace, definition: str | None, ds: Dataset | None = None
) -> tuple[Definition, WorkloadSet] | tuple[None, None]:
    """(Definition, WorkloadSet) of ``definition`` from the workspace's dataset (``ds``: the one
    already open), or (None, None)."""
    if ws.dataset_root is None or not definition:
        return None, None
    try:
        ds = ds or ws.dataset()
        if definition not in ds.definition_paths:
            return None, None
        return ds.definition(definition), ds.workloads(definition)
    except (InputError, UsageError):
        return None, None


def axes_lookup(ws: Workspace | None, ds: Dataset | None = None) -> AxesLookup | None:
    """uuid -> axes from the workspace's dataset (``ds``: the one already open), for result
    files that carry no axes."""
    if ws is None or ws.dataset_root is None:
        return None
    ds = ds or ws.dataset()

    def lookup(definition: str, uuid: str) -> dict[str, int] | None:
        if definition not in ds.definition_paths:
            return None
        try:
            workloads = ds.workloads(definition)
        except InputError:
            return None
        return workloads.axes_of(uuid) if uuid in workloads else None

    return lookup


def band_map(
    ws: Workspace | None, definition: str | None, rows: Sequence[Any], ds: Dataset | None = None
) -> tuple[dict[str, str] | None, int | None]:
    """(uuid -> band, workload count) from the workspace's regimes, or (None, None)."""
    from fibtui.core import regimes

    if ws is None:
        return None, None
    d, workloads = dataset_for(ws, definition, ds)
    if d is None or workloads is None:
        return None, None
    try:
        report = regimes.analyze(d, workloads, rows)
    except InputError:
        return None, None
    if not any(r.uuid in workloads for r in rows):
        return None, None
    return dict(report.table.select("uuid", "band").iter_rows()), len(workloads)


def band_shares(
    ws: Workspace | None, definition: str | None, ds: Dataset | None = None
) -> tuple[dict[str, float] | None, str | None]:
    """(band -> its share of the definition's latency, where the latency came from) from the
    regime analysis of the newest GPU run that covered every workload (what ``fibtui regimes``
    shows), or (None, None) when there is none: a gate's own rows say nothing about the shares."""
    from fibtui.core import regimes
    from fibtui.core.runs import candidate_rows, newest_covering

    d, workloads = dataset_for(ws, definition, ds) if ws is not None else (None, None)
    if ws is None or d is None or workloads is None:
        return None, None
    covering = newest_covering(ws.archive_root, d.name, len(workloads))
    if covering is None:
        return None, None
    # a gate analysed these rows before its jobs (core.plan.workspace_regimes): not again
    seen = regimes.shares_seen(regimes.shares_key(d, workloads, covering.path / "run.json"))
    if seen is not None:
        shares, label = seen
        if shares is None:
            return None, None
        return shares, f"latency shares from the regime analysis of {label}"
    found = candidate_rows(covering)  # that run's rows, without listing the runs again
    if found is None or len({r.uuid for r in found[0]}) < len(workloads):
        return None, None
    try:
        report = regimes.analyze(d, workloads, found[0])
    except InputError:
        return None, None
    if not report.has_latency:
        return None, None
    shares = {b.name: b.latency_share for b in report.bands if b.latency_share is not None}
    return shares, f"latency shares from the regime analysis of {found[1]}"


def look_of(source: stats.Source) -> stats.Look | None:
    """An adaptive run's look: the most paired repeats any workload got, under its plan."""
    from fibtui.core.sequential import SequentialPlan

    if not source.adaptive:
        return None
    try:
        plan = SequentialPlan.from_json(source.adaptive)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            source.path, f"bad adaptive plan: {exc}", field="settings.adaptive"
        ) from None
    repeats: dict[str, set[int]] = {}
    for r in source.table.rows:
        if r.repeat is not None:
            repeats.setdefault(r.uuid, set()).add(r.repeat)
    return plan.look(max((len(v) for v in repeats.values()), default=1))


#: how many of the newest runs the named score baseline is looked for in
SCORE_BASELINE_RUNS = 200


def score_baseline_name(ws: Workspace | None) -> str | None:
    """``[score] baseline`` of fibtui.toml: the solution a second projected score is measured
    against (e.g. a FlashInfer wrapper), or None."""
    from fibtui.core.settings import settings_path

    if ws is None:
        return None
    name = get_setting(ws.root, "score.baseline")
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise InputError(
            settings_path(ws.root),
            f"expected a solution name, got {name!r}",
            field="score.baseline",
        )
    return name.strip()


def _passed_latencies(rows: Sequence[Any], name: str) -> dict[str, float]:
    """uuid -> the mean latency of ``name``'s PASSED rows."""
    from fibtui.core.status import PASSED

    got: dict[str, list[float]] = {}
    for r in rows:
        lat = r.latency_ms
        if r.solution == name and r.status == PASSED and isinstance(lat, (int, float)) and lat > 0:
            got.setdefault(r.uuid, []).append(float(lat))
    return {u: sum(v) / len(v) for u, v in got.items()}


def _journal_names(path: Any) -> set[str]:
    """The solution names of a run's journal header (its first line only)."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            header = json.loads(fh.readline())
    except (OSError, ValueError):
        return set()
    sols = header.get("solutions") if isinstance(header, dict) else None
    return {str(s.get("name")) for s in sols or [] if isinstance(s, dict)}


def score_numerators(
    ws: Workspace | None, sources: Sequence[stats.Source], key: stats.TimingKey
) -> list[measures.Numerators]:
    """The named baseline's latencies for the second projected score (``[score] baseline``):
    from the compared files when they hold that solution, else from the newest run of the same
    definition, timing kind and GPU that does (docs/measurement.md, "The projected score")."""
    from fibtui.core.results import load_results
    from fibtui.core.runs import list_runs

    name = score_baseline_name(ws)
    if name is None or ws is None:
        return []
    denominator = f"solution {name}"
    for src in sources:
        found = _passed_latencies(src.table.rows, name)
        if found:
            return [measures.Numerators(denominator, found)]
    definition = next((s.table.definition for s in sources if s.table.definition), None)
    listings = [x for x in reversed(list_runs(ws.archive_root)) if x.definition == definition]
    for listing in listings[:SCORE_BASELINE_RUNS]:
        facts = listing.record
        if facts is None or facts.timing_kind != key.kind or listing.passed == 0:
            continue
        if name not in _journal_names(listing.path / "journal.jsonl"):
            continue
        try:
            table = load_results(listing.path / "run.json")
        except InputError:
            continue
        gpu = (table.meta.get("environment") or {}).get("gpu")
        if key.device and gpu and gpu != key.device:
            continue
        found = _passed_latencies(table.rows, name)
        if found:
            note = (
                f"{name}'s latencies are from run {listing.run_id}, not paired with this one: the "
                "interval leaves out that run's noise"
            )
            return [measures.Numerators(denominator, found, note)]
    return []


def compare(
    ws: Workspace | None,
    base_spec: str,
    cand_spec: str | None = None,
    *,
    solution_base: str | None = None,
    solution_cand: str | None = None,
    timing: str = "fibtui",
    allow_definitions: bool = False,
) -> stats.CompareOutcome:
    """``timing``: ``fibtui`` decides on fibtui's own latencies (and, when the runs were timed
    with ``--timing official`` too, sets the official-equivalent comparison beside it);
    ``official`` decides on the official-equivalent latencies. Two files of different
    definitions are refused (:func:`check_same_definition`) unless ``allow_definitions``."""
    if timing not in ("fibtui", "official"):
        raise UsageError(f"--timing is fibtui or official, not {timing!r}")
    archive_root = ws.archive_root if ws is not None else None
    # the dataset is read once for the whole comparison
    ds = ws.dataset() if ws is not None and ws.dataset_root is not None else None
    lookup = axes_lookup(ws, ds)
    base = stats.load_source(base_spec, archive_root, lookup)
    cand = stats.load_source(cand_spec, archive_root, lookup) if cand_spec else None
    if cand is not None and not allow_definitions:
        check_same_definition(base, cand)
    return compare_loaded(
        ws,
        base,
        cand,
        solution_base=solution_base,
        solution_cand=solution_cand,
        timing=timing,
        ds=ds,
    )


def compare_loaded(
    ws: Workspace | None,
    base: stats.Source,
    cand: stats.Source | None = None,
    *,
    solution_base: str | None = None,
    solution_cand: str | None = None,
    timing: str = "fibtui",
    ds: Dataset | None = None,
) -> stats.CompareOutcome:
    """:func:`compare` of sources already read (``ds``: the workspace's dataset, when read)."""
    archive_root = ws.archive_root if ws is not None else None
    if ds is None and ws is not None and ws.dataset_root is not None:
        ds = ws.dataset()
    settings = stats.StatsSettings.from_workspace(ws.root if ws is not None else None)
    definition = base.table.definition or (cand.table.definition if cand else None)
    band_of, total = band_map(ws, definition, base.table.rows, ds)
    # a sample names each band's share of the latency (the full set holds it all)
    sample = total is None or len({r.uuid for r in base.table.rows}) < total
    shares, share_source = band_shares(ws, definition, ds) if sample else (None, None)
    look = look_of(base) if cand is None or cand.path == base.path else None

    def decide(b: stats.Source, c: stats.Source | None) -> stats.CompareOutcome:
        sources = [b] + ([c] if c is not None else [])
        numerators = score_numerators(ws, sources, stats.timing_key_of_source(b))
        return stats.compare_sources(
            b,
            c,
            solution_base=solution_base,
            solution_cand=solution_cand,
            settings=settings,
            archive_root=archive_root,
            band_of=band_of,
            total_workloads=total,
            band_shares=shares,
            share_source=share_source,
            look=look,
            score_numerators=numerators,
            floors_ms=floors_for(ws, definition, ds, stats.timing_key_of_source(b)),
        )

    official = (
        (stats.official_view(base), stats.official_view(cand) if cand else None)
        if (timing == "official" or (base.official and (cand is None or cand.official)))
        else None
    )
    if timing == "official":
        assert official is not None
        return decide(*official)
    outcome = decide(base, cand)
    if official is not None:
        outcome.official = decide(*official)
    return outcome


def definitions_of(source: stats.Source) -> set[str]:
    """The definitions a compared file holds: its own, else those its rows name."""
    if source.table.definition:
        return {source.table.definition}
    return {r.definition for r in source.table.rows if r.definition}


def check_same_definition(base: stats.Source, cand: stats.Source) -> None:
    """Refuse (one line, exit 2) two files whose definitions differ: workload ids shared by two
    definitions are not the same workloads, and a verdict on them would mean nothing. A file
    that names no definition is not refused."""
    b, c = definitions_of(base), definitions_of(cand)
    if b and c and b != c:
        raise UsageError(
            f"{base.label} is of definition {', '.join(sorted(b))} but {cand.label} is of "
            f"{', '.join(sorted(c))}: compare files of one definition "
            "(--allow-definitions compares them all the same)"
        )


def floors_for(
    ws: Workspace | None, definition: str | None, ds: Any, key: stats.TimingKey | None
) -> dict[str, float] | None:
    """uuid -> the workload's roofline floor (ms) on the device the rows were timed on, from its
    datasheet figures (or the workspace's own, fibtui.toml [devices]); None when the device or
    the dataset is not known here (no physics check then)."""
    if ws is None or ds is None or definition is None or key is None or not key.device:
        return None
    if key.kind == stats.CPU_INTERPRETER:
        return None
    from fibtui.core import roofline

    try:
        device = roofline.get_device(key.device, ws.root)
        d = ds.definition(definition)
        frame, _ = roofline.floor_frame(d, ds.workloads(definition), device)
    except FibError:
        return None
    return {
        str(u): float(f) / 1000.0
        for u, f in zip(frame["uuid"].to_list(), frame["floor_us"].to_list(), strict=True)
        if f is not None and f > 0
    }


def run_verdict(ws: Workspace, record: RunRecord) -> stats.CompareOutcome | None:
    """The verdict of a finished paired run (``fibtui compare RUN_ID``), or None: no baseline,
    nothing finished, still running, or no comparison can be made (the run itself still stands).
    What ``fibtui run`` prints at its end and the Runs pane shows under a run."""
    roles = {s.role for s in record.solutions}
    if not {"baseline", "candidate"} <= roles or not record.summary.done:
        return None
    if record.state == "running":
        return None
    from fibtui.core.runs import run_dir

    try:
        # the record in memory is the run's: nothing of it is read again from run.json
        ds = ws.dataset() if ws.dataset_root is not None else None
        path = run_dir(ws.archive_root, record.run_id) / "run.json"
        base = stats.source_of_record(record.run_id, path, record.to_json(), axes_lookup(ws, ds))
        return compare_loaded(ws, base, ds=ds)
    except FibError:
        return None


def adaptive_rule(ws: Workspace, header: Any) -> Any:
    """The sequential rule of an adaptive run (``fibtui run --adaptive``): its plan from the run
    header, the noise floor of the rows' timing key from the workspace's A/A history (the run
    itself left out), bands from the regime analysis, and the scope (full when the run holds
    every workload of the definition)."""
    from fibtui.core.sequential import AdaptiveRule, SequentialPlan

    plan = SequentialPlan.from_json(header.settings["adaptive"])
    settings = stats.StatsSettings.from_workspace(ws.root)
    d, workloads = dataset_for(ws, header.definition)
    uuids = {j.uuid for j in header.jobs}
    scope = "full" if workloads is not None and len(uuids) >= len(workloads) else "sample"
    floors: dict[Any, stats.NoiseFloor] = {}

    def floor_for(key: stats.TimingKey | None) -> stats.NoiseFloor:
        if key is None or key.kind == stats.CPU_INTERPRETER:
            return stats.noise_floor(settings)
        if key not in floors:
            sessions = stats.aa_sessions(
                ws.archive_root,
                key.device,
                exclude_runs=[header.run_id],
                definition=header.definition,
                timing_kind=key.kind,
            )
            floors[key] = stats.noise_floor(
                settings, sessions, stats.aa_key_label(header.definition, key)
            )
        return floors[key]

    def bands_for(rows: Any) -> dict[str, str] | None:
        return band_map(ws, header.definition, rows)[0]

    timing = None
    if os.environ.get("FIBTUI_TEST_JUDGE_INTERPRETER") == "1":
        # test-only: the rule judges CPU-interpreter wall times as if they were a GPU's, so the
        # scheduling can be exercised on a CPU (nothing else reads them so: compare still says
        # NO_SPEED_VERDICT)
        timing = (stats.TimingKey("test-judged-interpreter"),) * 2
    return AdaptiveRule(plan, scope, settings, floor_for, bands_for, timing)


@dataclass
class Gathered:
    inputs: Any  # archive.RoundInputs
    definition: Any
    workloads: Any


@overload
def gather(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    required: Literal[True] = True,
    candidate_hash: str | None = None,
) -> Gathered: ...


@overload
def gather(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    required: bool,
    candidate_hash: str | None = None,
) -> Gathered | None: ...


def gather(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    required: bool = True,
    candidate_hash: str | None = None,
) -> Gathered | None:
    from fibtui.core.archive import round_runs
    from fibtui.services import archive  # only for rounds: a verdict does without it

    settings = stats.StatsSettings.from_workspace(ws.root)
    root = ws.archive_root
    try:
        runs = round_runs(root, run_ids or None, candidate, candidate_hash)
    except UsageError:
        if required:
            raise
        return None
    definition = runs[-1].record.get("definition")
    d, workloads = dataset_for(ws, definition)
    inputs = archive.gather_round(
        root,
        run_ids=[r.run_id for r in runs],
        candidate=candidate,
        settings=settings,
        definition_obj=d,
        workloads=workloads,
        candidate_hash=candidate_hash,
    )
    return Gathered(inputs, d, workloads)


def config_for(ws: Workspace, definition: str) -> SolutionConfig:
    try:
        return ws.config_for(definition)
    except UsageError:
        return ws.config_for(None)


def promote(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    topic: str | None = None,
    force: bool = False,
    new_name: str | None = None,
    commit: bool = True,
) -> archive.DecisionResult:
    from fibtui.services import archive  # only for rounds: a verdict does without it

    g = gather(ws, run_ids, candidate)
    cfg = config_for(ws, g.inputs.deciding.record.get("definition", ""))
    lang = g.inputs.candidate.get("language") or cfg.language
    if lang != cfg.language:
        raise UsageError(
            f"the candidate is {lang} but {cfg.path} builds {cfg.language}: change [build] language first"
        )
    return archive.promote(
        g.inputs,
        workspace_root=ws.root,
        source_dir=cfg.source_dir,
        config_path=cfg.path,
        topic=topic,
        force=force,
        new_name=new_name,
        operator=get_setting(ws.root, "archive.operator"),
        model=get_setting(ws.root, "archive.model"),
        commit=commit,
        definition_obj=g.definition,
        workloads=g.workloads,
    )


def _workspace_hash(cfg: SolutionConfig) -> str | None:
    from fibtui.core.plan import solution_from_config

    try:
        return solution_from_config(cfg).source_hash
    except InputError:
        return None


def reject(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    topic: str | None = None,
    reason: str | None = None,
) -> archive.DecisionResult:
    """Archive the rejected candidate first, then restore the checked-in kernel."""
    from fibtui.core.archive import decided_round
    from fibtui.services import archive  # only for rounds: a verdict does without it

    cfg = ws.config_for(None)
    g: Gathered | None
    if run_ids:
        g = gather(ws, run_ids, candidate)
        cfg = config_for(ws, g.inputs.deciding.record.get("definition", ""))
    elif archive.differs_from_head(ws.root, cfg.source_dir):
        # the candidate is the workspace's edited kernel: its round is the runs of those exact sources
        h = _workspace_hash(cfg)
        g = gather(ws, None, candidate, required=False, candidate_hash=h) if h else None
    else:
        g = gather(ws, None, candidate, required=False)
        if g is not None:
            done = decided_round(ws.archive_root, [r.run_id for r in g.inputs.runs])
            if done is not None:
                raise UsageError(
                    f"the newest round ({done.round}) was already decided ({done.decision}) and the checked-in "
                    "kernel has no edits to reject; name the runs to decide that round again"
                )
    return archive.reject(
        g.inputs if g else None,
        workspace_root=ws.root,
        source_dir=cfg.source_dir,
        archive_root=ws.archive_root,
        language=cfg.language,
        candidate_name=candidate,
        topic=topic,
        reason=reason,
        definition_obj=g.definition if g else None,
        workloads=g.workloads if g else None,
    )


def archive_round(
    ws: Workspace,
    run_ids: list[str] | None = None,
    candidate: str | None = None,
    *,
    topic: str | None = None,
    reason: str | None = None,
) -> archive.DecisionResult:
    from fibtui.services import archive  # only for rounds: a verdict does without it

    g = gather(ws, run_ids, candidate)
    return archive.archive_only(
        g.inputs, topic=topic, reason=reason, definition_obj=g.definition, workloads=g.workloads
    )
