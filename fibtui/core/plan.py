"""Planning a run: which solutions (snapshotted first), which workloads, how many repeats.

Every solution that runs is copied into the run folder before anything executes, and the worker
reads that snapshot, never the mutable workspace: a kernel saved mid-run cannot change what a run
measured, and every number points at the exact sources that produced it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.dataset import Dataset, Definition, WorkloadSet, load_solution, parse_solution
from fibtui.core.errors import InputError, UsageError
from fibtui.core.fsio import atomic_write_json, atomic_write_text
from fibtui.core.runs import JobSpec, RunHeader, SolutionRef, now_iso
from fibtui.core.workspace import (
    CONFIG_NAME,
    IGNORED_SOURCE_PARTS,
    SolutionConfig,
    Workspace,
    load_config,
)

if TYPE_CHECKING:
    from fibtui.core.regimes import RegimeReport

MAX_SOURCE_BYTES = 8 * 2**20


@dataclass
class SolutionSource:
    name: str
    language: str
    entry_point: str
    dps: bool
    sources: list[dict[str, str]]  # [{path, content}]
    origin: str
    binding: str | None = None
    author: str = ""
    definition: str = ""

    @property
    def source_hash(self) -> str:
        h = hashlib.sha256()
        for s in sorted(self.sources, key=lambda s: s["path"]):
            h.update(s["path"].encode() + b"\0" + s["content"].encode() + b"\0")
        return h.hexdigest()[:16]

    def to_solution_json(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "language": self.language,
            "target_hardware": ["B200", "H200", "H100"],
            "entry_point": self.entry_point,
            "dependencies": [],
            "destination_passing_style": self.dps,
        }
        if self.binding:
            spec["binding"] = self.binding
        return {
            "name": self.name,
            "definition": self.definition,
            "author": self.author or "unknown",
            "description": f"snapshot of {self.origin}",
            "spec": spec,
            "sources": self.sources,
        }


def _read_sources(folder: Path) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    total = 0
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or any(
            part in IGNORED_SOURCE_PARTS or part.startswith(".") for part in rel.parts
        ):
            continue
        if p.name == CONFIG_NAME or p.suffix in (".pyc", ".so", ".o"):
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(p, "source file is not UTF-8 text") from None
        total += len(text)
        if total > MAX_SOURCE_BYTES:
            raise InputError(folder, f"sources exceed {MAX_SOURCE_BYTES // 2**20} MiB")
        out.append({"path": rel.as_posix(), "content": text})
    if not out:
        raise InputError(folder, "no source files")
    return out


def solution_from_config(cfg: SolutionConfig) -> SolutionSource:
    if cfg.entry_file is None:
        raise InputError(
            cfg.path,
            f"entry point {cfg.entry_point_raw!r} resolves to no file",
            field="build.entry_point",
        )
    sources = _read_sources(cfg.source_dir)
    if cfg.entry_file not in {s["path"] for s in sources}:
        raise InputError(
            cfg.path,
            f"entry point file {cfg.entry_file} is not in {cfg.source_dir}",
            field="build.entry_point",
        )
    return SolutionSource(
        name=cfg.name,
        language=cfg.language,
        entry_point=cfg.entry_point,
        dps=cfg.dps,
        sources=sources,
        origin=str(cfg.folder),
        binding=cfg.binding,
        author=cfg.author,
        definition=cfg.definition,
    )


def solution_from_path(
    path: str | Path, active: SolutionConfig | None, field: str = "--solution"
) -> SolutionSource:
    """A solution given on the command line: a folder with config.toml, a solution.json, or a
    plain folder of sources (which takes the active config's language and entry point);
    ``field``: the option that named it, as its errors say (``--solution``, ``--baseline``)."""
    path = Path(path).expanduser()
    if path.is_file() and path.suffix == ".json":
        sol = load_solution(path)
        return SolutionSource(
            name=sol.name,
            language=sol.spec.language,
            entry_point=sol.spec.entry_point,
            dps=sol.spec.destination_passing_style,
            sources=[{"path": s.path, "content": s.content} for s in sol.sources],
            origin=str(path),
            binding=sol.spec.binding,
            author=sol.author,
            definition=sol.definition,
        )
    if not path.is_dir():
        raise InputError(path, "not a solution folder or solution.json", field=field)
    if (path / CONFIG_NAME).is_file():
        return solution_from_config(load_config(path / CONFIG_NAME))
    if active is None:
        raise UsageError(
            f"{path} has no config.toml and the workspace has no active config to take the entry point from"
        )
    sources = _read_sources(path)
    if active.entry_file not in {s["path"] for s in sources}:
        raise InputError(
            path,
            f"has no {active.entry_file} (the entry point file of {active.name})",
            field=field,
        )
    return SolutionSource(
        name=path.name,
        language=active.language,
        entry_point=active.entry_point,
        dps=active.dps,
        sources=sources,
        origin=str(path),
        binding=active.binding,
        author=active.author,
        definition=active.definition,
    )


def snapshot(sol: SolutionSource, role: str, run_folder: Path, index: int = 0) -> SolutionRef:
    """Copy the sources into ``<run>/snapshots/<role>-<name>/`` (plus solution.json)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", sol.name)[:80] or "solution"
    rel = f"snapshots/{role}-{safe}" + (f"-{index}" if index else "")
    folder = run_folder / rel
    for s in sol.sources:
        atomic_write_text(folder / "sources" / s["path"], s["content"])
    atomic_write_json(folder / "solution.json", sol.to_solution_json())
    return SolutionRef(
        name=sol.name,
        role=role,
        snapshot=rel,
        language=sol.language,
        entry_point=sol.entry_point,
        source_hash=sol.source_hash,
        origin=sol.origin,
    )


def load_snapshot(run_folder: Path, ref: SolutionRef) -> dict[str, Any]:
    """The solution JSON the worker runs, read back from the run's own snapshot."""
    path = run_folder / ref.snapshot / "solution.json"
    from fibtui.core.dataset import read_json_file

    sol = parse_solution(read_json_file(path), path)
    return {
        "name": sol.name,
        "spec": {
            "language": sol.spec.language,
            "entry_point": sol.spec.entry_point,
            "destination_passing_style": sol.spec.destination_passing_style,
            "binding": sol.spec.binding,
        },
        "sources": [{"path": s.path, "content": s.content} for s in sol.sources],
    }


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------


@dataclass
class WorkspaceRegimes:
    """The regime analysis of a workspace's definition, as its gates use it."""

    report: RegimeReport
    definition: Definition
    workloads: WorkloadSet
    hardware: str | None


def workspace_regimes(ws: Workspace, definition: str | None = None) -> WorkspaceRegimes:
    """The one regime analysis behind a gate's representatives: the definition's workloads, the
    newest GPU rows that cover them (fibtui's own run records), the user's pins, floors on those
    rows' GPU (the B200 when unknown). The Regimes pane shows it; `fibtui run --workloads rep`,
    the TUI's gates and `fibtui parity --workloads rep` gate on its representatives."""
    # imported here: regimes and roofline bring polars, which a run of explicit uuids never needs
    from fibtui.core import regimes, roofline
    from fibtui.core.errors import FibError
    from fibtui.core.runs import latest_run

    cfg = ws.config_for(definition)
    ds = ws.dataset()
    d = ds.definition(cfg.definition)
    workloads = ds.workloads(d.name)
    latest = latest_run(ws.archive_root, d.name, workloads=len(workloads))
    rows, label, hardware = latest[1] if latest else (None, None, None)
    try:
        device = roofline.get_device(hardware or "B200", ws.root)
    except FibError:
        device = roofline.get_device("B200", ws.root)
    pinned, unpinned = regimes.load_pins(ws.root)
    report = regimes.analyze(
        d,
        workloads,
        rows,
        pinned=pinned,
        unpinned=unpinned,
        device=device,
        latency_source=label,
    )
    if latest is not None and rows is not None and label is not None:
        if len({r.uuid for r in rows}) >= len(workloads):  # the shares a verdict names
            key = regimes.shares_key(d, workloads, latest[0].path / "run.json")
            regimes.remember_shares(key, report, label)
    return WorkspaceRegimes(report, d, workloads, hardware)


def gate_representatives(ws: Workspace, definition: str | None = None) -> list[str]:
    """The uuids a representative gate runs (:func:`workspace_regimes`'s representatives)."""
    return [r.uuid for r in workspace_regimes(ws, definition).report.representatives]


@dataclass(frozen=True)
class SweepEstimate:
    """What a full sweep of a workspace's definition runs, and how long it should take from the
    seconds per job of earlier runs of that definition here, on the same kind of timing."""

    workloads: int
    repeats: int
    solutions: int
    seconds_per_job: float | None
    #: where ``seconds_per_job`` comes from (None: no earlier run to go by)
    history: str | None

    @property
    def jobs(self) -> int:
        return self.workloads * self.repeats * self.solutions

    @property
    def seconds(self) -> float | None:
        return None if self.seconds_per_job is None else self.jobs * self.seconds_per_job


def sweep_estimate(
    ws: Workspace, backend: str, repeats: int, paired: bool, definition: str | None = None
) -> SweepEstimate:
    """The TUI's sweep question and its answer's numbers (read the files: call it from a worker)."""
    from fibtui.core.backends import timing_kind_of
    from fibtui.core.runs import history_seconds_per_job

    cfg = ws.config_for(definition)
    n = len(ws.dataset().workloads(cfg.definition))
    history = history_seconds_per_job(ws.archive_root, cfg.definition, timing_kind_of(backend))
    per_job, source = history if history else (None, None)
    return SweepEstimate(n, max(1, repeats), 2 if paired else 1, per_job, source)


def simple_representatives(definition: Definition, dataset: Dataset) -> list[str]:
    """One workload per distinct value of the first varying axis (the fallback picker)."""
    workloads = dataset.workloads(definition.name)
    if not workloads.axis_names:
        return workloads.uuids[:1]
    axis = workloads.axis_names[0]
    seen: dict[int, str] = {}
    for uuid, value in zip(
        workloads.uuids, workloads.frame.get_column(axis).to_list(), strict=True
    ):
        seen.setdefault(value, uuid)
    return [seen[v] for v in sorted(seen)]


def select_workloads(
    selection: str,
    definition: Definition,
    dataset: Dataset,
    representatives: list[str] | None = None,
) -> list[str]:
    """``rep`` | ``all`` | comma-separated uuids (unique prefixes allowed)."""
    workloads = dataset.workloads(definition.name)
    if selection == "all":
        return list(workloads.uuids)
    if selection == "rep":
        return (
            list(representatives)
            if representatives
            else simple_representatives(definition, dataset)
        )
    chosen: list[str] = []
    for token in (t.strip() for t in selection.split(",")):
        if not token:
            continue
        matches = [u for u in workloads.uuids if u == token] or [
            u for u in workloads.uuids if u.startswith(token)
        ]
        if not matches:
            raise InputError(
                None, f"no workload {token!r} in {definition.name}", field="--workloads"
            )
        if len(matches) > 1:
            raise InputError(
                None,
                f"{token!r} matches {len(matches)} workloads; give more of the uuid",
                field="--workloads",
            )
        if matches[0] not in chosen:
            chosen.append(matches[0])
    if not chosen:
        raise InputError(None, "no workloads selected", field="--workloads")
    return chosen


def build_header(
    run_id: str,
    definition: Definition,
    dataset: Dataset,
    solutions: list[SolutionRef],
    uuids: list[str],
    repeats: int,
    backend: str,
    timing_kind: str,
    l2_policy: str,
    selection: str,
    settings: dict[str, Any],
) -> RunHeader:
    workloads = dataset.workloads(definition.name)
    jobs = []
    for r in range(repeats):
        for uuid in uuids:
            axes = workloads.axes_of(uuid)
            for ref in solutions:
                jobs.append(
                    JobSpec(uuid=uuid, axes=axes, solution=ref.name, role=ref.role, repeat=r)
                )
    return RunHeader(
        run_id=run_id,
        definition=definition.name,
        backend=backend,
        timing_kind=timing_kind,
        l2_policy=l2_policy,
        solutions=solutions,
        jobs=jobs,
        repeats=repeats,
        workload_selection=selection,
        started=now_iso(),
        settings=settings,
    )


def check_workers(workers: int | None) -> None:
    """``--workers N``: GPUs, interpreter workers or Modal containers; at least one, for every
    backend (a run with none would never start a job)."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")


@dataclass
class ResolvedRun:
    """What a run would run: the definition, the solutions and the workloads (nothing written)."""

    cfg: Any
    dataset: Dataset
    definition: Definition
    candidates: list[Any]
    baseline: Any
    uuids: list[str]


def _in_workspace(path: str, ws: Any) -> str:
    """A relative ``--solution`` path that names nothing from the current folder is read from the
    workspace root (``candidates/v3`` with ``--workspace``)."""
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists() and (ws.root / p).exists():
        return str(ws.root / p)
    return path


def resolve_run(ws: Any, options: Any) -> ResolvedRun:
    """What a run of ``options`` (a :class:`fibtui.runners.session.RunOptions`) would run in the
    workspace ``ws``: checked and resolved, nothing written. The one place the CLI, the TUI and the
    Modal plan resolve a run."""
    if options.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    check_workers(options.workers)
    cfg = ws.config_for(options.definition)
    dataset = ws.dataset()
    definition = dataset.definition(cfg.definition)
    candidates = [solution_from_path(_in_workspace(p, ws), cfg) for p in options.solutions] or [
        solution_from_config(cfg)
    ]
    baseline = None
    if options.baseline:
        baseline = solution_from_path(_in_workspace(options.baseline, ws), cfg, "--baseline")
    for sol in candidates + ([baseline] if baseline else []):
        if sol.definition and sol.definition != definition.name:
            raise UsageError(f"solution {sol.name} is for {sol.definition}, not {definition.name}")
    uuids = select_workloads(options.workloads, definition, dataset, options.representatives)
    return ResolvedRun(cfg, dataset, definition, candidates, baseline, uuids)
