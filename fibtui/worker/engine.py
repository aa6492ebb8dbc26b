"""The worker's engine: build solutions, make inputs, get (cached) reference outputs, check
correctness, time. One entry point for every backend: the local runner's persistent process
(``serve``), the CPU interpreter, a Modal container (``execute``), and ncu profiling.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from fibtui.core import gpuarch
from fibtui.core.status import GATE_STATUSES
from fibtui.core.toolchain import GPU_ONLY_MODULES, UNSUPPORTED_HERE, says_no_gpu
from fibtui.worker import check, evaluators, official_timing
from fibtui.worker import env as envmod
from fibtui.worker.build import (
    BuildError,
    BuildJob,
    BuiltSolution,
    current_arch,
    forget_solution_modules,
    full_text,
    prepare,
    sid_of_module,
)
from fibtui.worker.check import Tolerance
from fibtui.worker.inputs import InputErrorW, InputMaker, seed_for, torch_dtype
from fibtui.worker.phases import NOTHING, Phases
from fibtui.worker.reference import ReferenceRunner
from fibtui.worker.rotation import Keeper, Rotation, keep_copy
from fibtui.worker.seal import Seal
from fibtui.worker.timing import (
    HarnessTampered,
    Kept,
    PointerSets,
    SolutionTiming,
    Timed,
    TimingError,
    time_cupti,
    time_wall,
)
from fibtui.worker.wire import Calling, Loaded, Result
from fibtui.worker.wire import EngineConfig as EngineConfig  # re-exported: defined in the wire
from fibtui.worker.wire import JobStarted as JobStartedEvent

INCORRECT_TIMED, INPUT_MUTATED, CACHED_TIMING, HARNESS_TAMPERED = GATE_STATUSES
#: a call on unseen inputs may take at most this many times the timed calls' median before the
#: timed calls read as not doing the work (an answer kept from earlier calls): on a GPU, and on
#: Triton's CPU interpreter, whose wall times are noisier (a kept answer is a copy there, a
#: hundred times faster than the interpreted kernel)
CACHED_RATIO = {"cupti": 3.0, "cpu-interpreter": 10.0}
#: fresh input sets per job for the probe calls (each solution's first block and one past the middle)
PROBE_SETS = 2

Emit = Callable[[dict[str, Any]], None]

#: GPU memory a released engine may still hold beyond its reference outputs (a solution that keeps
#: tensors in a global past its run): more, and the worker is not kept for another run
RELEASE_HELD_LIMIT = 256 * 2**20


class ContextPoisoned(Exception):
    """The CUDA context no longer works (e.g. after an illegal memory access): restart the worker."""


class HarnessBroken(Exception):
    """A solution changed the harness (its seal broke): the worker is restarted, and the other
    solutions of the job are measured again in a fresh one."""


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
        #: this GPU's architecture (``sm_90``): what a kernel built for another one is told
        arch = current_arch(self.device.type)
        self.device_arch = gpuarch.Arch.parse(arch) if arch else None
        # Built sources go to the caller's folder, or to a temporary one this engine removes on close().
        self._owns_workdir = not config.workdir
        self.workdir = Path(config.workdir or tempfile.mkdtemp(prefix="fibtui-worker-"))
        self.definition: dict[str, Any] | None = None
        self.solutions: dict[str, BuiltSolution] = {}
        #: sid -> (status, message): COMPILE_ERROR, or UNSUPPORTED_HERE for what this machine lacks
        self.build_errors: dict[str, tuple[str, str]] = {}
        #: sid -> what this machine lacks, for a build that failed for it (a GPU architecture...)
        self.build_limits: dict[str, gpuarch.MachineLimit] = {}
        #: sids whose first call has not happened yet in this process (its JIT compile, if any)
        self._first_call: set[str] = set()
        self.maker: InputMaker | None = None
        self.evaluator: evaluators.Evaluator = evaluators.Evaluator()
        self.reference: ReferenceRunner | None = None
        self.poisoned = False
        #: the current job's host time per phase (fibtui.worker.phases)
        self.phases: Phases = NOTHING
        #: the harness's seal, taken before the run's solutions are built (fibtui.worker.seal)
        self.seal: Seal | None = None
        #: why the worker must be restarted, when not for a lost CUDA context
        self.restart_reason: str | None = None

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
        self.build_limits.clear()
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
        if self.restart_reason:
            self.kept_reference = None
            return {"keep": False, "why": self.restart_reason}
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
        self.build_limits.clear()
        self.seal = _take_seal()
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
                        reference_root=self.config.reference_root,
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
        if exc.limit is not None:
            self.build_limits[sid] = exc.limit
            report[sid]["limit"] = exc.limit.to_json()
        if exc.log:
            report[sid]["log"] = exc.log[-200_000:]

    def _prefetch_references(self, workloads: list[dict[str, Any]]) -> None:
        """Reference outputs of these workloads into the cache (trial seeds), while builds run."""
        assert self.definition is not None and self.maker is not None and self.reference is not None
        if self.reference.cache_dir is None:
            return
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        inputs: list[Any] | None = None
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

    def _calling(self, event: Calling) -> None:
        if self.config.report_calls:
            self.emit(event.to_dict())

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

    def _call_again(
        self, sol: BuiltSolution, workload: dict[str, Any], inputs: list[Any]
    ) -> list[torch.Tensor]:
        """One more call of ``sol`` on a copy of ``inputs``, its outputs shaped from them (an
        evaluator that calls the solution again while it judges)."""
        return self._call(sol, self._clone(inputs), workload, poison=True, shapes_from_inputs=True)

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
        ph = self.phases = Phases()
        results: dict[str, dict[str, Any]] = {}
        for sid in sids:
            if sid in self.build_errors:
                status, message = self.build_errors[sid]
                results[sid] = {"status": status, "error": message}
                if sid in self.build_limits:
                    results[sid]["limit"] = self.build_limits[sid].to_json()
        alive = [sid for sid in sids if sid in self.solutions]
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        errors: dict[str, tuple[float, float]] = {sid: (0.0, 0.0) for sid in alive}
        ref_latency: float | None = None
        first_call_s: dict[str, float] = {}
        judged: dict[str, dict[str, Any]] = {}
        tol = self._tolerance()
        #: the correctness trials' input sets and reference outputs: the timed calls' pool
        checked_sets: list[tuple[int, list[Any], list[torch.Tensor]]] = []
        try:
            for trial in range(max(1, self.config.correctness_trials)):
                if not alive:
                    break
                seed = seed_for(uuid, trial, self.config.seed)
                with ph("make"):
                    inputs = self.maker.make(workload, seed)
                with ph("reference"):
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
                checked_sets.append((seed, inputs, ref_out))
                for sid in list(alive):
                    sol = self.solutions[sid]
                    t_call = time.perf_counter()
                    # which solution is in a call: a watchdog that sees a job hang blames this one
                    self._calling(Calling(job.get("job_id"), "check", sid))
                    args = self._clone(inputs)
                    try:
                        with ph("check"):
                            outs = self._call(sol, args, workload, poison=True)
                    except Exception as exc:  # noqa: BLE001 - the kernel's failure is its result
                        results[sid] = self._failure(exc, sol)
                        alive.remove(sid)
                        if self._context_lost():
                            raise ContextPoisoned(sid) from None
                        continue
                    # the first trial's calls: a patch made in a later call is seen after the
                    # timed calls, before the profile is read
                    broken = self.seal.broken() if self.seal is not None and trial == 0 else []
                    if broken:
                        results[sid] = _tampered(broken)
                        alive.remove(sid)
                        raise HarnessBroken(sid)
                    with ph("judge"):
                        changed = self._changed_inputs(inputs, args)
                    if changed:
                        results[sid] = {
                            "status": INPUT_MUTATED,
                            "error": f"the call wrote into its input(s) {', '.join(changed)}, which "
                            "the definition does not name as outputs",
                        }
                        alive.remove(sid)
                        continue
                    if sid in self._first_call:
                        # the first call of this solution in this process: its JIT compile (Triton,
                        # CuTe DSL) happens here, before any timed block
                        self._first_call.discard(sid)
                        first_call_s[sid] = time.perf_counter() - t_call
                    # the sampling evaluator calls the solution again while it judges
                    self._calling(
                        Calling(
                            job.get("job_id"),
                            "judge",
                            sid if self.evaluator.name == "sampling" else None,
                        )
                    )
                    with ph("judge"):
                        verdict = self.evaluator.judge(
                            evaluators.Judging(
                                self.definition,
                                names,
                                inputs,
                                outs,
                                ref_out,
                                tol,
                                call=functools.partial(self._call_again, sol, workload),
                            )
                        )
                    worst_abs, worst_rel = errors[sid]
                    errors[sid] = (
                        max(worst_abs, verdict.max_abs_error or 0.0),
                        max(worst_rel, verdict.max_rel_error or 0.0),
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
                    Calling(
                        job.get("job_id"),
                        "timing",
                        alive[0] if len(alive) == 1 else None,
                        list(alive),
                    )
                )
                try:
                    timings, rotation = self._time(alive, workload, checked_sets)
                except HarnessTampered as exc:
                    # the seal broke during the interleaved timing: which solution did it is not
                    # known here, so none of them is measured; the worker goes
                    self.poisoned = True
                    self.restart_reason = "a solution changed the harness during the timed calls"
                    for sid in alive:
                        results[sid] = _tampered(exc.changed, during="the timed calls")
                    alive = []
                    timings, rotation = {}, None
                del checked_sets
                with ph("checks"):
                    failures = self._timed_failures(timings, rotation, workload, names, tol)
                for sid in alive:
                    t = timings[sid]
                    timing = t.to_json(self.config.timing_kind, self.config.plan)
                    failed = failures.get(sid)
                    if failed is not None:
                        results[sid] = {**failed, "timing": timing}
                        continue
                    results[sid] = {
                        "status": "PASSED",
                        "latency_ms": t.latency_ms,
                        "max_abs_error": errors[sid][0],
                        "max_rel_error": errors[sid][1],
                        "timing": timing,
                    }
                    threads = self.seal.new_threads() if self.seal is not None else []
                    if threads:
                        timing["checks"]["threads_left"] = threads[:8]
                if self.config.timing == "official":
                    with ph("official"):
                        self._time_official(alive, workload, results)
        except HarnessBroken as exc:
            self.poisoned = True
            culprit = exc.args[0] if exc.args else None
            self.restart_reason = f"{culprit or 'a solution'} changed the harness"
            for sid in alive:
                results.setdefault(
                    sid,
                    {
                        "status": "INFRA_ERROR",
                        "error": f"not measured: {culprit or 'another solution'} changed the harness",
                    },
                )
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
                    results.setdefault(sid, self._failure(exc, self.solutions.get(sid)))
                elif culprit is None and len(alive) == 1 and _from_solution(exc, folders):
                    results.setdefault(sid, self._failure(exc, self.solutions.get(sid)))
                else:
                    why = (
                        f"not measured: {culprit} failed"
                        + (" and lost the CUDA context" if lost else "")
                        if culprit
                        else where
                    )
                    results.setdefault(sid, {"status": "INFRA_ERROR", "error": why})
        t_finish = time.perf_counter()
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
        ph.add("finish", (time.perf_counter() - t_finish) * 1000.0)
        wall_s = time.monotonic() - t_start
        return {
            "job_id": job.get("job_id"),
            "uuid": uuid,
            "repeat": job.get("repeat", 0),
            "results": out,
            "wall_s": wall_s,
            "cpu_s": time.process_time() - cpu_start,
            "phases_ms": ph.to_json(wall_s),
            "restart": self.poisoned,
            **(
                {"restart_reason": self.restart_reason}
                if self.poisoned and self.restart_reason
                else {}
            ),
        }

    def _time(
        self,
        sids: list[str],
        workload: dict[str, Any],
        checked: list[tuple[int, list[Any], list[torch.Tensor]]],
    ) -> tuple[dict[str, SolutionTiming], Rotation | None]:
        """Time the solutions (fibtui.worker.timing) on the inputs :meth:`_timing_inputs` makes."""
        plan = self.config.plan
        with self.phases("setup"):
            inputs, rotation, pool_count, calls = self._timing_inputs(sids, workload, checked)
        seal = self.seal.broken if self.seal is not None else None
        probe_count = PROBE_SETS if plan.checks else 0
        with torch.no_grad():
            if self.config.timing_kind == "cupti":
                got = time_cupti(
                    calls,
                    inputs,
                    pool_count,
                    probe_count,
                    plan,
                    self.device,
                    clock=self._clock,
                    seal=seal,
                    phases=self.phases,
                )
            else:
                got = time_wall(
                    calls, inputs, pool_count, probe_count, plan, seal=seal, phases=self.phases
                )
        return got, rotation

    def _timing_inputs(
        self,
        sids: list[str],
        workload: dict[str, Any],
        checked: list[tuple[int, list[Any], list[torch.Tensor]]],
    ) -> tuple[Any, Rotation | None, int, dict[str, Timed]]:
        """The timed calls' inputs and the calls themselves. With the checks, a rotation of input
        sets (fibtui.worker.rotation) whose pool is the correctness trials' own sets (``checked``:
        seed, inputs, reference outputs; their references are at hand), and one set of its own
        more when there was a single trial; without them, ``min(blocks, 4)`` sets by pointer,
        as before the checks. Returns (inputs, rotation or None, pool sets, calls)."""
        assert self.maker is not None and self.definition is not None and self.reference is not None
        plan = self.config.plan
        uuid = workload["uuid"]
        names = list(self.definition["outputs"])
        dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
        #: the pool sets' seeds and reference outputs (None until a kept call needs it)
        self._pool_seeds: list[int] = []
        self._pool_refs: list[list[torch.Tensor] | None] = []
        if plan.checks:
            pool = [inputs for _, inputs, _ in checked]
            self._pool_seeds = [seed for seed, _, _ in checked]
            self._pool_refs = [ref for _, _, ref in checked]
            while len(pool) < 2:  # two sets at least: consecutive calls never share values
                seed = seed_for(uuid, 1000 + len(pool), self.config.seed)
                pool.append(self.maker.make(workload, seed))
                self._pool_seeds.append(seed)
                self._pool_refs.append(None)
        else:
            pool = [
                self.maker.make(workload, seed_for(uuid, 1000 + k, self.config.seed))
                for k in range(max(1, min(plan.blocks, 4)))
            ]
        pool_count = len(pool)
        outs = {
            sid: self.maker.allocate_outputs(workload, poison=False)
            for sid in sids
            if self.solutions[sid].dps
        }
        rotation: Rotation | None = None
        if plan.checks:
            probes = [
                self.maker.make(workload, seed_for(uuid, 2000 + j, self.config.seed))
                for j in range(PROBE_SETS)
            ]
            rotation = Rotation.build(pool, probes, self._shared_inputs(workload), self.device)
            inputs: Any = rotation
            del pool, probes, checked
        else:
            inputs = PointerSets(pool)

        def timed(sid: str) -> Timed:
            sol = self.solutions[sid]
            if sol.dps:
                o = outs[sid]
                keep = Keeper(o)  # the out buffers are the same every call: launchers made once
                return Timed(lambda args: sol.fn(*args, *o), lambda _r: keep())
            return Timed(
                lambda args: sol.fn(*args),
                lambda r: keep_copy(self.evaluator.normalize(r, names, dtypes, self.device)),
            )

        return inputs, rotation, pool_count, {sid: timed(sid) for sid in sids}

    def _time_official(
        self, sids: list[str], workload: dict[str, Any], results: dict[str, dict[str, Any]]
    ) -> None:
        """``--timing official``: the PASSED solutions timed again as flashinfer-bench main times
        them (fibtui.worker.official_timing), into their ``timing.official``; fibtui's own timing
        of the job stands whatever happens there."""
        passed = [sid for sid in sids if results.get(sid, {}).get("status") == "PASSED"]
        if not passed:
            return
        for sid, official in official_timing.time_job(self, passed, workload).items():
            results[sid]["timing"]["official"] = official
        if any("error" in results[sid]["timing"]["official"] for sid in passed):
            self._context_lost()  # a call that lost the CUDA context restarts the worker

    def _shared_inputs(self, workload: dict[str, Any]) -> list[bool]:
        """Per input, whether every input set holds the same tensor (read from safetensors)."""
        assert self.definition is not None
        given = workload.get("inputs") or {}
        return [
            (given.get(name) or {}).get("type") == "safetensors"
            for name in self.definition["inputs"]
        ]

    def _changed_inputs(self, before: list[Any], after: list[Any]) -> list[str]:
        """The inputs (by name) a call changed, among those the definition does not name as
        outputs (one synchronization for all of them)."""
        assert self.definition is not None
        outputs = set(self.definition["outputs"])
        pairs = [
            (name, a, b)
            for name, a, b in zip(self.definition["inputs"], before, after, strict=False)
            if name not in outputs
            and isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.numel()
        ]
        if not pairs:
            return []

        def raw(t: torch.Tensor) -> torch.Tensor:
            return t.detach().contiguous().view(-1).view(torch.uint8)

        try:
            flags = torch.stack([(raw(a) != raw(b)).any() for _, a, b in pairs]).tolist()
        except RuntimeError:  # a shape or dtype the call changed under the same name
            return [name for name, a, b in pairs if a.shape != b.shape or a.dtype != b.dtype]
        return [name for (name, _a, _b), changed in zip(pairs, flags, strict=True) if changed]

    def _timed_failures(
        self,
        timings: dict[str, SolutionTiming],
        rotation: Rotation | None,
        workload: dict[str, Any],
        names: list[str],
        tol: Tolerance,
    ) -> dict[str, dict[str, Any]]:
        """The gate's checks on the timed calls (docs/measurement.md, "A gate no candidate can
        game"): each kept call's outputs against its set's reference (INCORRECT_TIMED), its live
        inputs against the set's bytes (INPUT_MUTATED), the timed calls doing the work a call on
        unseen inputs does (CACHED_TIMING). The comparisons of every kept call of every solution
        are made on the device and read back in one synchronization; a call that fails is
        judged again by the evaluator, for its words. Returns the failures by solution."""
        assert self.definition is not None
        out: dict[str, dict[str, Any]] = {}
        if rotation is None:
            return out
        input_names = list(self.definition["inputs"])
        outputs = set(self.definition["outputs"])
        fast = self.evaluator.name == "default"
        # one flag per kept call for its inputs (all of them at once), one per kept output; the
        # outputs of every kept call are compared in stacks (check.mismatch_flags)
        flags: list[torch.Tensor] = []
        where: list[tuple[str, Kept, str, Any]] = []  # sid, kept, what, detail
        got_outs: list[Any] = []
        ref_outs: list[torch.Tensor] = []
        out_where: list[tuple[str, Kept, str, Any]] = []
        for sid, t in timings.items():
            for kept in t.kept:
                if kept.inputs_after is not None:
                    flag = rotation.input_flag(
                        kept.inputs_after, kept.set_index, input_names, outputs
                    )
                    if flag is not None:
                        flags.append(flag)
                        where.append((sid, kept, "input", None))
                if fast:
                    refs = self._pool_ref(kept.set_index, rotation, workload, names)
                    for name, got, ref in zip(names, kept.outputs, refs, strict=False):
                        got_outs.append(got)
                        ref_outs.append(ref)
                        out_where.append((sid, kept, "output", name))
        if ref_outs:
            flags.append(check.mismatch_flags(got_outs, ref_outs, tol))
            where += out_where
        bad = torch.cat([f.reshape(-1) for f in flags]).tolist() if flags else []
        # in the order a solution's calls ran: its first kept call found wrong decides, and for
        # one call its inputs before its outputs
        order = {id(k): (sid, i) for sid, t in timings.items() for i, k in enumerate(t.kept)}
        found = sorted(
            (w for w, is_bad in zip(where, bad, strict=True) if is_bad),
            key=lambda w: (order[id(w[1])], w[2] != "input"),
        )
        for sid, kept, what, detail in found:
            if sid in out:
                continue
            if what == "input":
                assert kept.inputs_after is not None
                changed = [
                    name
                    for name, flag in rotation.input_changes(
                        kept.inputs_after, kept.set_index, input_names, outputs
                    )
                    if bool(flag)
                ]
                which = (
                    f"its input {', '.join(changed)}, which the definition does not name as an "
                    "output"
                    if changed
                    else "the input buffer's padding between its inputs"
                )
                out[sid] = {
                    "status": INPUT_MUTATED,
                    "error": f"timed call {kept.call + 1} of block {kept.block + 1} wrote into "
                    + which,
                }
            else:
                out[sid] = self._kept_verdict(kept, rotation, workload, names, tol) or {
                    "status": INCORRECT_TIMED,
                    "error": f"timed call {kept.call + 1} of block {kept.block + 1} (input set "
                    f"{kept.set_index}) gave a wrong {detail}",
                }
        if not fast and self.evaluator.name != "sampling":  # a sample is random: not judged alone
            for sid, t in timings.items():
                for kept in t.kept:
                    if sid in out:
                        break
                    verdict = self._kept_verdict(kept, rotation, workload, names, tol)
                    if verdict is not None:
                        out[sid] = verdict
        for sid, t in timings.items():
            if sid not in out:
                cached = _cached_timing(t, self.config.timing_kind)
                if cached is not None:
                    out[sid] = cached
        return out

    def _pool_ref(
        self, k: int, rotation: Rotation, workload: dict[str, Any], names: list[str]
    ) -> list[torch.Tensor]:
        """Pool set ``k``'s reference outputs (a trial's own, or worked out now)."""
        assert self.definition is not None and self.reference is not None
        ref = self._pool_refs[k]
        if ref is None:
            dtypes = [torch_dtype(s["dtype"]) for s in self.definition["outputs"].values()]
            ref, _ = self.reference.outputs(
                workload,
                self._pool_seeds[k],
                self._clone(rotation.pool_sets[k]),
                names,
                dtypes,
                time_it=False,
            )
            self._pool_refs[k] = ref
        return ref

    def _kept_verdict(
        self,
        kept: Kept,
        rotation: Rotation,
        workload: dict[str, Any],
        names: list[str],
        tol: Tolerance,
    ) -> dict[str, Any] | None:
        """The evaluator's verdict on one kept call (None: PASSED)."""
        assert self.definition is not None
        pool_inputs = rotation.pool_sets[kept.set_index]
        refs = self._pool_ref(kept.set_index, rotation, workload, names)
        verdict = self.evaluator.judge(
            evaluators.Judging(self.definition, names, pool_inputs, kept.outputs, refs, tol)
        )
        if verdict.status == "PASSED":
            return None
        return {
            "status": INCORRECT_TIMED,
            "error": f"timed call {kept.call + 1} of block {kept.block + 1} (input set "
            f"{kept.set_index}) gave a wrong output: {verdict.detail or verdict.status} (an answer "
            "kept from an earlier call?)",
            "max_abs_error": verdict.max_abs_error,
            "max_rel_error": verdict.max_rel_error,
        }

    def _arch_limit(
        self, exc: BaseException, sol: BuiltSolution | None
    ) -> gpuarch.MachineLimit | None:
        """On a GPU: did the call fail because this GPU lacks the architecture the code needs
        (a DSL's arch check, no kernel image for this GPU, PTX it cannot take)? Then it is
        UNSUPPORTED_HERE with what it needs, never the kernel's RUNTIME_ERROR."""
        if self.device_arch is None:
            return None
        limit = gpuarch.limit_from_text(full_text(exc), self.device_arch)
        if limit is None or limit.needs or sol is None:
            return limit
        # "no kernel image": what the built library holds says what it needs
        library = sol.meta.get("library")
        entries = gpuarch.fatbin_entries(library) if isinstance(library, str) else []
        if entries:
            return gpuarch.MachineLimit(
                "arch",
                tuple(dict.fromkeys(e.arch.name for e in entries)),
                limit.has,
                evidence=limit.evidence,
            )
        return limit

    def _clock(self) -> envmod.BlockClock | None:
        """The clocks, power and temperature of this worker's GPU, read before each timed block
        (its UUID looked up once: NVML numbers GPUs ignoring CUDA_VISIBLE_DEVICES)."""
        if not hasattr(self, "_gpu_uuid"):
            self._gpu_uuid = _gpu_uuid(self.device)
        return envmod.block_clock(self.device.index or 0, self._gpu_uuid)

    def _failure(self, exc: BaseException, sol: BuiltSolution | None = None) -> dict[str, Any]:
        limit = self._arch_limit(exc, sol)
        if limit is not None:
            lines = str(exc).strip().splitlines()
            first = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip()
            return {
                "status": UNSUPPORTED_HERE,
                "error": f"{limit.describe()} ({first[:300]})",
                "limit": limit.to_json(),
            }
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
            lacking = _cpu_tool_limit(exc)
            if lacking:
                return {"status": UNSUPPORTED_HERE, "error": f"{lacking} ({text[:300]})"}
        return {"status": status, "error": text[:2000]}


