"""The worker's wire: every message between a runner, the worker service and a worker, named once.

Three seams speak JSON lines:

- a runner (or the worker service) and ``python -m fibtui.worker serve``: requests (:class:`Op`)
  on the worker's stdin, events (:class:`Event`) on its private stdout (fibtui.worker.protocol);
  ``run``, ``host`` and ``buildcheck`` print events of the same kind;
- a client and the worker service (fibtui.runners.service): one request (:class:`ServiceOp`, with
  :data:`PROTOCOL`) and one reply per connection;
- a Modal container and its runner: progress events (the same :class:`Event` names).

Each message that carries fields is a dataclass here, whose ``to_dict`` is the JSON object the
code has always sent (the same keys, in the same order: the bytes on a pipe, on the socket and in
a run's journal do not change) and whose ``from_dict`` reads one back. The run's engine settings,
:class:`EngineConfig`, are here too: the runner writes them (fibtui.runners.session), the worker
reads them.

Standard library only: the worker service imports it without torch.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any

#: bumped when a request or a reply of the worker service changes shape: a client never talks
#: to a service of another
PROTOCOL = 2

#: the key naming a request's op, and an event's name
OP = "op"
EVENT = "event"

#: a worker's scratch folder (its current folder, removed with it) is named
#: ``<SCRATCH_PREFIX><owner pid>-<random>``: whoever sweeps stale ones reads its owner from it
SCRATCH_PREFIX = "fibtui-worker-cwd-"
#: the environment a runner starts a worker with: its scratch folder, and the runner's pid (the
#: worker's owner until an ``adopt``)
SCRATCH_ENV = "FIBTUI_WORKER_SCRATCH"
RUNNER_PID_ENV = "FIBTUI_RUNNER_PID"


class Op(enum.StrEnum):
    """Requests to a ``serve`` worker (its stdin)."""

    LOAD = "load"
    JOB = "job"
    ADOPT = "adopt"
    RELEASE = "release"
    PING = "ping"
    SHUTDOWN = "shutdown"


class ServiceOp(enum.StrEnum):
    """Requests to the worker service (its socket)."""

    HELLO = "hello"
    TAKE = "take"
    WARM = "warm"
    RETURN = "return"
    STATUS = "status"
    STOP = "stop"
    EXIT_STATUS = "exit_status"


#: the requests a service answers, in the order its refusal lists them
SERVICE_OPS = tuple(op.value for op in ServiceOp)
#: the requests that are work (they keep an idle service alive); ``status`` and ``hello`` are
#: not: polling ``fibtui workers status`` never keeps a service alive
WORK_OPS = frozenset({ServiceOp.TAKE.value, ServiceOp.WARM.value, ServiceOp.RETURN.value})


class Event(enum.StrEnum):
    """Events: from a worker, from a Modal container (progress), and the runner's own."""

    READY = "ready"
    LOADED = "loaded"
    JOB_STARTED = "job_started"
    #: which solution is in a call (``report_calls``): for the Modal container's watchdog
    CALLING = "calling"
    RESULT = "result"
    RELEASED = "released"
    ADOPTED = "adopted"
    PONG = "pong"
    ERROR = "error"
    #: ``run``'s last event: the slice is over
    DONE = "done"
    HOST_VIEW = "host_view"
    BUILDCHECK = "buildcheck"
    #: a Modal container took a slice (progress only)
    SLICE_STARTED = "slice_started"
    #: the runner's own: a line of the worker's stdout that is not JSON
    GARBAGE = "garbage"


def op_of(message: Any) -> str | None:
    """The op a request names (None for anything but a JSON object)."""
    return message.get(OP) if isinstance(message, dict) else None


def event_of(message: Any) -> str | None:
    """The event a message names (None for anything but a JSON object: a timeout, an end)."""
    return message.get(EVENT) if isinstance(message, dict) else None


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# -- the run's engine settings ---------------------------------------------------------------------


