"""The worker's engine: build solutions, make inputs, get (cached) reference outputs, check
correctness, time. One entry point for every backend: the local runner's persistent process
(``serve``), the CPU interpreter, a Modal container (``execute``), and ncu profiling.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fibtui.core.toolchain import GPU_ONLY_MODULES, UNSUPPORTED_HERE, says_no_gpu
from fibtui.worker import env as envmod
from fibtui.worker import evaluators, official_timing
from fibtui.worker.build import (
    BuildError,
    BuildJob,
    BuiltSolution,
    forget_solution_modules,
    prepare,
    sid_of_module,
)
from fibtui.worker.check import Tolerance
from fibtui.worker.inputs import InputErrorW, InputMaker, seed_for, torch_dtype
from fibtui.worker.reference import ReferenceRunner
from fibtui.worker.timing import TimingError, TimingPlan, time_cupti, time_wall

Emit = Callable[[dict[str, Any]], None]

#: GPU memory a released engine may still hold beyond its reference outputs (a solution that keeps
#: tensors in a global past its run): more, and the worker is not kept for another run
RELEASE_HELD_LIMIT = 256 * 2**20


@dataclass
class EngineConfig:
    backend: str = "local"  # local | interpreter | modal
    device: str = "cuda"
    seed: int = 0
    correctness_trials: int = 2
    time_reference: bool = True
    atol: float = 1e-2
    rtol: float = 1e-2
    #: None: the evaluator's default (1.0; 0.95 for the low-bit evaluator)
    matched_ratio: float | None = 1.0
    #: which evaluator judges (fibtui.core.presets); None: the one the registry picks
    evaluator: str | None = None
    #: evaluator-specific settings (sampling: validation trials, TVD threshold)
    eval_extra: dict[str, Any] = field(default_factory=dict)
    #: emit a ``calling`` event before each solution call (which solution is in a call): for a
    #: watchdog that must tell which one hung (the Modal container's); off for the local worker
    report_calls: bool = False
    plan: TimingPlan = field(default_factory=TimingPlan)
    #: ``official``: each timed job is also timed as flashinfer-bench main times it, into
    #: ``timing.official`` (fibtui.worker.official_timing; its plan in ``official``)
    timing: str = "fibtui"
    official: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    #: compiled (CUDA/C++) builds, kept across runs; None: the user's cache folder
    build_cache_dir: str | None = None
    workdir: str | None = None
    dataset_root: str | None = None

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> EngineConfig:
        plan = TimingPlan(**(obj.get("plan") or {}))
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__ and k != "plan"}
        return cls(plan=plan, **known)

    @property
    def timing_kind(self) -> str:
        return (
            "cpu-interpreter" if self.backend == "interpreter" or self.device == "cpu" else "cupti"
        )


class ContextPoisoned(Exception):
    """The CUDA context no longer works (e.g. after an illegal memory access): restart the worker."""


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        emit: Emit | None = None,
        kept_reference: ReferenceRunner | None = None,
    ) -> None:
        self.config = config
        #: the reference runner of this worker's previous run (:meth:`release`), used again when
        #: the definition and device are the same: its outputs are still in memory
        self.kept_reference = kept_reference
        self.emit = emit or (lambda _e: None)
        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(
                "CUDA is not available on this machine (use the interpreter backend)"
            )
        self.device = torch.device(config.device)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.environment = envmod.describe(str(self.device), config.backend)
        self.device_name = self.environment.get("gpu") or "cpu"
        # Built sources go to the caller's folder, or to a temporary one this engine removes on close().
        self._owns_workdir = not config.workdir
        self.workdir = Path(config.workdir or tempfile.mkdtemp(prefix="fibtui-worker-"))
        self.definition: dict[str, Any] | None = None
        self.solutions: dict[str, BuiltSolution] = {}
        #: sid -> (status, message): COMPILE_ERROR, or UNSUPPORTED_HERE for what this machine lacks
        self.build_errors: dict[str, tuple[str, str]] = {}
        #: sids whose first call has not happened yet in this process (its JIT compile, if any)
        self._first_call: set[str] = set()
        self.maker: InputMaker | None = None
        self.evaluator: evaluators.Evaluator = evaluators.Evaluator()
        self.reference: ReferenceRunner | None = None
        self.poisoned = False

    def close(self) -> None:
        """Remove the temporary build folder this engine made (a caller's folder is left alone)."""
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def release(self) -> dict[str, Any]:
        """The run is over and this worker may serve another run: forget the solutions (their
        modules leave ``sys.modules``, so the next run imports its own afresh), remove the build
        folder, free the GPU memory the run cached. The reference runner stays for the next load
        (``kept_reference``). Says whether the process is fit to be kept: ``{"keep": bool,
        "why": str}``."""
        import gc

        self.solutions.clear()
        self.build_errors.clear()
        self._first_call.clear()
        self.maker = None
        forget_solution_modules()
        if self.config.workdir:
            shutil.rmtree(self.config.workdir, ignore_errors=True)
        self.close()
        self.kept_reference, self.reference = self.reference, None
        gc.collect()
        if self.device.type != "cuda":
            return {"keep": True}
        if self.poisoned or self._context_lost():
            self.kept_reference = None
            return {"keep": False, "why": "its CUDA context is lost"}
        torch.cuda.empty_cache()
        kept = self.kept_reference.memory_bytes() if self.kept_reference is not None else 0
        held = torch.cuda.memory_allocated(self.device) - kept
        if held > RELEASE_HELD_LIMIT:
            return {
                "keep": False,
                "why": f"{held / 2**20:.0f} MiB of GPU memory are still held after the run",
            }
        return {"keep": True}

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- loading ------------------------------------------------------------------------------

    def load(
        self,
        definition: dict[str, Any],
        solutions: list[dict[str, Any]],
        prefetch: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Build every solution. Compiled builds run in threads (several at once); while they
        compile, the reference outputs of the ``prefetch`` workloads are computed into the cache,
        so the first jobs do not wait for both in turn."""
        self.definition = definition
        self.evaluator = evaluators.for_definition(definition, self.config.evaluator)
        self.maker = InputMaker(
            definition, str(self.device), self.config.dataset_root, self.evaluator.prepare_inputs
        )
        kept = self.kept_reference
        if kept is not None and kept.fits(
            definition, str(self.device), self.device_name, self.config.cache_dir
        ):
            kept.new_run()
            self.reference = kept
        else:
            self.kept_reference = None  # another definition: its outputs leave memory
            self.reference = ReferenceRunner(
                definition, str(self.device), self.device_name, self.config.cache_dir
            )
        self.solutions.clear()
        self.build_errors.clear()
        report: dict[str, Any] = {}
        jobs: list[BuildJob] = []
        cache_root = Path(self.config.build_cache_dir) if self.config.build_cache_dir else None
        for sol in solutions:
            sid = sol["id"]
            try:
                jobs.append(
                    prepare(
                        sid,
                        sol,
                        self.workdir,
                        device_type=self.device.type,
                        cache_root=cache_root,
                        arity=(len(definition["inputs"]), len(definition["outputs"])),
                    )
                )
            except BuildError as exc:
                self._build_failed(sid, exc, report)
        compiled = [j for j in jobs if j.builder != "python"]
        futures = {}
        if compiled:
            pool = ThreadPoolExecutor(
                max_workers=max(1, min(len(compiled), 4)), thread_name_prefix="fibtui-build"
            )
            futures = {j.sid: pool.submit(j.run) for j in compiled}
            pool.shutdown(wait=False)
        for job in jobs:
            if job.builder == "python":
                self._take_build(job.sid, job.run, report)
        if prefetch and any(j.compiles for j in compiled):
            self._prefetch_references(prefetch)
        for sid, fut in futures.items():
            self._take_build(sid, fut.result, report)
        self._first_call = set(self.solutions)
        return report

    def _take_build(
        self, sid: str, run: Callable[[], BuiltSolution], report: dict[str, Any]
    ) -> None:
        try:
            built = run()
        except BuildError as exc:
            self._build_failed(sid, exc, report)
            return
        self.solutions[sid] = built
        report[sid] = {"ok": True, "source_hash": built.source_hash, "build": _build_meta(built)}
        if built.meta.get("cached") is False and built.meta.get("log"):
            try:  # the compiler's output of a build made now, for the run folder
                report[sid]["log"] = Path(built.meta["log"]).read_text(
                    encoding="utf-8", errors="replace"
                )[-200_000:]
            except OSError:
                pass

    def _build_failed(self, sid: str, exc: BuildError, report: dict[str, Any]) -> None:
        self.build_errors[sid] = (exc.status, str(exc))
        report[sid] = {"ok": False, "status": exc.status, "error": str(exc)}
        if exc.log:
            report[sid]["log"] = exc.log[-200_000:]

    def _prefetch_references(self, workloads: list[dict[str, Any]]) -> None:
        """Reference outputs of these workloads into the cache (trial seeds), while builds run."""
        assert self.definition is not None and self.maker is not None and self.reference is not None
        if self.reference.cache_dir is None:
            return
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        for workload in workloads:
            for trial in range(max(1, self.config.correctness_trials)):
                try:
                    seed = seed_for(workload["uuid"], trial, self.config.seed)
                    inputs = self.maker.make(workload, seed)
                    self.reference.outputs(
                        workload,
                        seed,
                        inputs,
                        names,
                        dtypes,
                        time_it=self.config.time_reference and trial == 0,
                    )
                except Exception:  # noqa: BLE001 - the job itself will meet and report it
                    return
                finally:
                    inputs = None

    # -- one job ------------------------------------------------------------------------------

    def _tolerance(self) -> Tolerance:
        return Tolerance(
            self.config.atol,
            self.config.rtol,
            self.config.matched_ratio,
            dict(self.config.eval_extra),
        )

    def _calling(self, event: dict[str, Any]) -> None:
        if self.config.report_calls:
            self.emit(event)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _context_lost(self) -> bool:
        """After a failure on the GPU: does the CUDA context still work? (An illegal memory
        access poisons it for good; only a fresh process recovers.)"""
        if self.device.type != "cuda":
            return False
        try:
            torch.cuda.synchronize(self.device)
            torch.ones(1, device=self.device).add_(1).item()
            return False
        except Exception:  # noqa: BLE001 - any failure here means the context is gone
            self.poisoned = True
            return True

    def _call(
        self,
        sol: BuiltSolution,
        inputs: list[Any],
        workload: dict[str, Any],
        poison: bool,
        shapes_from_inputs: bool = False,
    ) -> list[torch.Tensor]:
        assert self.maker is not None and self.definition is not None
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        with torch.no_grad():
            if sol.dps:
                outs = self.maker.allocate_outputs(
                    workload, poison=poison, inputs=inputs if shapes_from_inputs else None
                )
                sol.fn(*inputs, *outs)
            else:
                outs = self.evaluator.normalize(sol.fn(*inputs), names, dtypes, self.device)
        self._sync()
        return outs

    @staticmethod
    def _clone(inputs: list[Any]) -> list[Any]:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """Check and time every loaded solution on one workload; one result per solution."""
        assert self.definition is not None and self.maker is not None and self.reference is not None
        workload = job["workload"]
        uuid = workload["uuid"]
        sids = [s for s in job.get("solutions", list(self.solutions) + list(self.build_errors))]
        t_start = time.monotonic()
        cpu_start = time.process_time()
        results: dict[str, dict[str, Any]] = {}
        for sid in sids:
            if sid in self.build_errors:
                status, message = self.build_errors[sid]
                results[sid] = {"status": status, "error": message}
        alive = [sid for sid in sids if sid in self.solutions]
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        errors: dict[str, tuple[float, float]] = {sid: (0.0, 0.0) for sid in alive}
        ref_latency: float | None = None
        first_call_s: dict[str, float] = {}
        judged: dict[str, dict[str, Any]] = {}
        tol = self._tolerance()
        try:
            for trial in range(max(1, self.config.correctness_trials)):
                if not alive:
                    break
                seed = seed_for(uuid, trial, self.config.seed)
                inputs = self.maker.make(workload, seed)
                ref_out, lat = self.reference.outputs(
                    workload,
                    seed,
                    self._clone(inputs),
                    names,
                    dtypes,
                    time_it=self.config.time_reference and trial == 0,
                )
                if trial == 0:
                    ref_latency = lat
                for sid in list(alive):
                    sol = self.solutions[sid]
                    t_call = time.perf_counter()
                    # which solution is in a call: a watchdog that sees a job hang blames this one
                    self._calling(
                        {
                            "event": "calling",
                            "job_id": job.get("job_id"),
                            "sid": sid,
                            "phase": "check",
                        }
                    )
                    try:
                        outs = self._call(sol, self._clone(inputs), workload, poison=True)
                    except Exception as exc:  # noqa: BLE001 - the kernel's failure is its result
                        results[sid] = self._failure(exc)
                        alive.remove(sid)
                        if self._context_lost():
                            raise ContextPoisoned(sid) from None
                        continue
                    if sid in self._first_call:
                        # the first call of this solution in this process: its JIT compile (Triton,
                        # CuTe DSL) happens here, before any timed block
                        self._first_call.discard(sid)
                        first_call_s[sid] = time.perf_counter() - t_call
                    # the sampling evaluator calls the solution again while it judges
                    self._calling(
                        {
                            "event": "calling",
                            "job_id": job.get("job_id"),
                            "phase": "judge",
                            "sid": sid if self.evaluator.name == "sampling" else None,
                        }
                    )
                    verdict = self.evaluator.judge(
                        evaluators.Judging(
                            self.definition,
                            names,
                            inputs,
                            outs,
                            ref_out,
                            tol,
                            call=lambda args, _sol=sol: self._call(
                                _sol,
                                self._clone(args),
                                workload,
                                poison=True,
                                shapes_from_inputs=True,
                            ),
                        )
                    )
                    a, r = errors[sid]
                    errors[sid] = (
                        max(a, verdict.max_abs_error or 0.0),
                        max(r, verdict.max_rel_error or 0.0),
                    )
                    judged[sid] = _correctness(self.evaluator.name, verdict, judged.get(sid))
                    if verdict.status != "PASSED":
                        results[sid] = {
                            "status": verdict.status,
                            "error": verdict.detail,
                            "max_abs_error": verdict.max_abs_error,
                            "max_rel_error": verdict.max_rel_error,
                        }
                        alive.remove(sid)
                del inputs, ref_out
            if alive:
                # the solutions are timed interleaved: a hang here cannot be pinned on one of them
                self._calling(
                    {
                        "event": "calling",
                        "job_id": job.get("job_id"),
                        "sid": alive[0] if len(alive) == 1 else None,
                        "sids": list(alive),
                        "phase": "timing",
                    }
                )
                timings = self._time(alive, workload)
                official = (
                    official_timing.time_job(self, alive, workload)
                    if self.config.timing == "official"
                    else {}
                )
                for sid in alive:
                    t = timings[sid]
                    results[sid] = {
                        "status": "PASSED",
                        "latency_ms": t.latency_ms,
                        "max_abs_error": errors[sid][0],
                        "max_rel_error": errors[sid][1],
                        "timing": t.to_json(self.config.timing_kind, self.config.plan),
                    }
                    if sid in official:
                        results[sid]["timing"]["official"] = official[sid]
        except ContextPoisoned as exc:
            # The culprit has its RUNTIME_ERROR; the others were not measured: the runner reruns
            # them alone on a fresh worker (an infrastructure failure, not theirs).
            culprit = exc.args[0] if exc.args else None
            for sid in alive:
                results.setdefault(
                    sid,
                    {
                        "status": "INFRA_ERROR",
                        "error": f"not measured: {culprit or 'another solution'} lost the CUDA context",
                    },
                )
        except InputErrorW as exc:
            for sid in alive:
                results[sid] = {"status": "INFRA_ERROR", "error": f"inputs: {exc}"}
        except TimingError as exc:
            for sid in alive:
                results.setdefault(sid, {"status": "INFRA_ERROR", "error": f"timing: {exc}"})
        except Exception as exc:  # noqa: BLE001 - reference or timing-time failure
            where = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            folders = {sid: sol.folder for sid, sol in self.solutions.items()}
            culprit = _solution_in_traceback(exc, folders)
            lost = self._context_lost()
            for sid in alive:
                if sid == culprit:
                    results.setdefault(sid, self._failure(exc))
                elif culprit is None and len(alive) == 1 and _from_solution(exc, folders):
                    results.setdefault(sid, self._failure(exc))
                else:
                    why = (
                        f"not measured: {culprit} failed"
                        + (" and lost the CUDA context" if lost else "")
                        if culprit
                        else where
                    )
                    results.setdefault(sid, {"status": "INFRA_ERROR", "error": why})
        out = []
        for sid in sids:
            r = results.get(sid, {"status": "INFRA_ERROR", "error": "no result"})
            r["solution_id"] = sid
            r["reference_latency_ms"] = ref_latency
            if sid in judged:
                r["correctness"] = judged[sid]
            if r.get("latency_ms") and ref_latency:
                r["speedup"] = ref_latency / r["latency_ms"]
            timing = r.setdefault("timing", {"kind": self.config.timing_kind})
            timing["environment"] = self.environment
            if sid in self.solutions:
                timing["build"] = _build_meta(self.solutions[sid])
            if sid in first_call_s:
                timing["first_call_s"] = first_call_s[sid]
            timing["reference_cache"] = {
                "hits": self.reference.hits,
                "misses": self.reference.misses,
                "memory_hits": self.reference.memory_hits,
            }
            out.append(r)
        if self.device.type == "cuda" and not self.poisoned:
            torch.cuda.empty_cache()
        return {
            "job_id": job.get("job_id"),
            "uuid": uuid,
            "repeat": job.get("repeat", 0),
            "results": out,
            "wall_s": time.monotonic() - t_start,
            "cpu_s": time.process_time() - cpu_start,
            "restart": self.poisoned,
        }

    def _time(self, sids: list[str], workload: dict[str, Any]):
        assert self.maker is not None
        plan = self.config.plan
        n_sets = max(1, min(plan.blocks, 4))
        sets = [
            self.maker.make(workload, seed_for(workload["uuid"], 1000 + k, self.config.seed))
            for k in range(n_sets)
        ]
        outs = {
            sid: self.maker.allocate_outputs(workload, poison=False)
            for sid in sids
            if self.solutions[sid].dps
        }

        def caller(sid: str):
            sol = self.solutions[sid]
            if sol.dps:
                o = outs[sid]
                return lambda k: sol.fn(*sets[k], *o)
            return lambda k: sol.fn(*sets[k])

        calls = {sid: caller(sid) for sid in sids}
        with torch.no_grad():
            if self.config.timing_kind == "cupti":
                return time_cupti(calls, n_sets, plan, self.device, clock=self._clock)
            return time_wall(calls, n_sets, plan)

    def _clock(self) -> envmod.BlockClock | None:
        """The clocks, power and temperature of this worker's GPU, read before each timed block
        (its UUID looked up once: NVML numbers GPUs ignoring CUDA_VISIBLE_DEVICES)."""
        if not hasattr(self, "_gpu_uuid"):
            self._gpu_uuid = _gpu_uuid(self.device)
        return envmod.block_clock(self.device.index or 0, self._gpu_uuid)

    def _failure(self, exc: BaseException) -> dict[str, Any]:
        kind = type(exc).__name__
        module = type(exc).__module__ or ""
        status = (
            "COMPILE_ERROR"
            if ("CompilationError" in kind or "triton.compiler" in module)
            else "RUNTIME_ERROR"
        )
        msg = str(exc).strip().splitlines()
        text = f"{kind}: {msg[0] if msg else ''}".strip()
        if len(msg) > 1:
            text += " … " + msg[-1]
        if self.device.type != "cuda":
            limit = _cpu_tool_limit(exc)
            if limit:
                return {"status": UNSUPPORTED_HERE, "error": f"{limit} ({text[:300]})"}
        return {"status": status, "error": text[:2000]}


def _gpu_uuid(device: torch.device) -> str | None:
    """The GPU's UUID as torch reports it, or None (older torch, no CUDA)."""
    try:
        uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    except Exception:  # noqa: BLE001 - the clock is then read by index
        return None
    return str(uuid) if uuid else None


def _correctness(evaluator: str, verdict: Any, before: dict[str, Any] | None) -> dict[str, Any]:
    """Which evaluator judged, with its numbers (the worst over the input sets checked)."""
    out = dict(before or {"evaluator": evaluator})
    if verdict.matched_ratio is not None:
        out["matched_ratio"] = min(out.get("matched_ratio", 1.0), verdict.matched_ratio)
    for key, value in (verdict.extra or {}).items():
        if key == "tvd" and isinstance(out.get("tvd"), (int, float)):
            out["tvd"] = max(out["tvd"], value)
        else:
            out[key] = value
    return out


def _cpu_tool_limit(exc: BaseException) -> str | None:
    """On a CPU worker: did the call fail because the machine has no GPU (code of a GPU-only DSL
    in the traceback, or the CUDA stack saying so)? Then it is a limit of this machine."""
    tb = exc.__traceback__
    while tb is not None:
        top = str(tb.tb_frame.f_globals.get("__name__", "")).split(".", 1)[0]
        if top in GPU_ONLY_MODULES:
            return f"{GPU_ONLY_MODULES[top]} needs an NVIDIA GPU; this worker runs on the CPU (Triton's interpreter)"
        tb = tb.tb_next
    if says_no_gpu(str(exc)):
        return "the solution needs an NVIDIA GPU, and this worker runs on the CPU (Triton's interpreter)"
    return None


def _build_meta(sol: BuiltSolution) -> dict[str, Any]:
    """How a solution was built, as results and the loaded report carry it."""
    keep = ("builder", "cached", "build_s", "compile_s", "cache_key")
    return {k: sol.meta[k] for k in keep if k in sol.meta}


def _solution_in_traceback(
    exc: BaseException, folders: dict[str, Path] | None = None
) -> str | None:
    """The worker-side id of the solution whose code raised (the innermost such frame): a module of
    its package, or a file under its build folder (a sibling module imported by plain name)."""
    roots = {sid: str(folder.resolve()) + os.sep for sid, folder in (folders or {}).items()}
    tb = exc.__traceback__
    found = None
    while tb is not None:
        sid = sid_of_module(str(tb.tb_frame.f_globals.get("__name__", "")))
        if sid is None and roots:
            path = os.path.realpath(tb.tb_frame.f_code.co_filename)
            sid = next((s for s, root in roots.items() if path.startswith(root)), None)
        found = sid or found
        tb = tb.tb_next
    return found


def _from_solution(exc: BaseException, folders: dict[str, Path] | None = None) -> bool:
    """Did this exception come out of solution code (vs the reference or the harness)?"""
    return _solution_in_traceback(exc, folders) is not None


def execute(request: dict[str, Any], emit: Emit | None = None) -> dict[str, Any]:
    """One-shot: load the definition and solutions, run every job, return all results.

    This is the body of the Modal function and of ``python -m fibtui.worker run``.
    """
    config = EngineConfig.from_json(request.get("config") or {})
    with Engine(config, emit) as engine:
        return _execute(engine, config, request, emit)


def _execute(
    engine: Engine, config: EngineConfig, request: dict[str, Any], emit: Emit | None
) -> dict[str, Any]:
    jobs = request.get("jobs", [])
    first = list({j["workload"]["uuid"]: j["workload"] for j in jobs[:4]}.values())
    load = engine.load(request["definition"], request["solutions"], prefetch=first)
    emit = emit or (lambda _e: None)
    emit({"event": "loaded", "solutions": load, "environment": engine.environment})
    jobs_out = []
    for job in jobs:
        if engine.poisoned:
            # A previous job lost the CUDA context: the rest cannot run in this process.
            result = {
                "job_id": job.get("job_id"),
                "uuid": job["workload"]["uuid"],
                "repeat": job.get("repeat", 0),
                "results": [
                    {
                        "solution_id": sid,
                        "status": "INFRA_ERROR",
                        "not_run": True,
                        "error": "not run: the CUDA context was lost earlier",
                    }
                    for sid in job.get(
                        "solutions", list(engine.solutions) + list(engine.build_errors)
                    )
                ],
                "restart": True,
            }
        else:
            emit({"event": "job_started", "job_id": job.get("job_id")})
            result = engine.run_job(job)
        jobs_out.append(result)
        emit({"event": "result", **result})
    return {
        "environment": engine.environment,
        "load": load,
        "jobs": jobs_out,
        "timing_kind": config.timing_kind,
        "poisoned": engine.poisoned,
    }


def default_cache_dir() -> str:
    base = os.environ.get("FIBTUI_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "fibtui"
    )
    return os.path.join(base, "reference")