def keep_torch_caches_out_of_tmp() -> None:
    """Importing ``torch._dynamo`` (the seal does, torch's profiler does) makes TorchInductor's
    cache folder, ``$TMPDIR/torchinductor_<user>``, and sets TORCHINDUCTOR_CACHE_DIR to it: a
    folder left in the user's temp folder by every job, and an environment that changed under
    a pooled worker. Unless the user chose one, it goes under fibtui's cache, set before the
    worker notes its fresh environment."""
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        from fibtui.core.locations import torchinductor_dir

        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(torchinductor_dir())


def _take_seal() -> Seal:
    """The harness's seal, with Triton's JIT among what it holds. What torch changes in itself
    the first time it is used happens before: importing ``torch._dynamo`` (which torch's profiler
    does) wraps ``torch.manual_seed``."""
    keep_torch_caches_out_of_tmp()
    for name in ("triton", "triton.runtime.jit", "torch._dynamo"):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - not there: nothing of it to seal
            pass
    if torch.cuda.is_available():
        try:  # fibtui's own kernels are sealed with the rest of fibtui
            __import__("fibtui.worker.gpu_kernels")
        except Exception:  # noqa: BLE001 - no Triton: the timed calls will meet and report it
            pass
        try:  # the first CUDA profile loads what it loads now, not inside the timed calls
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CUDA]):
                pass
        except Exception:  # noqa: BLE001 - the timed calls will meet and report it
            pass
    return Seal()