@dataclass
class TimingPlan:
    """How a solution is timed: blocks of calls, the median per block (docs/measurement.md)."""

    calls_per_block: int = 20
    blocks: int = 6  # per solution
    warmup_calls: int = 3
    l2_policy: str = "cold"  # cold | warm
    #: rotate the inputs between calls, time a probe call on unseen inputs, keep the last call of
    #: each block for the worker to check (docs/measurement.md, "A gate no candidate can game");
    #: off only to measure what the checks cost (a run without them never promotes)
    checks: bool = True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls_per_block": self.calls_per_block,
            "blocks": self.blocks,
            "warmup_calls": self.warmup_calls,
            "l2_policy": self.l2_policy,
        }
        if not self.checks:
            out["checks"] = False
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any] | None) -> TimingPlan:
        return cls(**(obj or {}))


#: the keys of :class:`EngineConfig` a runner has always written, in its order; the others are
#: written only when they differ from their default (``timing`` and ``official`` come after
#: ``plan``, as the runner wrote them)
_CONFIG_ALWAYS = (
    "backend",
    "device",
    "correctness_trials",
    "atol",
    "rtol",
    "matched_ratio",
    "evaluator",
    "plan",
)
_CONFIG_AFTER_PLAN = ("timing", "official")
_CONFIG_PATHS = ("cache_dir", "build_cache_dir", "dataset_root")


@dataclass
class EngineConfig:
    """What the worker's engine does with a run: its backend and device, the correctness checks
    and the timing plan, and where its caches are. Written by the runner
    (fibtui.runners.session.engine_config; kept in the run's header as ``settings.engine``), read
    by the worker from ``load``'s (or a request file's) ``config``."""

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
    #: the workspace's ``reference/`` folder: a CUTLASS checkout there serves builds that
    #: include CUTLASS/CuTe headers (fibtui.core.toolchain.find_cutlass)
    reference_root: str | None = None

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> EngineConfig:
        """Keys it does not know (a config of another fibtui) are let be."""
        plan = TimingPlan.from_dict(obj.get("plan"))
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__ and k != "plan"}
        return cls(plan=plan, **known)

    #: what the worker's callers have always called it
    from_json = from_dict

    def to_dict(self) -> dict[str, Any]:
        """The config as a runner has always written it: the keys of :data:`_CONFIG_ALWAYS` and
        the cache paths always, every other key only when it is not its default."""
        defaults = EngineConfig()
        out: dict[str, Any] = {}

        def maybe(name: str) -> None:
            value = getattr(self, name)
            if value != getattr(defaults, name):
                out[name] = value

        for name in _CONFIG_ALWAYS:
            out[name] = self.plan.to_dict() if name == "plan" else getattr(self, name)
        for name in _CONFIG_AFTER_PLAN:
            maybe(name)
        for name in _CONFIG_PATHS:
            out[name] = getattr(self, name)
        done = set(_CONFIG_ALWAYS) | set(_CONFIG_AFTER_PLAN) | set(_CONFIG_PATHS)
        # set by whoever sends it on: the run (reference_root), the slot (workdir), Modal
        for name in ("reference_root", "workdir", "report_calls"):
            maybe(name)
            done.add(name)
        for f in fields(self):
            if f.name not in done:
                maybe(f.name)
        return out

    @property
    def timing_kind(self) -> str:
        return (
            "cpu-interpreter" if self.backend == "interpreter" or self.device == "cpu" else "cupti"
        )


# -- requests to a worker ------------------------------------------------------------------------


@dataclass
class Load:
    """``load``: the run's engine config (an :class:`EngineConfig` as JSON: the runner sends on
    what its run's header keeps, byte for byte), definition and solutions; ``prefetch``:
    workloads whose reference outputs are computed while CUDA/C++ builds compile."""

    config: dict[str, Any]
    definition: dict[str, Any]
    solutions: list[dict[str, Any]]
    prefetch: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            OP: Op.LOAD.value,
            "config": self.config,
            "definition": self.definition,
            "solutions": self.solutions,
        }
        if self.prefetch is not None:
            out["prefetch"] = self.prefetch
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Load:
        return cls(
            obj.get("config") or {}, obj["definition"], obj["solutions"], obj.get("prefetch")
        )


