"""Setting up a run from a workspace: the one service behind ``fibtui run`` and the TUI's Runs pane.

``prepare_run`` snapshots the solutions into a new run folder, writes the journal header and
returns a runner; ``prepare_resume`` reopens an interrupted run from its journal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import backends, toolchain
from fibtui.core.dataset import Dataset, Definition
from fibtui.core.errors import UsageError
from fibtui.core.plan import (  # noqa: F401 - check_workers, resolve_run: re-exported for callers of this service
    ResolvedRun,
    build_header,
    check_workers,
    load_snapshot,
    resolve_run,
    snapshot,
    solution_from_config,
    solution_from_path,
)
from fibtui.core.presets import preset_for
from fibtui.core.runs import Journal, RunHeader, new_run_dir, read_journal, run_dir
from fibtui.core.workspace import Workspace
from fibtui.runners import registry
from fibtui.runners.events import Runner
from fibtui.runners.local import LocalRunner, worker_pool  # noqa: F401 - worker_pool re-exported: the TUI's warm workers use it
from fibtui.worker.wire import EngineConfig, TimingPlan

#: the backends by name (fibtui.runners.registry)
BACKENDS = registry.names()

#: Timing defaults per backend (docs/measurement.md, "Timing defaults": blocks of many launches, median per block).
GPU_PLAN = {"calls_per_block": 20, "blocks": 6, "warmup_calls": 3}
INTERPRETER_PLAN = {"calls_per_block": 1, "blocks": 2, "warmup_calls": 0}


@dataclass
class RunOptions:
    backend: str = "local"
    workloads: str = "rep"
    solutions: list[str] = field(default_factory=list)
    baseline: str | None = None
    repeats: int = 1
    workers: int | None = None  # interpreter workers, or GPUs to use
    job_timeout_s: float | None = None
    l2_policy: str = "cold"
    #: ``official``: every job is also timed as flashinfer-bench main times it (the worker's
    #: official_timing), beside fibtui's own timing, which still decides
    timing: str = "fibtui"
    calls_per_block: int | None = None
    blocks: int | None = None
    correctness_trials: int | None = None
    representatives: list[str] | None = None
    definition: str | None = None
    #: warm worker processes to use first (watch mode), a fibtui.runners.local.WarmWorkers
    warm: Any = None
    #: modal backend only: run the Modal function's body in this process (Function.local()), on
    #: the local GPU or Triton's CPU interpreter; for tests and for checking the path offline
    modal_in_process: bool = False
    #: adaptive repeats: ``repeats`` is the cap, and a workload is repeated only while its paired
    #: interval is undecided (fibtui.core.sequential; local and interpreter backends, paired runs)
    adaptive: bool = False
    #: a backend's own options (its ``registry.Option``s that RunOptions has no attribute for)
    backend_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class PreparedRun:
    folder: Path
    header: RunHeader
    runner: Runner  # LocalRunner | ModalRunner

    @property
    def run_id(self) -> str:
        return self.header.run_id


def check_backend(backend: str, in_process: bool = False) -> backends.Backends:
    """What this machine has, once ``backend`` is known to run here (else a UsageError);
    ``in_process``: the run goes in this process (``Backend.in_process``)."""
    spec = registry.get(backend)
    found = backends.detect()
    spec.check(found, in_process)
    return found


def default_cache_dir() -> str:
    from fibtui.core.locations import reference_cache_dir

    return str(reference_cache_dir())


def default_build_cache_dir() -> str:
    """Compiled CUDA/C++ builds, kept across runs (:func:`fibtui.core.locations.build_cache_dir`)."""
    from fibtui.core.locations import build_cache_dir

    return str(build_cache_dir())


def engine_config(
    backend: str, definition: Definition, dataset_root: Path, options: RunOptions
) -> dict[str, Any]:
    preset = preset_for(definition)
    interpreter = backend == "interpreter"
    plan: dict[str, int | str] = dict(INTERPRETER_PLAN if interpreter else GPU_PLAN)
    if options.calls_per_block:
        plan["calls_per_block"] = options.calls_per_block
    if options.blocks:
        plan["blocks"] = options.blocks
    plan["l2_policy"] = options.l2_policy
    if options.timing not in ("fibtui", "official"):
        raise UsageError(f"--timing is fibtui or official, not {options.timing!r}")
    config = EngineConfig(
        backend=backend,
        device="cpu" if interpreter else "cuda:0",
        correctness_trials=options.correctness_trials or (1 if interpreter else 2),
        atol=preset.atol,
        rtol=preset.rtol,
        matched_ratio=preset.matched_ratio,
        evaluator=preset.evaluator,
        plan=TimingPlan.from_dict(plan),
        cache_dir=default_cache_dir(),
        build_cache_dir=default_build_cache_dir(),
        dataset_root=str(dataset_root),
    )
    if options.timing == "official":
        config.timing, config.official = "official", official_plan(preset, interpreter)
    # as a JSON object: the run's header keeps it (settings.engine), the worker reads it back
    return config.to_dict()


#: the official method's calls on the CPU interpreter, where the contest's counts would take
#: minutes a job: the structure is the same, the numbers describe the interpreter (never a verdict)
INTERPRETER_OFFICIAL_PLAN = {"warmup": 0, "iterations": 3, "trials": 2}


def official_plan(preset: Any, interpreter: bool = False) -> dict[str, int]:
    """Warm-up, iterations and trials of the official-equivalent timing: the contest's for the
    definition (its flags in the preset, else flashinfer-bench's defaults)."""
    from fibtui.core.presets import official_timing

    return dict(INTERPRETER_OFFICIAL_PLAN) if interpreter else official_timing(preset)


def workload_json(
    dataset: Dataset, definition: Definition, uuids: list[str]
) -> dict[str, dict[str, Any]]:
    workloads = dataset.workloads(definition.name)
    return {u: workloads.get(u).to_json() for u in uuids}


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
        from fibtui.core.decisions import adaptive_rule

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


def profile_request(
    ws: Workspace,
    uuids: list[str],
    solution: str | None = None,
    definition: str | None = None,
    warmup_calls: int = 5,
    profiled_calls: int = 1,
) -> dict[str, Any]:
    """The request ``python -m fibtui.worker profile`` reads: for each workload, warm-up calls,
    then ``profiled_calls`` inside cudaProfilerStart/Stop (ncu --profile-from-start off)."""
    cfg = ws.config_for(definition)
    dataset = ws.dataset()
    d = dataset.definition(cfg.definition)
    sol = solution_from_path(solution, cfg) if solution else solution_from_config(cfg)
    options = RunOptions(backend="local")
    return {
        "config": engine_config("local", d, ws.dataset_root or dataset.root, options),
        "definition": d.raw,
        "solutions": [
            {
                "id": "candidate-0",
                "name": sol.name,
                "spec": {
                    "language": sol.language,
                    "entry_point": sol.entry_point,
                    "destination_passing_style": sol.dps,
                    "binding": sol.binding,
                },
                "sources": sol.sources,
            }
        ],
        "workloads": list(workload_json(dataset, d, uuids).values()),
        "warmup_calls": warmup_calls,
        "profiled_calls": profiled_calls,
    }