def _tampered(changed: list[str], during: str = "its correctness call") -> dict[str, Any]:
    more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
    return {
        "status": HARNESS_TAMPERED,
        "error": f"the solution changed what fibtui's timer or judge relies on during {during}: "
        + "; ".join(changed[:3])
        + more,
    }


def _cached_timing(t: SolutionTiming, kind: str) -> dict[str, Any] | None:
    """CACHED_TIMING when the timed calls did not do the work a call on unseen inputs does:
    some launched no device work, none of the probe's kernels ran in them, or they took a
    fraction of its time."""
    probe = min(t.probe_ms) if t.probe_ms else None
    if kind == "cupti" and t.timed_calls:
        if t.empty_calls:
            return {
                "status": CACHED_TIMING,
                "error": f"{t.empty_calls} of {t.timed_calls} timed calls launched no device work; "
                f"a call on unseen inputs launched {', '.join(t.probe_kernel_names[:3]) or 'work'}",
            }
        if t.probe_kernel_names and not set(t.kernel_names) & set(t.probe_kernel_names):
            return {
                "status": CACHED_TIMING,
                "error": "the timed calls launched none of the kernels a call on unseen inputs "
                f"launched ({', '.join(t.probe_kernel_names[:3])}; timed: "
                f"{', '.join(t.kernel_names[:3])})",
            }
    ratio = CACHED_RATIO.get(kind, 3.0)
    # the slowest block against the fastest probe: noise must make every timed block fast and
    # every probe slow before an honest kernel is flagged
    slowest = max(t.block_medians_ms, default=t.latency_ms)
    if probe is not None and probe > 0 and slowest * ratio < probe and _cpu_agrees(t, ratio):
        return {
            "status": CACHED_TIMING,
            "error": f"timed calls took {t.latency_ms * 1000:.2f} us (slowest block "
            f"{slowest * 1000:.2f} us), a call on unseen inputs {probe * 1000:.2f} us: more than "
            f"{ratio:g}x (an answer kept from earlier calls?)",
        }
    return None