@dataclass
class Job:
    """``job``: one workload (a repeat of it) for the named solutions, timed together."""

    job_id: Any
    workload: dict[str, Any]
    repeat: int
    solutions: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            OP: Op.JOB.value,
            "job_id": self.job_id,
            "workload": self.workload,
            "repeat": self.repeat,
            "solutions": self.solutions,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Job:
        solutions = obj.get("solutions")
        return cls(
            obj.get("job_id"),
            obj.get("workload") or {},
            obj.get("repeat", 0),
            list(solutions) if isinstance(solutions, list) else [],
        )


@dataclass
class Adopt:
    """``adopt``: the process ``runner_pid`` owns this worker from now on."""

    runner_pid: Any

    def to_dict(self) -> dict[str, Any]:
        return {OP: Op.ADOPT.value, "runner_pid": self.runner_pid}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Adopt:
        return cls(obj.get("runner_pid"))


def bare(op: Op | ServiceOp) -> dict[str, Any]:
    """A request without fields: ``release``, ``ping``, ``shutdown``; ``hello``, ``status``,
    ``stop``."""
    return {OP: op.value}


# -- events of a worker ----------------------------------------------------------------------------


@dataclass
class Ready:
    pid: int

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.READY.value, "pid": self.pid}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Ready:
        return cls(_int(obj.get("pid")))


@dataclass
class Loaded:
    """Per solution id its build report; the worker's environment."""

    solutions: dict[str, Any]
    environment: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            EVENT: Event.LOADED.value,
            "solutions": self.solutions,
            "environment": self.environment,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Loaded:
        return cls(obj.get("solutions") or {}, obj.get("environment") or {})


@dataclass
class JobStarted:
    job_id: Any

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.JOB_STARTED.value, "job_id": self.job_id}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> JobStarted:
        return cls(obj.get("job_id"))


@dataclass
class Calling:
    """Which solution is in a call (``sid``; None: the call cannot be pinned on one), in which
    ``phase`` (check | judge | timing); ``sids``: the solutions timed together (timing)."""

    job_id: Any
    phase: str
    sid: str | None = None
    sids: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {EVENT: Event.CALLING.value, "job_id": self.job_id}
        if self.phase == "judge":  # the order each phase has always been written in
            out |= {"phase": self.phase, "sid": self.sid}
            return out
        out["sid"] = self.sid
        if self.sids is not None:
            out["sids"] = self.sids
        out["phase"] = self.phase
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Calling:
        return cls(obj.get("job_id"), str(obj.get("phase")), obj.get("sid"), obj.get("sids"))


@dataclass
class Result:
    """A job's results (``job_id``, ``uuid``, ``repeat``, ``results``: one per solution, and
    what the job says besides: ``restart``, ``side_effects``...): the worker's result, as the
    journal records it (fibtui.runners.journaling)."""

    job: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.RESULT.value, **self.job}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Result:
        return cls({k: v for k, v in obj.items() if k != EVENT})


@dataclass
class Released:
    """``release`` answered: ``keep`` (fit for another run), else ``why`` not."""

    runs: int
    keep: bool
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {EVENT: Event.RELEASED.value, "runs": self.runs, "keep": self.keep}
        if self.why is not None:
            out["why"] = self.why
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Released:
        why = obj.get("why")
        return cls(_int(obj.get("runs")), obj.get("keep") is True, why if why is None else str(why))


@dataclass
class Adopted:
    """``adopt`` answered: the worker's pid and its scratch folder's new path."""

    pid: int
    scratch: str

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.ADOPTED.value, "pid": self.pid, "scratch": self.scratch}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Adopted:
        scratch = obj.get("scratch")
        return cls(_int(obj.get("pid")), scratch if isinstance(scratch, str) else "")


@dataclass
class Error:
    """Something went wrong (a bad request, a raise while serving); ``fatal``: the worker cannot
    start at all."""

    message: str
    fatal: bool = False
    traceback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {EVENT: Event.ERROR.value}
        if self.fatal:
            out["fatal"] = True
        out["message"] = self.message
        if self.traceback is not None:
            out["traceback"] = self.traceback
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Error:
        tb = obj.get("traceback")
        return cls(str(obj.get("message")), obj.get("fatal") is True, tb if tb is None else str(tb))


