"""Planning, starting and resuming a run from a workspace: the application service behind
``fibtui run`` and the TUI's Runs pane.

``prepare_run`` checks the backend, resolves the solutions and workloads, refuses up front what
this machine cannot run, snapshots the solutions into a new run folder, writes the journal header
and returns a runner; ``prepare_resume`` reopens an interrupted run from its journal and
``prepare_retry`` runs its failed jobs again. The options and the engine config they build on are
the runners' (:mod:`fibtui.runners.session`), named here too so that the CLI and the TUI plan a
run through this module alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fibtui.core import backends, toolchain
from fibtui.core.dataset import Definition
from fibtui.core.errors import UsageError
from fibtui.core.plan import build_header, load_snapshot, resolve_run, snapshot
from fibtui.core.runs import Journal, RunHeader, new_run_dir, read_journal, run_dir
from fibtui.core.workspace import Workspace
from fibtui.runners import registry
from fibtui.runners.events import Runner
from fibtui.runners.local import LocalRunner
from fibtui.runners.session import (
    PreparedRun,
    RunOptions,
    check_backend,
    engine_config,
    profile_request,
    workload_json,
)

#: the API of this service: what it defines, and the runners' options and set-up it takes
__all__ = [
    "PreparedRun",
    "RunOptions",
    "check_backend",
    "engine_config",
    "prepare_resume",
    "prepare_retry",
    "prepare_run",
    "profile_request",
    "refuse_unsupported",
]


def _engine_backend(backend: str, found: backends.Backends, options: RunOptions) -> str:
    """What the worker engine runs as (``local`` on a GPU, ``interpreter``; Modal's own)."""
    return registry.get(backend).engine(found, options)


def refuse_unsupported(solutions: list[Any], engine_backend: str, found: backends.Backends) -> None:
    """Refuse up front a run with a solution this machine cannot build or run (UNSUPPORTED_HERE:
    a limit of the machine, said before anything is snapshotted, never a kernel's failure)."""
    if not registry.get(engine_backend).runs_here:
        return  # elsewhere (Modal's image) that machine decides; its worker reports what it lacks
    tools = toolchain.detect(versions=False)
    for sol in solutions:
        reason = toolchain.limits(
            sol.language, sol.binding, sol.sources, engine_backend, found.gpu, tools
        )
        if reason:
            kind = sol.language + (f", {sol.binding} binding" if sol.binding else "")
            raise UsageError(
                f"{toolchain.UNSUPPORTED_HERE}: {sol.name} ({kind}) cannot run on this machine: {reason}"
            )


def prepare_run(ws: Workspace, options: RunOptions) -> PreparedRun:
    spec = registry.get(options.backend)
    found = check_backend(options.backend, spec.in_process(options))
    resolved = resolve_run(ws, options)
    dataset, definition, uuids = resolved.dataset, resolved.definition, resolved.uuids
    candidates, baseline = resolved.candidates, resolved.baseline
    workloads = workload_json(dataset, definition, uuids)  # strict validation before anything runs
    engine_backend = _engine_backend(options.backend, found, options)
    refuse_unsupported(candidates + ([baseline] if baseline else []), engine_backend, found)
    config = engine_config(engine_backend, definition, ws.dataset_root or dataset.root, options)
    engine = registry.get(engine_backend)
    if engine.runs_here and (ws.root / "reference").is_dir():
        config["reference_root"] = str(ws.root / "reference")  # a CUTLASS checkout there
    folder = new_run_dir(ws.archive_root, definition.name, options.backend)
    refs = []
    if baseline is not None:
        refs.append(snapshot(baseline, "baseline", folder))
    names = {r.name for r in refs}
    for i, sol in enumerate(candidates):
        if sol.name in names:
            sol.name = f"{sol.name}-{i + 1}"
        names.add(sol.name)
        refs.append(snapshot(sol, "candidate", folder, index=0))
    timing_kind = registry.timing_kind(engine_backend)
    settings: dict[str, Any] = {"engine": config, "workspace": str(ws.root)}
    if options.adaptive:
        settings["adaptive"] = _adaptive_plan(ws, options, baseline)
    if spec.header_settings is not None:
        settings[spec.name] = spec.header_settings(ws, options, config)
    header = build_header(
        folder.name,
        definition,
        dataset,
        refs,
        uuids,
        options.repeats,
        options.backend,
        timing_kind,
        options.l2_policy if engine.l2_policy else "n/a",
        options.workloads,
        settings,
    )
    Journal(folder).write_header(header)
    solutions = {ref.key: load_snapshot(folder, ref) for ref in refs}
    runner = _runner(ws, folder, header, definition, solutions, workloads, found, config, options)
    if isinstance(runner, LocalRunner):
        runner.warm = options.warm  # watch mode's warm workers, for a new run only
    _attach_rule(ws, header, runner)
    return PreparedRun(folder, header, runner)


def _adaptive_plan(ws: Workspace, options: RunOptions, baseline: Any) -> dict[str, Any]:
    """``settings.adaptive`` of a new adaptive run's header (refused where it cannot work)."""
    from fibtui.core import stats
    from fibtui.core.sequential import MAX_CAP, SequentialPlan

    if not registry.get(options.backend).adaptive:
        able = [b.name for b in registry.all_backends().values() if b.adaptive]
        raise UsageError(f"--adaptive runs on the {' and '.join(able)} backends")
    if baseline is None:
        raise UsageError("--adaptive needs a paired run: give --baseline DIR (or best)")
    if not 1 <= options.repeats <= MAX_CAP:
        raise UsageError(f"--repeats under --adaptive is the cap: 1 to {MAX_CAP}")
    confidence = stats.StatsSettings.from_workspace(ws.root).confidence
    return SequentialPlan(options.repeats, confidence).to_json()


def _attach_rule(ws: Workspace, header: RunHeader, runner: Runner) -> None:
    """An adaptive run's runner gets its rule (a new run, or one resumed)."""
    if isinstance(header.settings.get("adaptive"), dict) and isinstance(runner, LocalRunner):
        from fibtui.services.decide import adaptive_rule

        runner.adaptive = adaptive_rule(ws, header)


def _runner(
    ws: Workspace,
    folder: Path,
    header: RunHeader,
    definition: Definition,
    solutions: dict[str, Any],
    workloads: dict[str, Any],
    found: backends.Backends,
    config: dict[str, Any],
    options: RunOptions,
) -> Runner:
    ctx = registry.RunContext(
        ws, folder, header, definition, solutions, workloads, found, config, options
    )
    return registry.get(header.backend).runner(ctx)


def prepare_retry(ws: Workspace, run_id: str, options: RunOptions | None = None) -> PreparedRun:
    """Run the failed jobs of a run again, alone, merged back into the same journal."""
    from fibtui.core.runs import failed_keys

    folder = run_dir(ws.archive_root, run_id)
    keys = failed_keys(read_journal(folder / "journal.jsonl"))
    if not keys:
        raise UsageError(f"run {run_id} has no failed jobs to retry")
    Journal(folder).append_retry(keys, f"retry of {len(keys)} failed job(s)")
    return prepare_resume(ws, run_id, options)


def prepare_resume(ws: Workspace, run_id: str, options: RunOptions | None = None) -> PreparedRun:
    folder = run_dir(ws.archive_root, run_id)
    contents = read_journal(folder / "journal.jsonl")
    header = contents.header
    options = options or RunOptions(backend=header.backend)
    in_process = registry.get(header.backend).resumed_in_process(header.settings)
    found = check_backend(header.backend, in_process)
    dataset = ws.dataset()
    definition = dataset.definition(header.definition)
    uuids = list(dict.fromkeys(j.uuid for j in header.jobs))
    workloads = workload_json(dataset, definition, uuids)
    config = dict(
        header.settings.get("engine")
        or engine_config(header.backend, definition, ws.dataset_root or dataset.root, options)
    )
    solutions = {ref.key: load_snapshot(folder, ref) for ref in header.solutions}
    options.backend = header.backend
    runner = _runner(ws, folder, header, definition, solutions, workloads, found, config, options)
    _attach_rule(ws, header, runner)
    return PreparedRun(folder, header, runner)
