"""``python -m fibtui.worker serve | run | profile | host | buildcheck --request FILE``.

host: one workload's calls under torch.profiler (CPU and GPU activity): the host view.

serve: a persistent worker. Requests are JSON lines on stdin::

    {"op": "load", "config": {...}, "definition": {...}, "solutions": [{"id", "name", "spec", "sources"}],
     "prefetch": [workload, ...]}   # optional: references to compute while CUDA/C++ builds compile
    {"op": "job", "job_id": "...", "workload": {...}, "repeat": 0, "solutions": ["baseline", "candidate"]}
    {"op": "adopt", "runner_pid": 1234}   # a worker the worker service handed over: see below
    {"op": "release"}   # the run is over: forget its solutions, say whether to keep this worker
    {"op": "shutdown"}

Events are JSON lines on the worker's private stdout: ``ready``, ``loaded``, ``job_started``,
``result`` (one per job, holding one result per solution), ``released``, ``adopted``, ``pong``,
``error``. Every request and event is named, and built, in :mod:`fibtui.worker.wire`. A worker
whose CUDA context is lost answers the job in flight and exits with code 3 so its runner starts a
fresh one.

A worker never outlives its runner (``_orphan_watch``): at first that is the process that started
it. A worker started by the worker service (fibtui/runners/service) is handed to a run that did
not start it; that run sends ``adopt`` with its pid first, and from then on the worker follows that
process (a pidfd), renames its scratch folder after it, and answers ``adopted`` (its pid and the
scratch folder's new path).

A worker may serve several runs, one after the other: after its run's last job the runner sends
``release``; the worker drops that run's solutions (their modules leave ``sys.modules``) and build
folder and frees the GPU memory the run cached, keeps its reference outputs in memory for a next
run of the same definition, and answers ``released`` with ``keep``: false (and ``why``) when it is
not fit for another run (its CUDA context is lost, GPU memory is still held, a solution changed
torch's global settings or the environment, or it served ``FIBTUI_WORKER_MAX_RUNS`` runs, 100 by
default). The next run's ``load`` imports its own solutions afresh.

run: one-shot over a request file (what a Modal container runs); prints the same events.
buildcheck: build every solution of the request (no inputs, no GPU needed for Python/Triton) and
say which failed and why: ``fibtui check --deep``.
profile: build one solution, warm it up, then run ONE call inside cudaProfilerStart/Stop, for
``ncu --profile-from-start off``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import traceback
from typing import Any

from fibtui.worker import wire


def _cap_memory() -> None:
    """``FIBTUI_WORKER_MEMORY_MB=N``: a CPU-interpreter worker may map at most N MiB more than it
    holds once torch and triton are loaded (RLIMIT_AS). A kernel that allocates without end then
    gets a MemoryError / torch allocation error (RUNTIME_ERROR) instead of taking the machine down.
    GPU workers ignore it: the CUDA driver reserves address space by the terabyte."""
    extra = os.environ.get("FIBTUI_WORKER_MEMORY_MB")
    if not extra or os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        import resource

        with open("/proc/self/status", encoding="ascii") as fh:
            vm_kib = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
        limit = vm_kib * 1024 + int(float(extra) * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError, StopIteration) as exc:
        print(f"fibtui worker: FIBTUI_WORKER_MEMORY_MB not applied: {exc}", file=sys.stderr)


def _warm_cupti() -> None:
    """Pay for the process's first CUPTI session before saying ready. On the H200 hosts it took
    4.5-6 s of CPU (scripts/device/probe_cupti.py; later sessions take milliseconds), so a worker
    started ahead of time (watch mode) answers its first gate without it. GPU workers only;
    ``FIBTUI_WARM_CUPTI=0`` leaves it to the first job."""
    if os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("FIBTUI_WARM_CUPTI", "1") == "0":
        return
    try:
        import torch

        if not torch.cuda.is_available():
            return
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]):
            pass
    except Exception as exc:  # noqa: BLE001 - the first job pays for it instead
        print(f"fibtui worker: CUPTI warm-up skipped: {type(exc).__name__}: {exc}", file=sys.stderr)


def _remove_scratch() -> None:
    """Remove the scratch folder the runner made for this worker (``FIBTUI_WORKER_SCRATCH``, its
    current folder and build folder). The runner removes it too when it stops the worker; the
    worker does it itself for the runner that was killed before it could."""
    import shutil
    import time

    scratch = os.environ.get(wire.SCRATCH_ENV, "")
    if not os.path.basename(scratch).startswith(wire.SCRATCH_PREFIX):
        return
    # the main thread may still be writing into it (a build, bytecode) while this runs: try again
    # until it is gone, for up to a few seconds
    for _ in range(40):
        shutil.rmtree(scratch, ignore_errors=True)
        if not os.path.lexists(scratch):
            return
        time.sleep(0.05)


def _runner_pid() -> int:
    """The runner that started this worker: named by it (``FIBTUI_RUNNER_PID``), so a worker whose
    runner was killed while it was starting sees that at once; else the parent process."""
    try:
        return int(os.environ[wire.RUNNER_PID_ENV])
    except (KeyError, ValueError):
        return os.getppid()


#: whom this worker belongs to: (pid, is it the parent, a pidfd of it or None). The parent that
#: started it at first; the run that adopted it after an ``adopt`` (one tuple, swapped at once).
_owner: tuple[int, bool, int | None] = (0, True, None)


def _owner_alive() -> bool:
    pid, is_parent, pidfd = _owner
    if is_parent:
        return os.getppid() == pid
    if pidfd is not None:  # readable once that very process has ended (a zombie included)
        import select

        return not select.select([pidfd], [], [], 0)[0]
    from fibtui.core.procs import process_alive

    return process_alive(pid)


def _orphan_watch() -> None:
    """Exit when the runner that owns this worker is gone (killed, say): a worker never
    outlives its runner, even while a kernel loops or sleeps (stdin's EOF would wait for it).
    Its scratch folder goes too, since a killed runner cannot remove it."""
    import threading
    import time

    global _owner
    _owner = (_runner_pid(), True, None)

    def watch() -> None:
        while _owner_alive():
            time.sleep(0.5)
        _remove_scratch()
        os._exit(4)

    threading.Thread(target=watch, daemon=True, name="fibtui-orphan-watch").start()


def _adopt(req: wire.Adopt) -> wire.Adopted:
    """``adopt``: the run with pid ``runner_pid`` owns this worker now (the worker service started
    it and handed it over). The orphan watch follows that process, and the scratch folder is
    renamed after it (its name carries the owner's pid: fibtui.runners.local.sweep_stale_scratch)."""
    global _owner
    pid = req.runner_pid
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        raise ValueError(f"adopt needs the runner's pid, not {pid!r}")
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise ValueError(f"no process {pid} to be adopted by") from None
    except (AttributeError, OSError):
        pidfd = None
    _owner = (pid, False, pidfd)
    return wire.Adopted(os.getpid(), _rename_scratch(pid))


def _rename_scratch(owner: int) -> str:
    scratch = os.environ.get(wire.SCRATCH_ENV, "")
    prefix = wire.SCRATCH_PREFIX
    name = os.path.basename(scratch)
    if not name.startswith(prefix) or "-" not in name[len(prefix) :]:
        return scratch
    rest = name[len(prefix) :].split("-", 1)[1]
    new = os.path.join(os.path.dirname(scratch), f"{prefix}{owner}-{rest}")
    try:
        os.rename(scratch, new)
        os.chdir(new)
    except OSError:
        return scratch
    os.environ[wire.SCRATCH_ENV] = new
    return new


def _serve() -> int:
    from fibtui.worker import protocol, sidefx

    _orphan_watch()
    sidefx.become_subreaper()  # a kernel's grandchildren come back here to be ended
    ended = False  # stdin ended: nobody will ever send this worker another request
    protocol.claim_stdout()
    engine = None
    try:
        from fibtui.worker.engine import Engine
    except Exception as exc:  # noqa: BLE001 - torch/triton missing: say so and stop
        protocol.emit(
            wire.Error(f"worker cannot start: {type(exc).__name__}: {exc}", fatal=True).to_dict()
        )
        return 2
    try:  # import triton now, so a warm worker loads a Triton solution in milliseconds
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - python solutions do not need it
        pass
    _cap_memory()
    _warm_cupti()
    from fibtui.worker.engine import keep_torch_caches_out_of_tmp

    keep_torch_caches_out_of_tmp()
    fresh_state = _process_state()
    kept_reference = None  # the previous run's reference runner (release), for the next load
    runs = 0  # runs this worker has served (one load each)
    protocol.emit(wire.Ready(os.getpid()).to_dict())
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except json.JSONDecodeError as exc:
                protocol.emit(wire.Error(f"bad request: {exc}").to_dict())
                continue
            op = wire.op_of(req)
            try:
                if op == wire.Op.LOAD:
                    if engine is not None:
                        engine.close()
                    config = wire.EngineConfig.from_dict(req.get("config") or {})
                    engine = Engine(config, protocol.emit, kept_reference=kept_reference)
                    kept_reference = None
                    runs += 1
                    load = wire.Load.from_dict(req)  # KeyError: no definition or solutions
                    report = engine.load(load.definition, load.solutions, prefetch=load.prefetch)
                    protocol.emit(wire.Loaded(report, engine.environment).to_dict())
                elif op == wire.Op.JOB:
                    if engine is None:
                        protocol.emit(wire.Error("job before load").to_dict())
                        continue
                    protocol.emit(wire.JobStarted(wire.Job.from_dict(req).job_id).to_dict())
                    # the kernel's output kept to a cap, its leftover processes ended (sidefx)
                    with sidefx.JobCapture(os.getcwd()) as capture:
                        result = engine.run_job(req)
                    effects = capture.report()
                    if effects is not None:
                        result["side_effects"] = effects
                    protocol.emit(wire.Result(result).to_dict())
                    if result.get("restart"):
                        return 3  # the CUDA context is lost: the runner starts a fresh worker
                elif op == wire.Op.RELEASE:
                    said: dict[str, Any] = {"keep": True}
                    if engine is not None:
                        said = engine.release()
                        kept_reference = engine.kept_reference
                        engine = None
                    if said.get("keep"):
                        said = _fit_for_another_run(fresh_state, runs)
                    if not said.get("keep"):
                        kept_reference = None
                    released = wire.Released(runs, bool(said.get("keep")), said.get("why"))
                    protocol.emit(released.to_dict())
                elif op == wire.Op.ADOPT:
                    protocol.emit(_adopt(wire.Adopt.from_dict(req)).to_dict())
                elif op == wire.Op.PING:
                    protocol.emit(wire.bare_event(wire.Event.PONG))
                elif op == wire.Op.SHUTDOWN:
                    return 0
                else:
                    protocol.emit(wire.Error(f"unknown op {op!r}").to_dict())
            except Exception as exc:  # noqa: BLE001 - report and keep serving
                protocol.emit(
                    wire.Error(
                        f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:]
                    ).to_dict()
                )
        ended = True
        return 0
    finally:
        if engine is not None:
            engine.close()  # its temporary build folder
        if ended or not _owner_alive():
            _remove_scratch()  # the runner is gone, or will never talk to it again


#: runs one worker serves before it is replaced by a fresh one (``FIBTUI_WORKER_MAX_RUNS``)
DEFAULT_MAX_RUNS = 100


def _process_state() -> dict[str, Any]:
    """What a solution could change for the runs after its own, in this process: torch's global
    settings and the environment. A worker whose state differs from its fresh one is not kept."""
    state: dict[str, Any] = {"env": dict(os.environ)}
    try:
        import torch

        state["torch"] = {
            "default_dtype": str(torch.get_default_dtype()),
            "grad": torch.is_grad_enabled(),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "threads": torch.get_num_threads(),
            "cudnn": (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32),
            "matmul": (
                torch.backends.cuda.matmul.allow_tf32,
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            ),
        }
        default_device = getattr(torch, "get_default_device", None)
        if default_device is not None:
            state["torch"]["default_device"] = str(default_device())
    except Exception as exc:  # noqa: BLE001 - then nothing about torch can be compared
        state["torch"] = f"unreadable: {type(exc).__name__}"
    return state


def _fit_for_another_run(fresh: dict[str, Any], runs: int) -> dict[str, Any]:
    """``{"keep": True}``, or why this worker must not serve another run: a solution changed
    torch's global settings or the environment, or it served its share of runs."""
    try:
        limit = int(os.environ.get("FIBTUI_WORKER_MAX_RUNS", DEFAULT_MAX_RUNS))
    except ValueError:
        limit = DEFAULT_MAX_RUNS
    if runs >= limit:
        return {"keep": False, "why": f"it served {runs} runs (FIBTUI_WORKER_MAX_RUNS {limit})"}
    now = _process_state()
    if now.get("torch") != fresh.get("torch"):
        changed = sorted(
            k
            for k in set(now["torch"]) | set(fresh["torch"])
            if isinstance(now["torch"], dict)
            and isinstance(fresh["torch"], dict)
            and now["torch"].get(k) != fresh["torch"].get(k)
        )
        return {"keep": False, "why": f"torch's global settings changed: {', '.join(changed)}"}
    env_now, env_fresh = now["env"], fresh["env"]
    changed = sorted(k for k in set(env_now) | set(env_fresh) if env_now.get(k) != env_fresh.get(k))
    changed = [k for k in changed if k not in _OWN_ENV]
    if changed:
        return {"keep": False, "why": f"the environment changed: {', '.join(changed[:5])}"}
    return {"keep": True}


#: variables this worker itself changes while it serves (adopt renames its scratch folder)
_OWN_ENV = (wire.SCRATCH_ENV,)


def _exit_now(code: int) -> None:
    """End a worker that has finished serving without the interpreter's teardown (with torch and
    triton loaded it took 0.77 s on the CPU test machine, and the run's verdict waits for its
    workers to end). Nothing is left to write: every event was flushed as it was sent
    (protocol.emit), the build threads were joined by ``load``, the engine removed its build
    folder."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _run(path: str) -> int:
    from fibtui.worker import protocol
    from fibtui.worker.engine import execute

    protocol.claim_stdout()
    with open(path, encoding="utf-8") as fh:
        request = json.load(fh)
    out = execute(request, protocol.emit)
    # the Modal container's parent process assembles the slice's result from these events
    protocol.emit(wire.Done(out["poisoned"], out["timing_kind"]).to_dict())
    return 3 if out["poisoned"] else 0


def _profile(path: str) -> int:
    """For ncu --profile-from-start off: per workload, warm up, then the profiled calls inside
    cudaProfilerStart/Stop (one range per workload, in request order)."""
    import torch

    from fibtui.worker.engine import Engine
    from fibtui.worker.inputs import seed_for

    with open(path, encoding="utf-8") as fh:
        request = json.load(fh)
    engine = Engine(wire.EngineConfig.from_dict(request.get("config") or {}))
    try:
        report = engine.load(request["definition"], request["solutions"])
        sid = request["solutions"][0]["id"]
        if not report[sid]["ok"]:
            print(f"{report[sid]['status']}: {report[sid]['error']}", file=sys.stderr)
            return 2
        sol = engine.solutions[sid]
        assert engine.maker is not None
        workloads = request.get("workloads") or [request["workload"]]
        warmup = int(request.get("warmup_calls", 3))
        calls = int(request.get("profiled_calls", 1))
        for workload in workloads:
            inputs = engine.maker.make(
                workload, seed_for(workload["uuid"], 1000, engine.config.seed)
            )
            outs = engine.maker.allocate_outputs(workload, poison=False)
            with torch.no_grad():
                for _ in range(warmup):
                    sol.fn(*inputs, *outs) if sol.dps else sol.fn(*inputs)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStart()
                for _ in range(calls):
                    sol.fn(*inputs, *outs) if sol.dps else sol.fn(*inputs)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
            print(f"profiled {workload['uuid']} axes={workload.get('axes')}", file=sys.stderr)
        return 0
    finally:
        engine.close()  # its temporary build folder


def _host(path: str) -> int:
    """The host view: per workload, warm-up calls, then ``calls`` calls under torch.profiler with
    CPU and (on a GPU) CUDA activity, each call inside a ``fibtui::call`` range. Prints one JSON
    object: per call the host wall time, the device kernels (name, start, duration) and the CPU ops."""
    import time

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from fibtui.worker import protocol
    from fibtui.worker.engine import Engine
    from fibtui.worker.inputs import seed_for

    protocol.claim_stdout()
    with open(path, encoding="utf-8") as fh:
        request = json.load(fh)
    engine = Engine(wire.EngineConfig.from_dict(request.get("config") or {}))
    try:
        report = engine.load(request["definition"], request["solutions"])
        sid = request["solutions"][0]["id"]
        if not report[sid]["ok"]:
            protocol.emit(wire.Error(f"{report[sid]['status']}: {report[sid]['error']}").to_dict())
            return 2
        sol = engine.solutions[sid]
        maker = engine.maker
        assert maker is not None  # load made it
        cuda = engine.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        out = []
        for workload in request.get("workloads") or []:
            inputs = maker.make(workload, seed_for(workload["uuid"], 1000, engine.config.seed))
            outs = maker.allocate_outputs(workload, poison=False)
            args = [*inputs, *outs] if sol.dps else inputs
            call = functools.partial(sol.fn, *args)

            with torch.no_grad():
                for _ in range(int(request.get("warmup_calls", 3))):
                    call()
                if cuda:
                    torch.cuda.synchronize()
                walls = []
                with profile(activities=activities) as prof:
                    for _ in range(int(request.get("calls", 5))):
                        t0 = time.perf_counter()
                        with record_function("fibtui::call"):
                            call()
                            if cuda:
                                torch.cuda.synchronize()
                        walls.append((time.perf_counter() - t0) * 1e6)
            calls, kernels, cpu_ops = [], [], []
            for e in prof.profiler.kineto_results.events():
                name = e.name()
                item = {"name": name, "start_ns": e.start_ns(), "dur_ns": e.duration_ns()}
                if e.device_type() == torch.autograd.DeviceType.CUDA:
                    kernels.append(item)
                elif name == "fibtui::call":
                    calls.append(item)
                elif not name.startswith(("cudaDeviceSynchronize", "cudaStreamSynchronize")):
                    cpu_ops.append(item)
            out.append(
                {
                    "uuid": workload["uuid"],
                    "axes": workload.get("axes"),
                    "host_wall_us": walls,
                    "calls": sorted(calls, key=lambda c: c["start_ns"]),
                    "kernels": kernels,
                    "cpu_ops": cpu_ops[:2000],
                }
            )
        protocol.emit(wire.HostView(str(engine.device), engine.environment, out).to_dict())
        return 0
    finally:
        engine.close()  # its temporary build folder


def _buildcheck(path: str) -> int:
    """Build (import, or compile) each solution of the request, without a definition or inputs:
    ``fibtui check --deep``. Prints one ``buildcheck`` event: per solution ok, or its status
    (COMPILE_ERROR with file:line, UNSUPPORTED_HERE with what this machine lacks) and error."""
    import tempfile
    import time
    from pathlib import Path

    from fibtui.worker import protocol
    from fibtui.worker.build import BuildError, prepare

    protocol.claim_stdout()
    with open(path, encoding="utf-8") as fh:
        request = json.load(fh)
    device_type = str(request.get("device_type") or "cpu")
    cache = request.get("build_cache_dir")
    results = {}
    with tempfile.TemporaryDirectory(prefix="fibtui-buildcheck-") as work:
        for sol in request.get("solutions") or []:
            t0 = time.perf_counter()
            try:
                built = prepare(
                    sol["id"],
                    sol,
                    Path(work),
                    device_type=device_type,
                    cache_root=Path(cache) if cache else None,
                ).run()
                results[sol["id"]] = {
                    "ok": True,
                    "builder": built.meta.get("builder"),
                    "cached": built.meta.get("cached"),
                    "build_s": time.perf_counter() - t0,
                }
            except BuildError as exc:
                results[sol["id"]] = {
                    "ok": False,
                    "status": exc.status,
                    "error": str(exc),
                    "where": exc.where,
                }
    protocol.emit(wire.BuildCheck(results).to_dict())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fibtui.worker")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("serve")
    r = sub.add_parser("run")
    r.add_argument("--request", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--request", required=True)
    h = sub.add_parser("host")
    h.add_argument("--request", required=True)
    b = sub.add_parser("buildcheck")
    b.add_argument("--request", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "buildcheck":
        return _buildcheck(args.request)
    if args.cmd == "serve":
        _exit_now(_serve())
    if args.cmd == "run":
        return _run(args.request)
    if args.cmd == "host":
        return _host(args.request)
    return _profile(args.request)


if __name__ == "__main__":
    raise SystemExit(main())