@dataclass
class Done:
    """``run``'s last event: did a job lose the CUDA context, and how it timed."""

    poisoned: bool
    timing_kind: str

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.DONE.value, "poisoned": self.poisoned, "timing_kind": self.timing_kind}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Done:
        return cls(obj.get("poisoned") is True, str(obj.get("timing_kind")))


@dataclass
class HostView:
    """``host``'s one event: per workload its calls, device kernels and CPU ops."""

    device: str
    environment: dict[str, Any]
    workloads: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            EVENT: Event.HOST_VIEW.value,
            "device": self.device,
            "environment": self.environment,
            "workloads": self.workloads,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> HostView:
        return cls(str(obj.get("device")), obj.get("environment") or {}, obj.get("workloads") or [])


@dataclass
class BuildCheck:
    """``buildcheck``'s one event: per solution id, ok or why not."""

    results: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.BUILDCHECK.value, "results": self.results}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> BuildCheck:
        return cls(obj.get("results") or {})


@dataclass
class Garbage:
    """The runner's own: a line the worker printed that is not JSON (its first 200 bytes)."""

    text: str

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.GARBAGE.value, "text": self.text}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> Garbage:
        return cls(str(obj.get("text")))


def bare_event(event: Event) -> dict[str, Any]:
    """An event without fields: a worker's ``pong``; a Modal container's ``slice_started`` and
    ``loaded`` (its progress)."""
    return {EVENT: event.value}


# -- a Modal container's progress ------------------------------------------------------------------


@dataclass
class SliceResult:
    """A job's result as a container's progress says it (the job under ``job``)."""

    job: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {EVENT: Event.RESULT.value, "job": self.job}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> SliceResult:
        job = obj.get("job")
        return cls(job if isinstance(job, dict) else {})


# -- requests to the worker service -----------------------------------------------------------------


@dataclass
class SlotRequest:
    """``take``, ``warm`` or ``return``: a worker for a pool slot (its device, whether it is
    Triton's interpreter, the environment it starts with). ``return`` names the worker given
    back (``pid``) and the runs it served."""

    op: ServiceOp
    device: str
    interpreter: bool
    env: dict[str, str]
    wait_s: float = 0.0
    pid: int | None = None
    runs: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            OP: self.op.value,
            "device": self.device,
            "interpreter": self.interpreter,
            "env": self.env,
            "wait_s": self.wait_s,
        }
        if self.pid is not None:
            out["pid"] = self.pid
        if self.runs is not None:
            out["runs"] = self.runs
        return out

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> SlotRequest:
        # the service checks what each field holds (check_device, check_env, _take_back)
        return cls(
            ServiceOp(obj[OP]),
            obj["device"],
            obj["interpreter"],
            obj["env"],
            obj.get("wait_s", 0.0),
            obj.get("pid"),
            obj.get("runs"),
        )


@dataclass
class ExitStatus:
    """``exit_status``: how the worker ``pid`` the service handed over ended."""

    pid: int

    def to_dict(self) -> dict[str, Any]:
        return {OP: ServiceOp.EXIT_STATUS.value, "pid": self.pid}

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> ExitStatus:
        return cls(obj["pid"])  # the service checks it is an int


@dataclass
class HandOver:
    """``take``'s reply with a worker: its pipes (and a pidfd, when ``pidfd``) ride along."""

    pid: int
    scratch: str
    key: str
    device: str
    pidfd: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True,
            "pid": self.pid,
            "scratch": self.scratch,
            "key": self.key,
            "device": self.device,
            "pidfd": self.pidfd,
        }

    @classmethod
    def from_dict(cls, obj: dict[str, Any]) -> HandOver:
        # the client checks pid and scratch (fibtui.runners.service.client.adopt)
        return cls(
            obj["pid"],
            obj["scratch"],
            str(obj.get("key")),
            str(obj.get("device")),
            bool(obj.get("pidfd")),
        )
