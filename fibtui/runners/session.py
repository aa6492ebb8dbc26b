"""Setting up a run from a workspace: the one service behind ``fibtui run`` and the TUI's Runs pane.

``prepare_run`` snapshots the solutions into a new run folder, writes the journal header and
returns a runner; ``prepare_resume`` reopens an interrupted run from its journal.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fibtui.core import backends, toolchain
from fibtui.core.dataset import Dataset, Definition
from fibtui.core.errors import UsageError
from fibtui.core.plan import (
    build_header,
    load_snapshot,
    select_workloads,
    snapshot,
    solution_from_config,
    solution_from_path,
)
from fibtui.core.presets import preset_for
from fibtui.core.runs import Journal, RunHeader, new_run_dir, read_journal, run_dir
from fibtui.core.workspace import Workspace
from fibtui.runners.local import LocalRunner, WorkerPool

BACKENDS = ("local", "interpreter", "modal")

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


@dataclass
class PreparedRun:
    folder: Path
    header: RunHeader
    runner: Any  # LocalRunner | ModalRunner: run(on_event, cancel) -> run record

    @property
    def run_id(self) -> str:
        return self.header.run_id


def check_workers(workers: int | None) -> None:
    """``--workers N``: GPUs, interpreter workers or Modal containers; at least one, for every
    backend (a run with none would never start a job)."""
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")


def check_backend(backend: str, modal_in_process: bool = False) -> backends.Backends:
    if backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} (choose from {', '.join(BACKENDS)}; parity has its own verb)")
    found = backends.detect()
    if backend == "modal" and not modal_in_process:
        if not found.modal_installed:
            raise UsageError("the modal backend needs the modal package: pip install modal")
        if found.modal_credentials is None:
            raise UsageError("no Modal credentials: run `modal setup` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)")
        return found
    if backend == "local" and not found.gpu:
        raise UsageError("no NVIDIA GPU on this machine: use --backend interpreter (Triton's CPU interpreter) "
                         "or --backend modal")
    if not (found.torch and found.triton):
        raise UsageError(f"the {backend} backend needs torch and triton in this Python ({sys.executable}): "
                         "pip install 'fibtui[gpu]'")
    if backend == "interpreter" and not found.interpreter:
        raise UsageError("Triton's CPU interpreter needs numpy: pip install numpy")
    return found


def default_cache_dir() -> str:
    from platformdirs import user_cache_path

    return str(os.environ.get("FIBTUI_CACHE_DIR") or (user_cache_path("fibtui") / "reference"))


def default_build_cache_dir() -> str:
    """Compiled CUDA/C++ builds, kept across runs (``FIBTUI_BUILD_CACHE_DIR``; beside the
    reference cache when ``FIBTUI_CACHE_DIR`` is set; else the user's cache folder)."""
    from platformdirs import user_cache_path

    explicit = os.environ.get("FIBTUI_BUILD_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("FIBTUI_CACHE_DIR")
    return str(Path(base) / "builds" if base else user_cache_path("fibtui") / "builds")


def engine_config(backend: str, definition: Definition, dataset_root: Path, options: RunOptions) -> dict[str, Any]:
    preset = preset_for(definition)
    interpreter = backend == "interpreter"
    plan = dict(INTERPRETER_PLAN if interpreter else GPU_PLAN)
    if options.calls_per_block:
        plan["calls_per_block"] = options.calls_per_block
    if options.blocks:
        plan["blocks"] = options.blocks
    plan["l2_policy"] = options.l2_policy
    return {
        "backend": backend,
        "device": "cpu" if interpreter else "cuda:0",
        "correctness_trials": options.correctness_trials or (1 if interpreter else 2),
        "atol": preset.atol,
        "rtol": preset.rtol,
        "matched_ratio": preset.matched_ratio,
        "evaluator": preset.evaluator,
        "plan": plan,
        "cache_dir": default_cache_dir(),
        "build_cache_dir": default_build_cache_dir(),
        "dataset_root": str(dataset_root),
    }


def worker_pool(backend: str, found: backends.Backends, config: dict[str, Any], options: RunOptions) -> WorkerPool:
    interpreter = backend == "interpreter"
    if interpreter:
        devices = ["cpu"] * max(1, options.workers or 1)
        timeout = options.job_timeout_s or 900.0
    else:
        # one worker per GPU this process may use (CUDA_VISIBLE_DEVICES respected): each worker
        # gets that GPU's own entry as its CUDA_VISIBLE_DEVICES
        ids = found.gpu_ids or ["0"]
        n = min(options.workers or len(ids), len(ids))
        devices = [f"cuda:{ids[i]}" for i in range(max(1, n))]
        timeout = options.job_timeout_s or 300.0
    return WorkerPool(devices=devices, engine_config=config, interpreter=interpreter, job_timeout_s=timeout)


def _workload_json(dataset: Dataset, definition: Definition, uuids: list[str]) -> dict[str, dict[str, Any]]:
    workloads = dataset.workloads(definition.name)
    return {u: workloads.get(u).to_json() for u in uuids}


def _engine_backend(backend: str, found: backends.Backends, options: RunOptions) -> str:
    """What the worker engine runs as: a Modal run in-process uses the local GPU or, without
    one, Triton's CPU interpreter."""
    if backend == "modal" and options.modal_in_process and not found.gpu:
        return "interpreter"
    return backend


@dataclass
class ResolvedRun:
    """What a run would run: the definition, the solutions and the workloads (nothing written)."""

    cfg: Any
    dataset: Dataset
    definition: Definition
    candidates: list[Any]
    baseline: Any
    uuids: list[str]


def _in_workspace(path: str, ws: Workspace) -> str:
    """A relative ``--solution`` path that names nothing from the current folder is read from the
    workspace root (``candidates/v3`` with ``--workspace``)."""
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists() and (ws.root / p).exists():
        return str(ws.root / p)
    return path


def resolve_run(ws: Workspace, options: RunOptions) -> ResolvedRun:
    if options.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    check_workers(options.workers)
    cfg = ws.config_for(options.definition)
    dataset = ws.dataset()
    definition = dataset.definition(cfg.definition)
    candidates = [solution_from_path(_in_workspace(p, ws), cfg) for p in options.solutions] or [solution_from_config(cfg)]
    baseline = None
    if options.baseline:
        baseline = solution_from_path(_in_workspace(options.baseline, ws), cfg)
    for sol in candidates + ([baseline] if baseline else []):
        if sol.definition and sol.definition != definition.name:
            raise UsageError(f"solution {sol.name} is for {sol.definition}, not {definition.name}")
    uuids = select_workloads(options.workloads, definition, dataset, options.representatives)
    return ResolvedRun(cfg, dataset, definition, candidates, baseline, uuids)


def refuse_unsupported(solutions: list[Any], engine_backend: str, found: backends.Backends) -> None:
    """Refuse up front a run with a solution this machine cannot build or run (UNSUPPORTED_HERE:
    a limit of the machine, said before anything is snapshotted, never a kernel's failure)."""
    if engine_backend not in ("local", "interpreter"):
        return  # Modal's image decides; its worker reports what it lacks
    tools = toolchain.detect(versions=False)
    for sol in solutions:
        reason = toolchain.limits(sol.language, sol.binding, sol.sources, engine_backend, found.gpu, tools)
        if reason:
            kind = sol.language + (f", {sol.binding} binding" if sol.binding else "")
            raise UsageError(f"{toolchain.UNSUPPORTED_HERE}: {sol.name} ({kind}) cannot run on this machine: {reason}")


def prepare_run(ws: Workspace, options: RunOptions) -> PreparedRun:
    found = check_backend(options.backend, options.modal_in_process)
    resolved = resolve_run(ws, options)
    dataset, definition, uuids = resolved.dataset, resolved.definition, resolved.uuids
    candidates, baseline = resolved.candidates, resolved.baseline
    workloads = _workload_json(dataset, definition, uuids)  # strict validation before anything runs
    engine_backend = _engine_backend(options.backend, found, options)
    refuse_unsupported(candidates + ([baseline] if baseline else []), engine_backend, found)
    config = engine_config(engine_backend, definition, ws.dataset_root or dataset.root, options)
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
    timing_kind = backends.timing_kind_of(engine_backend)
    settings: dict[str, Any] = {"engine": config, "workspace": str(ws.root)}
    if options.backend == "modal":
        from fibtui.runners.modal_runner import modal_header_settings

        settings["modal"] = modal_header_settings(ws, options, config)
    header = build_header(
        folder.name, definition, dataset, refs, uuids, options.repeats, options.backend, timing_kind,
        options.l2_policy if engine_backend != "interpreter" else "n/a", options.workloads, settings,
    )
    Journal(folder).write_header(header)
    solutions = {ref.key: load_snapshot(folder, ref) for ref in refs}
    runner = _runner(ws, folder, header, definition, solutions, workloads, found, config, options)
    if isinstance(runner, LocalRunner):
        runner.warm = options.warm
    return PreparedRun(folder, header, runner)


def _runner(ws: Workspace, folder: Path, header: RunHeader, definition: Definition, solutions: dict[str, Any],
            workloads: dict[str, Any], found: backends.Backends, config: dict[str, Any], options: RunOptions) -> Any:
    if header.backend == "modal":
        from fibtui.runners.modal_runner import modal_runner_for

        return modal_runner_for(ws, folder, header, definition, solutions, workloads, config)
    return LocalRunner(folder, header, definition.raw, solutions, workloads, worker_pool(header.backend, found, config, options))


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
    in_process = bool((header.settings.get("modal") or {}).get("in_process"))
    found = check_backend(header.backend, in_process)
    dataset = ws.dataset()
    definition = dataset.definition(header.definition)
    uuids = list(dict.fromkeys(j.uuid for j in header.jobs))
    workloads = _workload_json(dataset, definition, uuids)
    config = dict(header.settings.get("engine") or engine_config(header.backend, definition, ws.dataset_root or dataset.root, options))
    solutions = {ref.key: load_snapshot(folder, ref) for ref in header.solutions}
    options.backend = header.backend
    runner = _runner(ws, folder, header, definition, solutions, workloads, found, config, options)
    return PreparedRun(folder, header, runner)


def profile_request(ws: Workspace, uuids: list[str], solution: str | None = None, definition: str | None = None,
                    warmup_calls: int = 5, profiled_calls: int = 1) -> dict[str, Any]:
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
        "solutions": [{"id": "candidate-0", "name": sol.name,
                       "spec": {"language": sol.language, "entry_point": sol.entry_point,
                                "destination_passing_style": sol.dps, "binding": sol.binding},
                       "sources": sol.sources}],
        "workloads": list(_workload_json(dataset, d, uuids).values()),
        "warmup_calls": warmup_calls,
        "profiled_calls": profiled_calls,
    }