def _cpu_agrees(t: SolutionTiming, ratio: float) -> bool:
    """On the CPU interpreter, whose timer is the wall clock: do the calls' CPU times (the
    process's, every thread) say the same, the slowest block's median ``ratio`` times below the
    probe's? A probe that was only kept waiting (another process had the CPU: a loaded machine)
    used no more CPU than the timed calls, and is no evidence. A kept answer cannot hide behind
    it: work moved to another thread is still the process's, and a thread spinning beside the
    timed calls adds at most their wall time per core (docs/measurement.md). True where there
    are no CPU times (the GPU's timer)."""
    if not t.probe_cpu_ms or not t.block_cpu_medians_ms:
        return True
    return max(t.block_cpu_medians_ms) * ratio < min(t.probe_cpu_ms)


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
    keep = ("builder", "cached", "build_s", "compile_s", "cache_key", "cutlass")
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
    config = EngineConfig.from_dict(request.get("config") or {})
    with Engine(config, emit) as engine:
        return _execute(engine, config, request, emit)


def _execute(
    engine: Engine, config: EngineConfig, request: dict[str, Any], emit: Emit | None
) -> dict[str, Any]:
    jobs = request.get("jobs", [])
    first = list({j["workload"]["uuid"]: j["workload"] for j in jobs[:4]}.values())
    load = engine.load(request["definition"], request["solutions"], prefetch=first)
    emit = emit or (lambda _e: None)
    emit(Loaded(load, engine.environment).to_dict())
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
                        "error": f"not run: {engine.restart_reason or 'the CUDA context was lost'} earlier",
                    }
                    for sid in job.get(
                        "solutions", list(engine.solutions) + list(engine.build_errors)
                    )
                ],
                "restart": True,
            }
        else:
            emit(JobStartedEvent(job.get("job_id")).to_dict())
            result = engine.run_job(job)
        jobs_out.append(result)
        emit(Result(result).to_dict())
    return {
        "environment": engine.environment,
        "load": load,
        "jobs": jobs_out,
        "timing_kind": config.timing_kind,
        "poisoned": engine.poisoned,
    }
