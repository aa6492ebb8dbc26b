"""What a run is set up with, below the application: the options of a run (:class:`RunOptions`),
the prepared run a runner comes in (:class:`PreparedRun`), the engine config its worker reads
(:func:`engine_config`), the backend check and the profiling request.

Planning, starting and resuming a run (``prepare_run``, ``prepare_resume``, ``prepare_retry``)
are the application's: :mod:`fibtui.services.runs`, shared by ``fibtui run`` and the TUI's Runs
pane. This module stays in the runners because runners use it (the Modal runner, the split of a
run, the host view and the build check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import backends
from fibtui.core.dataset import Dataset, Definition
from fibtui.core.errors import UsageError
from fibtui.core.plan import solution_from_config, solution_from_path
from fibtui.core.presets import preset_for
from fibtui.core.runs import RunHeader
from fibtui.core.workspace import Workspace
from fibtui.runners import registry
from fibtui.runners.events import Runner
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
    #: with ``timing="official"``: time the reference too, for the official speedup (False:
    #: flashinfer-bench's --no-profile-baseline, for definitions whose reference is slow)
    profile_baseline: bool = True
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
    from fibtui.core.measurement import CPU_INTERPRETER

    interpreter = registry.timing_kind(backend) == CPU_INTERPRETER
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
        if not options.profile_baseline:
            config.official["reference"] = False
    elif not options.profile_baseline:
        raise UsageError("--no-profile-baseline goes with --timing official")
    # as a JSON object: the run's header keeps it (settings.engine), the worker reads it back
    return config.to_dict()


#: the official method's calls on the CPU interpreter, where the contest's counts would take
#: minutes a job: the structure is the same, the numbers describe the interpreter (never a verdict)
INTERPRETER_OFFICIAL_PLAN = {"warmup": 0, "iterations": 3, "trials": 2}


def official_plan(preset: Any, interpreter: bool = False) -> dict[str, int | bool]:
    """Warm-up, iterations and trials of the official-equivalent timing: the contest's for the
    definition (its flags in the preset, else flashinfer-bench's defaults)."""
    from fibtui.core.presets import official_timing

    return dict(INTERPRETER_OFFICIAL_PLAN) if interpreter else official_timing(preset)


def workload_json(
    dataset: Dataset, definition: Definition, uuids: list[str]
) -> dict[str, dict[str, Any]]:
    workloads = dataset.workloads(definition.name)
    return {u: workloads.get(u).to_json() for u in uuids}


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
