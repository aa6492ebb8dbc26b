"""The Modal backend: a sweep split into slices across N B200 containers.

- **Settings** come from ``[modal]`` in the workspace's fibtui.toml (:class:`ModalSettings`):
  ``gpu`` (default B200), ``image`` or ``image_tag`` (default the contest's evaluation image
  ``flashinfer/flashinfer-ci-cu132:20260401-2c675fb``), ``volume`` (default ``fibtui-datasets``),
  ``timeout_s`` (per call, default 1800), ``startup_timeout_s`` (900), ``job_timeout_s`` (per job,
  300), ``cpu`` (8), ``memory_mb`` (32768), ``confirm_above_usd`` (10),
  ``price_per_gpu_hour_usd`` (default 6.25, Modal's B200
  list price when this was written), ``workers`` (default 4), ``container_overhead_s`` (default 90),
  ``default_job_seconds`` (default 2.0), ``max_retries`` (default 2).
- **Slices.** A job group is one workload and repeat with all its solutions (the paired baseline
  and candidate of a workload are never split); groups are dealt to N slices, one container each,
  balancing the number of jobs.
- **The plan** (:func:`plan_modal`) needs no network and no modal package: containers, jobs per
  container, GPU, image, volume (what the dataset needs there, and the ``modal volume put``
  commands), estimated GPU-seconds (the median wall time per job of this definition's past GPU runs
  in optimize_ops/runs, else a stated default) and cost. The TUI's confirmation dialog shows
  :meth:`ModalPlan.lines`; ``fibtui run --backend modal --plan [--json]`` prints the same.
- **The run** (:class:`ModalRunner`): slices are spawned as Modal function calls, never more in
  flight than containers (so none waits in Modal's queue); each call returns structured results
  (never console text) that become the same JobResults, events and journal lines as a local run
  (:mod:`fibtui.runners.journaling`). Modal's own timeouts bound a call (``timeout_s``, counted from
  when it starts to run; ``startup_timeout_s``); the client does not time calls itself. Inside the
  container a per-job watchdog (``job_timeout_s``, ``--timeout``: the local runner's job timeout)
  ends a hung job: its stuck solution is TIMEOUT, and a container whose job hung or whose kernel lost
  the CUDA context stops taking inputs (``modal.experimental.stop_fetching_inputs``), so Modal never
  gives it another slice; the jobs it did not run go to a fresh container without counting an
  attempt. A failed call (a container lost, an exception) is retried alone up to ``max_retries``
  times (a call past Modal's timeout is not: its work is split at once); then its groups are
  retried one per container, then each solution alone, so one bad kernel cannot sink a whole
  slice. Results with an infrastructure status are retried alone as in the local runner. Cancel
  stops every call in flight and launches no more, also while the image builds. Modal's own output
  (image build and pull, logs) goes to the run folder's ``modal.log`` and to the progress lines;
  the app's and the image's ids to ``modal.json``.
- **Reservations and the cost guard**: ``cpu`` (8) and ``memory_mb`` (32768) per container (Modal's
  default is 0.125 CPU and 128 MiB); the plan shows the worst case (every job hangs until its job
  timeout, each in a fresh container) beside the estimate, and a run whose worst case costs more
  than ``confirm_above_usd`` (10) starts only with ``--yes`` (the TUI always asks, with the plan).

modal is imported only when a run goes to Modal (or runs the function body in-process); the plan,
the slicing and this module's import never touch it. No token is ever read, printed or recorded:
the modal client reads its own configuration.
"""

from __future__ import annotations

import math
import os
import queue
import shlex
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fibtui.core.errors import FibError, InputError
from fibtui.core.runs import (
    RunHeader,
    RunRecord,
    history_seconds_per_job,
    now_iso,
    release_lock,
    take_lock,
)
from fibtui.core.settings import get_setting, settings_path
from fibtui.core.status import INFRA_STATUSES
from fibtui.runners.events import (
    EventSink,
    JobStarted,
    JobStarting,
    LogLine,
    RunStarted,
    WorkerRestarted,
)
from fibtui.runners.journaling import (
    JobRecorder,
    SolutionIds,
    pending_groups,
    report_builds,
    take_job_fields,
)
from fibtui.worker.wire import Event, event_of

if TYPE_CHECKING:
    from fibtui.core.dataset import Definition
    from fibtui.core.workspace import Workspace
    from fibtui.runners.session import RunOptions

IMAGE_REPO = "flashinfer/flashinfer-ci-cu132"
#: The contest's evaluation image (the starter kit's EVALUATION.md).
IMAGE_TAG = "20260401-2c675fb"
MOUNT_PATH = "/data"
CONTAINER_CACHE_DIR = "/tmp/fibtui-cache/reference"
#: compiled CUDA/C++ builds inside a container (a warm container reuses them across slices)
CONTAINER_BUILD_DIR = "/tmp/fibtui-cache/builds"
#: the key of a live event in the runner's queue of outcomes (slice numbers are positive)
_PROGRESS = -1


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


@dataclass
class ModalSettings:
    gpu: str = "B200"
    image: str = f"{IMAGE_REPO}:{IMAGE_TAG}"
    volume: str = "fibtui-datasets"
    #: folder of the dataset inside the volume (default: the dataset folder's name)
    volume_dir: str | None = None
    #: Modal's execution timeout of one call (a slice), counted by Modal from when it starts to run
    timeout_s: float = 1800.0
    #: Modal's startup timeout of a container (pulling the image, importing); queue time is neither
    startup_timeout_s: float = 900.0
    #: the per-job watchdog inside the container: the local runner's job timeout (``--timeout``)
    job_timeout_s: float = 300.0
    #: the build/load watchdog inside the container: the worker must have built the solutions and
    #: loaded (torch, the CUDA context, the definition) within this many seconds of the call's start
    load_timeout_s: float = 600.0
    #: Modal's ``scaledown_window``: how long an idle container waits for another input (billed)
    scaledown_window_s: float = 10.0
    #: what each container reserves (Modal's default is 0.125 CPU and 128 MiB: too thin to compile
    #: Triton kernels or to launch them without gaps)
    cpu: float = 8.0
    memory_mb: int = 32768
    #: ``fibtui run --backend modal`` asks for ``--yes`` (the TUI for a confirmation) when the worst
    #: case costs more than this
    confirm_above_usd: float = 10.0
    #: Modal's list prices (docs/modal.md, "Prices"): the GPU, each reserved CPU core, each GiB of
    #: reserved memory; a container is billed all three for every second it is up
    price_per_gpu_hour_usd: float = 6.25
    price_per_cpu_core_hour_usd: float = 0.0472
    price_per_gib_hour_usd: float = 0.008
    #: calls the runner may make beyond the first slices (retries, requeued jobs after a fault,
    #: the isolation cascade); past them the rest is recorded INFRA_ERROR, never launched
    max_extra_calls: int = 8
    workers: int = 4
    container_overhead_s: float = 90.0
    default_job_seconds: float = 2.0
    max_retries: int = 2
    app_name: str = "fibtui"
    add_python: str | None = None
    pip: list[str] = field(default_factory=list)
    #: which keys came from fibtui.toml (the rest are defaults)
    from_file: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ModalSettings:
        known = {k: v for k, v in (obj or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


_STR_KEYS = ("gpu", "image", "image_tag", "volume", "volume_dir", "app_name", "add_python")
_NUM_KEYS = (
    "timeout_s",
    "timeout",
    "startup_timeout_s",
    "price_per_gpu_hour_usd",
    "container_overhead_s",
    "default_job_seconds",
    "job_timeout_s",
    "load_timeout_s",
    "scaledown_window_s",
    "price_per_cpu_core_hour_usd",
    "price_per_gib_hour_usd",
    "cpu",
    "confirm_above_usd",
)
_INT_KEYS = ("workers", "max_retries", "memory_mb", "max_extra_calls")


def modal_settings(workspace_root: str | Path) -> ModalSettings:
    """``[modal]`` of the workspace's fibtui.toml over the defaults; a wrong type is an InputError
    naming the file and the field."""
    path = settings_path(workspace_root)
    table = get_setting(workspace_root, "modal", None)
    s = ModalSettings()
    if table is None:
        return s
    if not isinstance(table, dict):
        raise InputError(path, "expected a table", field="modal")
    for key, value in table.items():
        where = f"modal.{key}"
        if key in _STR_KEYS:
            if not isinstance(value, str) or not value.strip():
                raise InputError(path, f"expected a non-empty string, got {value!r}", field=where)
            value = value.strip()
            if key == "image_tag":
                if "image" not in table:
                    s.image = f"{IMAGE_REPO}:{value}"
            else:
                setattr(s, key, value)
        elif key in _NUM_KEYS:
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise InputError(
                    path, f"expected a non-negative number, got {value!r}", field=where
                )
            if key in ("timeout_s", "timeout") and value < 10:
                raise InputError(
                    path,
                    f"a per-call timeout under 10 s cannot start a container, got {value!r}",
                    field=where,
                )
            if key in ("job_timeout_s", "load_timeout_s", "cpu") and value <= 0:
                raise InputError(path, f"expected a positive number, got {value!r}", field=where)
            setattr(s, "timeout_s" if key == "timeout" else key, float(value))
        elif key in _INT_KEYS:
            least = {"workers": 1, "memory_mb": 128}.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(
                    path, f"expected a whole number >= {least}, got {value!r}", field=where
                )
            setattr(s, key, int(value))
        elif key == "pip":
            if not isinstance(value, list) or not all(
                isinstance(v, str) and v.strip() for v in value
            ):
                raise InputError(path, "expected a list of package specs", field=where)
            s.pip = [v.strip() for v in value]
        else:
            continue
        s.from_file.append(key)
    return s


# --------------------------------------------------------------------------------------------
# Slices
# --------------------------------------------------------------------------------------------


@dataclass
class Task:
    """One job group: a workload and repeat with the solutions timed together."""

    uuid: str
    repeat: int
    sids: list[str]
    attempt: int = 1


@dataclass
class Slice:
    """The groups one container runs in one call."""

    number: int
    tasks: list[Task]
    attempt: int = 1
    #: retried one group (or one solution) per container after repeated failures
    isolated: bool = False

    @property
    def jobs(self) -> int:
        return sum(len(t.sids) for t in self.tasks)


def make_slices(tasks: list[Task], workers: int, first_number: int = 1) -> list[Slice]:
    """Deal job groups to at most ``workers`` slices, largest first onto the lightest slice
    (a group is never split). Within a slice, groups keep their order."""
    if not tasks:
        return []
    n = max(1, min(int(workers), len(tasks)))
    order = sorted(range(len(tasks)), key=lambda i: -len(tasks[i].sids))
    loads = [0] * n
    members: list[list[int]] = [[] for _ in range(n)]
    for i in order:
        k = min(range(n), key=lambda j: (loads[j], j))
        members[k].append(i)
        loads[k] += len(tasks[i].sids)
    return [
        Slice(first_number + k, [tasks[i] for i in sorted(m)]) for k, m in enumerate(members) if m
    ]


# --------------------------------------------------------------------------------------------
# The plan (no network)
# --------------------------------------------------------------------------------------------


@dataclass
class VolumeFile:
    local: str
    remote: str
    size: int | None  # None: missing on this machine


@dataclass
class ModalPlan:
    definition: str
    gpu: str
    image: str
    app_name: str
    volume: str
    mount_path: str
    volume_dir: str
    containers: int
    jobs: int
    groups: int
    workloads: int
    repeats: int
    solutions: list[str]
    jobs_per_container: list[int]
    per_job_seconds: float
    per_job_source: str
    container_overhead_s: float
    estimated_gpu_seconds: float
    estimated_wall_seconds: float
    price_per_gpu_hour_usd: float
    estimated_cost_usd: float
    timeout_s: float
    #: the per-job watchdog inside each container
    job_timeout_s: float
    #: the build/load watchdog inside each container
    load_timeout_s: float
    #: Modal's execution timeout of each call (see :func:`call_timeout_s`)
    call_timeout_s: float
    #: Modal's startup timeout of a container
    startup_timeout_s: float
    scaledown_window_s: float
    #: the most calls the runner makes (first slices + [modal] max_extra_calls)
    max_calls: int
    #: what one container costs per hour: GPU + reserved CPU + reserved memory
    price_per_container_hour_usd: float
    #: every call the run may make runs to Modal's limits (:func:`worst_case_container_seconds`)
    worst_case_gpu_seconds: float
    worst_case_cost_usd: float
    confirm_above_usd: float
    cpu: float
    memory_mb: int
    volume_needed: bool
    volume_files: list[VolumeFile]
    upload_commands: list[str]
    credentials: str | None
    modal_installed: bool
    settings_from_file: list[str]
    notes: list[str] = field(default_factory=list)
    backend: str = "modal"

    @property
    def container_dataset_root(self) -> str:
        return f"{self.mount_path}/{self.volume_dir}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["volume_bytes"] = sum(f.size or 0 for f in self.volume_files)
        out["estimate_source"] = self.per_job_source
        out["container_dataset_root"] = self.container_dataset_root
        out["estimated_gpu_seconds"] = round(self.estimated_gpu_seconds, 1)
        out["estimated_wall_seconds"] = round(self.estimated_wall_seconds, 1)
        out["estimated_cost_usd"] = round(self.estimated_cost_usd, 4)
        out["worst_case_gpu_seconds"] = round(self.worst_case_gpu_seconds, 1)
        out["worst_case_cost_usd"] = round(self.worst_case_cost_usd, 4)
        out["worst_case_container_seconds"] = out["worst_case_gpu_seconds"]
        out["price_per_container_hour_usd"] = round(self.price_per_container_hour_usd, 4)
        out["needs_confirmation"] = self.needs_confirmation
        return out

    @property
    def needs_confirmation(self) -> bool:
        """The worst case costs more than ``[modal] confirm_above_usd``."""
        return self.worst_case_cost_usd > self.confirm_above_usd

    def lines(self) -> list[str]:
        """The plan in words, for the terminal and the TUI's confirmation dialog."""
        sols = ", ".join(self.solutions)
        out = [
            f"Modal plan for {self.definition}: {self.jobs} jobs ({self.workloads} workloads x {self.repeats} repeat(s) "
            f"x {len(self.solutions)} solution(s): {sols}) in {self.containers} container(s)",
            f"  GPU {self.gpu}, image {self.image}, app {self.app_name}",
            f"  jobs per container: {', '.join(str(n) for n in self.jobs_per_container) or '-'}",
        ]
        if self.volume_needed:
            size = _fmt_bytes(sum(f.size or 0 for f in self.volume_files))
            out.append(
                f"  volume {self.volume}: {len(self.volume_files)} safetensors file(s), {size}, "
                f"mounted at {self.container_dataset_root}; missing ones are uploaded before the run, or by hand:"
            )
            out.extend(f"    {c}" for c in self.upload_commands)
        else:
            out.append(
                f"  volume {self.volume}: not needed (these workloads have no safetensors inputs)"
            )
        out.append(
            f"  estimate: {self.per_job_seconds:.2f} s per job ({self.per_job_source}) + "
            f"{self.container_overhead_s:.0f} s start-up per container"
        )
        out.append(
            f"    = {self.estimated_gpu_seconds:.0f} container-seconds, about ${self.estimated_cost_usd:.2f} at "
            f"${self.price_per_container_hour_usd:.2f} per container-hour (GPU ${self.price_per_gpu_hour_usd:.2f} "
            f"+ {self.cpu:g} CPU + {self.memory_mb} MiB); wall time about {_fmt_duration(self.estimated_wall_seconds)}"
        )
        creds = {
            "env": "MODAL_TOKEN_ID/MODAL_TOKEN_SECRET in the environment",
            None: "none found (run `modal setup`)",
        }.get(self.credentials, self.credentials)
        out.append(
            f"  worst case (an upper bound): all {self.max_calls} call(s) the run may make ({self.containers} + "
            f"[modal] max_extra_calls {self.max_calls - self.containers}), each in a fresh container that takes its "
            f"{self.startup_timeout_s:.0f} s startup timeout, runs to its {self.call_timeout_s:.0f} s call timeout "
            f"(build/load {self.load_timeout_s:.0f} s + {self.job_timeout_s:.0f} s per job group) and idles "
            f"{self.scaledown_window_s:.0f} s = {self.worst_case_gpu_seconds:.0f} container-seconds, "
            f"about ${self.worst_case_cost_usd:.2f}"
            + (
                f" (above [modal] confirm_above_usd = ${self.confirm_above_usd:.2f}: asks first)"
                if self.needs_confirmation
                else ""
            )
        )
        out.append(f"  each container reserves {self.cpu:g} CPU and {self.memory_mb} MiB")
        out.append(
            f"  per-call timeout {self.timeout_s:.0f} s; Modal credentials: {creds}"
            + (
                ""
                if self.modal_installed
                else "; the modal package is not installed (pip install modal)"
            )
        )
        out.extend(f"  note: {n}" for n in self.notes)
        return out


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def _fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s // 60 % 60:02d} min"


def volume_files_for(
    dataset_root: Path, workloads: dict[str, dict[str, Any]], volume_dir: str
) -> list[VolumeFile]:
    """Every safetensors file the selected workloads read, with its place in the volume."""
    seen: dict[str, VolumeFile] = {}
    for wl in workloads.values():
        for spec in (wl.get("inputs") or {}).values():
            if not isinstance(spec, dict) or spec.get("type") != "safetensors":
                continue
            rel = str(spec.get("path") or "")
            if not rel or rel in seen:
                continue
            local = dataset_root / rel
            size = local.stat().st_size if local.is_file() else None
            seen[rel] = VolumeFile(
                str(local), f"/{volume_dir}/{Path(rel).as_posix().lstrip('/')}", size
            )
    return list(seen.values())


def upload_commands(
    volume: str, dataset_root: Path, files: list[VolumeFile], volume_dir: str
) -> list[str]:
    """``modal volume put`` per top folder of the blobs (``modal volume put`` uploads a folder
    recursively)."""
    tops = sorted(
        {
            Path(f.local).relative_to(dataset_root).parts[0]
            for f in files
            if Path(f.local).is_relative_to(dataset_root)
        }
    )
    cmds = []
    for top in tops:
        local = dataset_root / top
        remote = f"/{volume_dir}/{top}"
        # --force: a file already there (of another size, say) is replaced, as the runner's own upload does
        cmds.append(
            f"modal volume put --force {shlex.quote(volume)} {shlex.quote(str(local))} {shlex.quote(remote)}"
        )
    return cmds


#: seconds added to a call's Modal timeout beyond what its watchdogs allow (sending the result,
#: the child's kill and reaping): Modal's timeout is the backstop that holds if the watchdog fails
CALL_MARGIN_S = 30.0


def container_rate_usd_per_hour(settings: ModalSettings) -> float:
    """What one container costs per hour: the GPU, the reserved CPU cores and memory (Modal bills
    each for every second the container is up, whether used or not)."""
    gib = settings.memory_mb / 1024.0
    return (
        settings.price_per_gpu_hour_usd
        + settings.cpu * settings.price_per_cpu_core_hour_usd
        + gib * settings.price_per_gib_hour_usd
    )


def call_timeout_s(settings: ModalSettings, groups_per_call: int, job_timeout_s: float) -> float:
    """Modal's execution timeout of one call (the function's ``timeout``): what the container's
    watchdogs allow a call of ``groups_per_call`` job groups (the build/load timeout, then each
    group's job timeout, the watchdog's look interval and the kill), plus a margin; at most
    ``[modal] timeout_s``. Modal ends a call there whatever the container does."""
    from fibtui.worker.protocol import KILL_WAIT_S, WATCHDOG_INTERVAL_S

    watched = (
        settings.load_timeout_s
        + max(1, groups_per_call) * (job_timeout_s + WATCHDOG_INTERVAL_S + KILL_WAIT_S)
        + CALL_MARGIN_S
    )
    return float(max(10, math.ceil(min(settings.timeout_s, watched))))


def max_calls(first_slices: int, settings: ModalSettings) -> int:
    """Every call a run may make: its first slices and ``[modal] max_extra_calls`` more (the
    runner launches none past it)."""
    return first_slices + settings.max_extra_calls


def worst_case_container_seconds(
    calls: int, call_timeout: float, startup_timeout: float, scaledown_window: float
) -> float:
    """The container-seconds of a run in which every call the runner may make runs to Modal's
    limits: each in a container of its own that takes its whole startup timeout to start, runs to
    the call's timeout and then idles for the scale-down window. Modal enforces the first two
    (``startup_timeout``, ``timeout``) and the third (``scaledown_window``) whatever the
    container's code does, and the runner makes no more than ``calls`` calls: an upper bound."""
    return calls * (startup_timeout + call_timeout + scaledown_window)


def plan_modal(ws: Workspace, options: RunOptions) -> ModalPlan:
    """The plan of ``fibtui run --backend modal`` with these options; no network, no modal."""
    from fibtui.core import backends
    from fibtui.core.plan import resolve_run

    settings = modal_settings(ws.root)
    resolved = resolve_run(ws, options)
    names = [
        s.name for s in ([resolved.baseline] if resolved.baseline else []) + resolved.candidates
    ]
    per_group = len(names)
    groups = [
        Task(u, r, [str(i) for i in range(per_group)])
        for r in range(options.repeats)
        for u in resolved.uuids
    ]
    workers = options.workers or settings.workers
    slices = make_slices(groups, workers)
    jobs_per = [s.jobs for s in slices]
    history = history_seconds_per_job(ws.archive_root, resolved.definition.name)
    if history is not None:
        per_job, source = history
    else:
        per_job = settings.default_job_seconds
        source = "default: no GPU run of this definition in optimize_ops/runs yet"
        if "default_job_seconds" in settings.from_file:
            source = "[modal] default_job_seconds: no GPU run of this definition in optimize_ops/runs yet"
    gpu_s = sum(settings.container_overhead_s + n * per_job for n in jobs_per)
    wall_s = max((settings.container_overhead_s + n * per_job for n in jobs_per), default=0.0)
    dataset_root = resolved.dataset.root
    volume_dir = settings.volume_dir or dataset_root.name
    workloads = {
        u: resolved.dataset.workloads(resolved.definition.name).get(u).to_json()
        for u in resolved.uuids
    }
    files = volume_files_for(dataset_root, workloads, volume_dir)
    found = backends.detect(probe_gpu=False)
    notes = []
    missing = [f for f in files if f.size is None]
    if missing:
        notes.append(
            f"{len(missing)} safetensors file(s) are missing on this machine, e.g. {missing[0].local}"
        )
    timeout = float(settings.timeout_s)
    job_timeout = float(options.job_timeout_s or settings.job_timeout_s)
    if jobs_per and settings.load_timeout_s + max(jobs_per) * per_job > timeout:
        notes.append(
            f"the largest slice may need more than the {timeout:.0f} s per-call timeout: "
            "use more --workers or raise [modal] timeout_s"
        )
    groups_per = [len(sl.tasks) for sl in slices]
    call_timeout = call_timeout_s(settings, max(groups_per, default=1), job_timeout)
    calls = max_calls(len(slices), settings) if slices else 0
    worst_s = worst_case_container_seconds(
        calls, call_timeout, settings.startup_timeout_s, settings.scaledown_window_s
    )
    rate = container_rate_usd_per_hour(settings)
    if jobs_per and call_timeout >= settings.timeout_s:
        notes.append(
            f"the call timeout is [modal] timeout_s ({settings.timeout_s:.0f} s), less than the watchdogs "
            "allow the largest slice: use more --workers or raise it"
        )
    return ModalPlan(
        definition=resolved.definition.name,
        gpu=settings.gpu,
        image=settings.image,
        app_name=settings.app_name,
        volume=settings.volume,
        mount_path=MOUNT_PATH,
        volume_dir=volume_dir,
        containers=len(slices),
        jobs=sum(jobs_per),
        groups=len(groups),
        workloads=len(resolved.uuids),
        repeats=options.repeats,
        solutions=names,
        jobs_per_container=jobs_per,
        per_job_seconds=per_job,
        per_job_source=source,
        container_overhead_s=settings.container_overhead_s,
        estimated_gpu_seconds=gpu_s,
        estimated_wall_seconds=wall_s,
        price_per_gpu_hour_usd=settings.price_per_gpu_hour_usd,
        estimated_cost_usd=gpu_s / 3600.0 * rate,
        timeout_s=timeout,
        job_timeout_s=job_timeout,
        load_timeout_s=settings.load_timeout_s,
        call_timeout_s=call_timeout,
        startup_timeout_s=settings.startup_timeout_s,
        scaledown_window_s=settings.scaledown_window_s,
        max_calls=calls,
        price_per_container_hour_usd=rate,
        worst_case_gpu_seconds=worst_s,
        worst_case_cost_usd=worst_s / 3600.0 * rate,
        confirm_above_usd=settings.confirm_above_usd,
        cpu=settings.cpu,
        memory_mb=settings.memory_mb,
        volume_needed=bool(files),
        volume_files=files,
        upload_commands=upload_commands(settings.volume, dataset_root, files, volume_dir)
        if files
        else [],
        credentials=found.modal_credentials,
        modal_installed=found.modal_installed,
        settings_from_file=list(settings.from_file),
        notes=notes,
    )


@dataclass
class RunCost:
    """The worst case of starting containers for what an existing run has left (``--resume``) or
    for its failed jobs (``--retry-failed``, the TUI's ``t``): the plan's bound over those jobs."""

    run_id: str
    jobs: int
    containers: int
    calls: int
    call_timeout_s: float
    price_per_container_hour_usd: float
    worst_case_container_seconds: float
    worst_case_cost_usd: float
    confirm_above_usd: float

    @property
    def needs_confirmation(self) -> bool:
        return self.worst_case_cost_usd > self.confirm_above_usd

    def lines(self, settings: ModalSettings) -> list[str]:
        return [
            f"Modal: {self.jobs} job(s) of run {self.run_id} in {self.containers} container(s)",
            f"  worst case (an upper bound): all {self.calls} call(s) the run may make, each "
            f"{settings.startup_timeout_s:.0f} s startup + {self.call_timeout_s:.0f} s call + "
            f"{settings.scaledown_window_s:.0f} s idle, at ${self.price_per_container_hour_usd:.2f} "
            f"per container-hour = {self.worst_case_container_seconds:.0f} container-seconds, about "
            f"${self.worst_case_cost_usd:.2f}",
        ]


def run_cost(
    ws: Workspace, header: RunHeader, keys: set[str]
) -> tuple[RunCost, ModalSettings] | None:
    """The worst case of running the jobs ``keys`` of a Modal run again (None: the run is not one
    that starts containers: another backend, or an in-process Modal run). Its settings are the
    run's (its header), its threshold the workspace's ``[modal] confirm_above_usd`` now."""
    info = header.settings.get("modal")
    if header.backend != "modal" or not isinstance(info, dict) or info.get("in_process"):
        return None
    settings = ModalSettings.from_json(info)
    return cost_of_jobs(ws, header, keys, settings), settings


def cost_of_jobs(
    ws: Workspace, header: RunHeader, keys: set[str], settings: ModalSettings
) -> RunCost:
    """The worst case of running the jobs ``keys`` of a run on Modal with ``settings`` (the
    plan's bound: every call the run may make at Modal's limits, at the full container rate)."""
    groups: dict[tuple[str, int], list[str]] = {}
    for job in header.jobs:
        if job.key in keys:
            groups.setdefault((job.uuid, job.repeat), []).append(job.key)
    slices = make_slices([Task(u, r, sids) for (u, r), sids in groups.items()], settings.workers)
    call_timeout = call_timeout_s(
        settings, max((len(sl.tasks) for sl in slices), default=1), settings.job_timeout_s
    )
    calls = max_calls(len(slices), settings) if slices else 0
    seconds = worst_case_container_seconds(
        calls, call_timeout, settings.startup_timeout_s, settings.scaledown_window_s
    )
    rate = container_rate_usd_per_hour(settings)
    limit = modal_settings(ws.root).confirm_above_usd
    return RunCost(
        header.run_id,
        sum(sl.jobs for sl in slices),
        len(slices),
        calls,
        call_timeout,
        rate,
        seconds,
        seconds / 3600.0 * rate,
        limit,
    )


def rerun_cost(ws: Workspace, run_id: str, retry: bool) -> tuple[RunCost, ModalSettings] | None:
    """:func:`run_cost` of resuming run ``run_id`` (its jobs not yet in the journal) or of
    retrying its failed jobs; read from the journal, nothing written."""
    from fibtui.core.runs import failed_keys, read_journal, run_dir

    contents = read_journal(run_dir(ws.archive_root, run_id) / "journal.jsonl")
    header = contents.header
    if retry:
        keys = set(failed_keys(contents))
    else:
        keys = {j.key for j in header.jobs} - set(contents.results) - contents.skipped_keys()
    return run_cost(ws, header, keys)


# --------------------------------------------------------------------------------------------
# Wiring into the run service (fibtui.services.runs: prepare_run / prepare_resume)
# --------------------------------------------------------------------------------------------


def modal_header_settings(
    ws: Workspace, options: RunOptions, engine_config: dict[str, Any]
) -> dict[str, Any]:
    """The ``modal`` part of a run's header: the settings the run uses (fibtui.toml over the
    defaults, ``--workers`` and ``--timeout`` over both). For a run that goes to Modal, the engine
    config's dataset root and reference cache are rewritten in place to their container paths, so
    the header records what the containers use."""
    s = modal_settings(ws.root)
    if options.workers:
        s.workers = int(options.workers)
    if options.job_timeout_s:
        s.job_timeout_s = float(
            options.job_timeout_s
        )  # --timeout: per job, as for the local runner
    dataset_root = Path(engine_config.get("dataset_root") or ws.dataset().root)
    s.volume_dir = s.volume_dir or dataset_root.name
    out = s.to_json()
    out["in_process"] = bool(options.modal_in_process)
    if not options.modal_in_process:
        out["local_dataset_root"] = str(dataset_root)
        engine_config["dataset_root"] = f"{MOUNT_PATH}/{s.volume_dir}"
        engine_config["cache_dir"] = CONTAINER_CACHE_DIR
        engine_config["build_cache_dir"] = CONTAINER_BUILD_DIR
    return out


def modal_runner_for(
    ws: Workspace,
    folder: Path,
    header: RunHeader,
    definition: Definition,
    solutions: dict[str, Any],
    workloads: dict[str, dict[str, Any]],
    engine_config: dict[str, Any],
) -> ModalRunner:
    info = dict(header.settings.get("modal") or {})
    settings = ModalSettings.from_json(info)
    in_process = bool(info.get("in_process"))
    local_root = Path(info.get("local_dataset_root") or ws.dataset_root or ws.dataset().root)
    files = (
        []
        if in_process
        else volume_files_for(local_root, workloads, settings.volume_dir or local_root.name)
    )
    return ModalRunner(
        folder,
        header,
        definition.raw,
        solutions,
        workloads,
        engine_config,
        settings,
        settings.workers,
        in_process=in_process,
        volume_files=files,
    )


# --------------------------------------------------------------------------------------------
# The runner
# --------------------------------------------------------------------------------------------


def scrub(text: str) -> str:
    """Remove Modal token values (from the environment) from a message before it is shown or
    recorded. fibtui never reads tokens itself; this guards messages coming back from the client."""
    for var in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        value = os.environ.get(var)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


def describe_failure(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".strip().rstrip(":")
    return scrub(text)[:400]


#: What a failed call's exception says (:func:`failure_kind`).
KERNEL_TIMEOUT = "timeout"  # Modal's own execution timeout of the call
INFRA_TIMEOUT = "infra-timeout"  # any other timeout: an expired output, an upload, the network
INFRA = "infra"  # anything else: a lost container, a network or scheduling error


def failure_kind(exc: BaseException) -> str:
    """Only Modal's execution timeout (``modal.exception.FunctionTimeoutError``: the call ran past
    the function's ``timeout``) is the kernel's TIMEOUT. Every other timeout (``OutputExpiredError``,
    ``MountUploadTimeoutError``, ``VolumeUploadTimeoutError``, Python's own ``TimeoutError``, a
    startup timeout) is the infrastructure's, as is any other failure of a call."""
    names = {c.__name__ for c in type(exc).__mro__}
    if "FunctionTimeoutError" in names and "startup" not in str(exc).lower():
        return KERNEL_TIMEOUT
    if names & {"TimeoutError", "SliceTimeout", "OutputExpiredError", "CancelledError"}:
        return INFRA_TIMEOUT
    return INFRA


def is_timeout(exc: BaseException) -> bool:
    """Did the call run past Modal's execution timeout (the kernel's TIMEOUT when alone)?"""
    return failure_kind(exc) == KERNEL_TIMEOUT


class ModalUnavailable(FibError):
    """The Modal app could not run (no connection, credentials refused, the app failed)."""

    exit_code = 1


class ModalRunner:
    """Runs a prepared run's pending jobs as slices on Modal (or in-process), journaling every
    result the way the local runner does."""

    def __init__(
        self,
        folder: Path,
        header: RunHeader,
        definition: dict[str, Any],
        solutions: dict[str, dict[str, Any]],
        workloads: dict[str, dict[str, Any]],
        engine_config: dict[str, Any],
        settings: ModalSettings,
        workers: int,
        caller: Any = None,
        in_process: bool = False,
        volume_files: list[VolumeFile] | None = None,
    ) -> None:
        self.folder = folder
        self.header = header
        self.definition = definition
        self.workloads = workloads
        self.engine_config = dict(engine_config)
        self.settings = settings
        self.workers = max(1, int(workers))
        self.in_process = in_process
        self.caller = caller
        self.volume_files = list(volume_files or [])
        self.volume: Any = None  # a modal.Volume (or a stand-in in tests) for the upload check
        ids = SolutionIds(header, solutions)
        self.sid_of, self.ref_of, self.solutions = ids.sid_of, ids.ref_of, ids.solutions
        self.recorder = JobRecorder(folder, header, self.ref_of)
        self.journal = self.recorder.journal
        self.max_retries = settings.max_retries
        self._numbers = 0
        self._compile_logged: set[str] = set()
        self.calls = 0  # calls made (slices launched), for the report and the tests
        #: the most calls this run makes (set when it starts: its first slices + max_extra_calls)
        self.max_calls: int | None = None
        #: Modal's execution timeout of each call (set when the run starts)
        self.call_timeout: float = settings.timeout_s
        #: per slice, the (uuid, repeat, sid) already recorded from its live results
        self._recorded: dict[int, set[tuple[str, int, str]]] = {}
        #: containers that said they started a slice and have not returned it
        self._up: dict[int, str] = {}
        #: the calls' own wall times in their containers, summed (what the doctor reports)
        self.container_seconds = 0.0
        self._sink: EventSink | None = None  # where Modal's own output goes as log lines

    # -- building the caller (the only place modal is imported) ---------------------------------

    def _default_caller(self, call_timeout: float) -> Any:
        from fibtui.runners import modal_app

        s = self.settings
        handles = modal_app.build_app(
            app_name=s.app_name,
            gpu=s.gpu,
            image_ref=s.image,
            timeout_s=call_timeout,
            scaledown_window_s=s.scaledown_window_s,
            volume_name=None if self.in_process or not self.volume_files else s.volume,
            mount_path=MOUNT_PATH,
            add_python=s.add_python,
            pip=s.pip,
            max_containers=self.workers,
            cpu=s.cpu,
            memory_mb=s.memory_mb,
            startup_timeout_s=s.startup_timeout_s,
        )
        if self.in_process:
            return modal_app.InProcessCaller(
                handles.function,
                parallel=1,
                interpreter=self.engine_config.get("backend") == "interpreter",
            )
        self.volume = handles.volume
        return modal_app.ModalCaller(handles, output=self._modal_output)

    def _modal_output(self, line: str) -> None:
        """A line of Modal's own output: into the run folder's modal.log and on as a log line."""
        from fibtui.core.fsio import append_line

        line = scrub(line).replace("\n", " ")
        try:
            append_line(self.folder / "modal.log", line)
        except OSError:
            pass  # the log is a courtesy: the run goes on
        sink = self._sink
        if sink is not None:
            sink(LogLine(f"modal: {line[:300]}", "dim"))

    def sync_volume(self, on_event: EventSink) -> int:
        """Upload the safetensors files the volume lacks (or holds at another size)."""
        if self.in_process or not self.volume_files or self.volume is None:
            return 0
        from fibtui.runners import modal_app

        missing_here = [f for f in self.volume_files if f.size is None]
        if missing_here:
            raise InputError(
                missing_here[0].local, "safetensors file referenced by a workload is missing"
            )
        dirs = sorted({"/" + f.remote.strip("/").split("/")[0] for f in self.volume_files})
        present = modal_app.volume_listing(self.volume, dirs)
        todo = [f for f in self.volume_files if present.get(f.remote) != f.size]
        if not todo:
            on_event(
                LogLine(
                    f"volume {self.settings.volume}: all {len(self.volume_files)} dataset file(s) present"
                )
            )
            return 0
        on_event(
            LogLine(
                f"volume {self.settings.volume}: uploading {len(todo)} of {len(self.volume_files)} dataset file(s)"
            )
        )
        return modal_app.upload_files(
            self.volume,
            [(Path(f.local), f.remote) for f in todo],
            lambda text: on_event(LogLine(text)),
        )

    # -- running --------------------------------------------------------------------------------

    def run(self, on_event: EventSink, cancel: threading.Event | None = None) -> RunRecord:
        cancel = cancel or threading.Event()
        take_lock(self.folder)
        try:
            done_keys = self.recorder.resume()
            done = self.recorder.done
            on_event(RunStarted(self.header, str(self.folder), resumed=done > 0, done_before=done))
            tasks = [
                Task(u, r, sids)
                for (u, r), sids in pending_groups(self.header, done_keys, self.sid_of).items()
            ]
            if tasks and not cancel.is_set():
                slices = make_slices(tasks, self.workers, first_number=self._numbers + 1)
                self.call_timeout = call_timeout_s(
                    self.settings,
                    max(len(sl.tasks) for sl in slices),
                    self.settings.job_timeout_s,
                )
                self.max_calls = self.calls + max_calls(len(slices), self.settings)
                if self.caller is None:
                    self.caller = self._default_caller(self.call_timeout)
                where = (
                    "in this process (Function.local())"
                    if getattr(self.caller, "in_process", False)
                    else f"on Modal ({self.settings.gpu}, {self.settings.image})"
                )
                on_event(
                    LogLine(
                        f"{sum(s.jobs for s in slices)} job(s) in {len(slices)} slice(s) {where}"
                    )
                )
                self._sink = on_event
                try:
                    with self._session(cancel, on_event) as live:
                        if live:
                            self._record_app(on_event)
                            self.sync_volume(on_event)
                            self._loop(slices, on_event, cancel)
                except FibError:
                    raise
                except Exception as exc:  # noqa: BLE001 - Modal unreachable, refused, or the app failed
                    raise ModalUnavailable(
                        f"Modal: {describe_failure(exc)}; the {self.recorder.done} finished job(s) are "
                        f"kept: fibtui run --resume {self.header.run_id}"
                    ) from None
            return self.recorder.finish(cancel.is_set(), on_event)
        finally:
            release_lock(self.folder)

    @contextmanager
    def _session(self, cancel: threading.Event, on_event: EventSink) -> Iterator[bool]:
        """The caller's session, entered in a thread of its own: building or pulling the image can
        take minutes, and a cancel meanwhile returns at once (yielding False; nothing is launched,
        and the thread leaves the session as soon as it is in)."""
        entered = threading.Event()
        leave = threading.Event()
        box: dict[str, Any] = {}

        def hold() -> None:
            try:
                with self.caller.session():
                    entered.set()
                    leave.wait()
            except BaseException as exc:  # noqa: BLE001 - re-raised below, in the runner's thread
                box["error"] = exc
            finally:
                entered.set()

        holder = threading.Thread(target=hold, daemon=True, name="fibtui-modal-session")
        holder.start()
        while not entered.wait(0.2):
            if cancel.is_set():
                on_event(
                    LogLine(
                        "cancelled while the Modal app was starting (the image build or pull): "
                        "nothing was launched",
                        "warning",
                    )
                )
                leave.set()
                yield False
                return
        if "error" in box:
            raise box["error"]
        try:
            yield True
        finally:
            leave.set()
            holder.join(timeout=60)
        if "error" in box:  # leaving the app failed (the body itself went well)
            raise box["error"]

    def _record_app(self, on_event: EventSink) -> None:
        """The app's and the image's ids, once the app runs: in the run folder (modal.json) and said."""
        app_id, image_id = (
            getattr(self.caller, "app_id", None),
            getattr(self.caller, "image_id", None),
        )
        if not (app_id or image_id):
            return
        from fibtui.core.fsio import atomic_write_json

        try:
            atomic_write_json(
                self.folder / "modal.json",
                {
                    "app_id": app_id,
                    "image_id": image_id,
                    "image": self.settings.image,
                    "gpu": self.settings.gpu,
                },
            )
        except OSError:
            pass
        on_event(
            LogLine(
                f"Modal app {app_id or '?'} (image {image_id or '?'} from {self.settings.image})"
            )
        )

    def _new_slice(self, tasks: list[Task], attempt: int, isolated: bool = False) -> Slice:
        self._numbers += 1
        return Slice(self._numbers, tasks, attempt, isolated)

    def request_for(self, sl: Slice) -> dict[str, Any]:
        used = {sid for t in sl.tasks for sid in t.sids}
        return {
            "slice_id": sl.number,
            "job_timeout_s": self.settings.job_timeout_s,
            "config": self.engine_config,
            "definition": self.definition,
            "solutions": [s for s in self.solutions if s["id"] in used],
            "jobs": [
                {
                    "job_id": f"{t.repeat}|{t.uuid}",
                    "workload": self.workloads[t.uuid],
                    "repeat": t.repeat,
                    "solutions": list(t.sids),
                }
                for t in sl.tasks
            ],
        }

    def _where(self, sl: Slice, container: dict[str, Any] | None = None) -> dict[str, Any]:
        """Which slice and container ran a job (added to its timing, like the local runner's slot)."""
        device = (
            "in-process"
            if getattr(self.caller, "in_process", False)
            else f"modal {self.settings.gpu}"
        )
        out: dict[str, Any] = {"slot": sl.number, "worker_device": device}
        if container and (container.get("task_id") or container.get("host")):
            out["container"] = container.get("task_id") or container.get("host")
        return out

    def _wait_s(self) -> float | None:
        """How long the client waits for a call: not at all on its own. Modal's execution timeout
        (``timeout_s``) and startup timeout count from when the call starts to run, never its time
        in the queue; in this process each job has its watchdog."""
        return None

    def _loop(self, slices: list[Slice], on_event: EventSink, cancel: threading.Event) -> None:
        self._numbers = max((s.number for s in slices), default=self._numbers)
        pending: list[Slice] = list(slices)
        active: dict[int, tuple[Slice, Any]] = {}
        finished: queue.Queue[tuple[int, Any]] = queue.Queue()
        listen = getattr(self.caller, "listen", None)
        if listen is not None:  # live events from the containers (item by item, as they happen)
            listen(lambda event: finished.put((_PROGRESS, event)))
        try:
            while (pending or active) and not cancel.is_set():
                # never more calls in flight than containers: a queued call would wait for one
                while pending and len(active) < self.workers and not cancel.is_set():
                    sl = pending.pop(0)
                    if self.max_calls is not None and self.calls >= self.max_calls:
                        self._over_budget(sl, on_event)
                        continue
                    active[sl.number] = (sl, self._launch(sl, finished, on_event))
                try:
                    number, outcome = finished.get(timeout=0.2)
                except queue.Empty:
                    continue
                if number == _PROGRESS:
                    self._progress(outcome, active, on_event)
                    continue
                if number not in active:
                    continue
                sl, _ = active.pop(number)
                self._up.pop(number, None)
                if isinstance(outcome, BaseException):
                    pending.extend(self._failed(sl, outcome, on_event))
                else:
                    pending.extend(self._returned(sl, outcome, on_event))
        except BaseException:
            cancel.set()  # an interrupt: cancel the calls in flight (below), record nothing more
            raise
        finally:
            self._cancel_active(active, cancel, on_event)

    def _over_budget(self, sl: Slice, on_event: EventSink) -> None:
        """The run made every call its plan allows: what is left is recorded, never launched (the
        plan's worst case holds; ``fibtui run --retry-failed`` runs it again, checked first)."""
        on_event(
            LogLine(
                f"slice {sl.number} ({sl.jobs} job(s)) not launched: the run made its {self.max_calls} "
                "call(s) ([modal] max_extra_calls); --retry-failed runs them again",
                "warning",
            )
        )
        for t in sl.tasks:
            for sid in t.sids:
                if (t.uuid, t.repeat, sid) in self._recorded.get(sl.number, set()):
                    continue
                self.recorder.record(
                    sid,
                    t.uuid,
                    t.repeat,
                    t.attempt,
                    {
                        "status": "INFRA_ERROR",
                        "error": f"not run: the run made all the {self.max_calls} Modal call(s) its "
                        "plan allows ([modal] max_extra_calls)",
                    },
                    on_event,
                    self._where(sl),
                )

    def _progress(
        self, event: Any, active: dict[int, tuple[Slice, Any]], on_event: EventSink
    ) -> None:
        """A live event from a container (run_slice's ``progress``)."""
        if not isinstance(event, dict):
            return
        number = event.get("slice_id")
        if not isinstance(number, int) or number not in active:
            return
        sl = active[number][0]
        kind = event_of(event)
        if kind == Event.SLICE_STARTED:
            self._up[number] = str(event.get("task_id") or "a container")
            up = len(self._up)
            on_event(
                LogLine(
                    f"slice {number}: container {self._up[number]} started it; {up} of "
                    f"{len(active)} call(s) in flight have a container"
                )
            )
            for t in sl.tasks:
                on_event(
                    JobStarting(t.uuid, t.repeat, [self.ref_of[s][1] for s in t.sids], number, up)
                )
        elif kind == Event.JOB_STARTED:
            task = self._task_of(sl, event.get("job_id"))
            if task is not None:
                on_event(
                    JobStarted(
                        task.uuid, task.repeat, [self.ref_of[s][1] for s in task.sids], number
                    )
                )
        elif kind == Event.RESULT and isinstance(event.get("job"), dict):
            job = event["job"]
            where = {"task_id": event.get("task_id"), "host": event.get("host")}
            for task in sl.tasks:  # each task of this job (one per solution in a retry slice)
                if f"{task.repeat}|{task.uuid}" == job.get("job_id"):
                    self._record_final(sl, task, job, job.get("started"), where, on_event)

    @staticmethod
    def _task_of(sl: Slice, job_id: Any) -> Task | None:
        for t in sl.tasks:
            if f"{t.repeat}|{t.uuid}" == job_id:
                return t
        return None

    def _record_final(
        self,
        sl: Slice,
        task: Task,
        job: dict[str, Any],
        started: Any,
        container: dict[str, Any],
        on_event: EventSink,
    ) -> None:
        """Record the results of ``job`` that are final (a kernel status), once per solution."""
        seen = self._recorded.setdefault(sl.number, set())
        for r in job.get("results") or []:
            sid = r.get("solution_id") if isinstance(r, dict) else None
            if sid not in task.sids or (task.uuid, task.repeat, sid) in seen:
                continue
            if r.get("not_run") or r.get("status") in INFRA_STATUSES:
                continue  # left to the call's return, which retries it
            seen.add((task.uuid, task.repeat, sid))
            take_job_fields(r, job, started)
            self.recorder.record(
                sid,
                task.uuid,
                task.repeat,
                max(task.attempt, sl.attempt),
                r,
                on_event,
                self._where(sl, container),
            )

    def _cancel_active(
        self, active: dict[int, tuple[Slice, Any]], cancel: threading.Event, on_event: EventSink
    ) -> None:
        if cancel.is_set():
            for _sl, call in active.values():
                if call is not None:
                    try:
                        call.cancel()
                    except Exception as exc:  # noqa: BLE001 - say it; the app's end stops its containers too
                        on_event(
                            LogLine(f"could not cancel a call: {describe_failure(exc)}", "warning")
                        )
            if active:
                on_event(LogLine(f"cancelled {len(active)} call(s) in flight", "warning"))

    def _launch(
        self, sl: Slice, finished: queue.Queue[tuple[int, Any]], on_event: EventSink
    ) -> Any:
        self.calls += 1
        label = (
            "isolated retry" if sl.isolated else (f"attempt {sl.attempt}" if sl.attempt > 1 else "")
        )
        on_event(
            LogLine(
                f"slice {sl.number}: {sl.jobs} job(s) submitted, queued for a container"
                + (f" ({label})" if label else "")
            )
        )
        submitted_at = now_iso()
        try:
            call = self.caller.submit(self.request_for(sl))
        except Exception as exc:  # noqa: BLE001 - a failed submission is an infrastructure failure
            finished.put((sl.number, exc))
            return None
        wait = self._wait_s()

        def wait_for_it() -> None:
            try:
                out = call.result(wait)
                if isinstance(out, dict):
                    out.setdefault("_submitted", submitted_at)
                finished.put((sl.number, out))
            except BaseException as exc:  # noqa: BLE001 - every failure of a call is reported
                finished.put((sl.number, exc))

        threading.Thread(
            target=wait_for_it, daemon=True, name=f"fibtui-modal-slice-{sl.number}"
        ).start()
        return call

    # -- outcomes -------------------------------------------------------------------------------

    def _returned(self, sl: Slice, out: Any, on_event: EventSink) -> list[Slice]:
        if not isinstance(out, dict) or not isinstance(out.get("jobs"), list):
            return self._failed(
                sl,
                ValueError(f"malformed result from the container ({type(out).__name__})"),
                on_event,
            )
        container = out.get("container") or {}
        try:
            self.container_seconds += float(container.get("wall_s") or 0.0)
        except (TypeError, ValueError):
            pass
        if container:
            on_event(
                LogLine(
                    f"slice {sl.number} returned from {container.get('task_id') or container.get('host') or 'a container'}"
                    f" after {float(container.get('wall_s') or 0):.1f} s"
                )
            )
        fresh = {
            sid: {
                **rep,
                "error": scrub(str(rep.get("error")))[:600],
                "log": scrub(str(rep.get("log") or "")),
            }
            for sid, rep in (out.get("load") or {}).items()
            if isinstance(rep, dict) and sid in self.ref_of and sid not in self._compile_logged
        }
        self._compile_logged.update(fresh)
        report_builds(self.folder, self.ref_of, fresh, on_event)
        # a retry slice may hold two tasks of one workload and repeat (each solution retried
        # alone): a result belongs to the task that holds its solution
        by_key: dict[tuple[object, object, object], Task] = {
            (t.uuid, t.repeat, sid): t for t in sl.tasks for sid in t.sids
        }
        # what its live results already recorded counts as seen
        seen: set[tuple[str, int, str]] = self._recorded.setdefault(sl.number, set())
        retry: list[Task] = []
        requeue: list[Task] = []
        for job in out["jobs"]:
            if not isinstance(job, dict):
                continue
            for r in job.get("results") or []:
                sid = r.get("solution_id") if isinstance(r, dict) else None
                task = by_key.get((job.get("uuid"), job.get("repeat"), sid))
                if (
                    task is None
                    or not isinstance(sid, str)
                    or (task.uuid, task.repeat, sid) in seen
                ):
                    continue
                seen.add((task.uuid, task.repeat, sid))
                take_job_fields(r, job, job.get("started") or out.get("_submitted"))
                if r.get("not_run"):  # another job made its container stop: it has not been tried
                    requeue.append(Task(task.uuid, task.repeat, [sid], task.attempt))
                    continue
                if r.get("status") in INFRA_STATUSES and task.attempt <= self.max_retries:
                    on_event(
                        LogLine(
                            f"retrying {task.uuid[:8]} {self.ref_of[sid][1]} (attempt {task.attempt + 1}): "
                            f"{scrub(str(r.get('error')))[:300]}",
                            "warning",
                        )
                    )
                    retry.append(Task(task.uuid, task.repeat, [sid], task.attempt + 1))
                    continue
                self.recorder.record(
                    sid,
                    task.uuid,
                    task.repeat,
                    max(task.attempt, sl.attempt),
                    r,
                    on_event,
                    self._where(sl, container),
                )
        lost = [
            Task(t.uuid, t.repeat, [s], t.attempt)
            for t in sl.tasks
            for s in t.sids
            if (t.uuid, t.repeat, s) not in seen
        ]
        if lost:
            retry.extend(
                self._infra_or_final(sl, lost, "the container returned no result for it", on_event)
            )
        if out.get("poisoned") or out.get("hung") or out.get("fault") or out.get("refused"):
            why = (
                "a kernel lost the CUDA context"
                if out.get("poisoned")
                else f"job {str(out.get('hung'))[:40]} hung (its worker was killed)"
                if out.get("hung")
                else f"the worker {out.get('fault')}"
                if out.get("fault")
                else f"it had a fault before ({out.get('refused')}) and ran nothing"
            )
            stopped = (
                "it stops taking inputs"
                if out.get("stopped_taking_inputs")
                else "it is sent nothing more"
            )
            on_event(
                WorkerRestarted(
                    sl.number, f"{why}: {stopped}; the jobs it did not run go to a fresh container"
                )
            )
        retry += requeue
        if not retry:
            return []
        return [self._new_slice(retry, max(t.attempt for t in retry))]

    def _infra_or_final(
        self, sl: Slice, tasks: list[Task], reason: str, on_event: EventSink
    ) -> list[Task]:
        again = []
        for t in tasks:
            if t.attempt <= self.max_retries:
                again.append(Task(t.uuid, t.repeat, t.sids, t.attempt + 1))
            else:
                for sid in t.sids:
                    self.recorder.record(
                        sid,
                        t.uuid,
                        t.repeat,
                        t.attempt,
                        {"status": "INFRA_ERROR", "error": reason},
                        on_event,
                        self._where(sl),
                    )
        return again

    def _failed(self, sl: Slice, exc: BaseException, on_event: EventSink) -> list[Slice]:
        """A call failed as a whole: retry it alone; then one group per container; then each
        solution alone; then record the failure."""
        reason = describe_failure(exc)
        kind = failure_kind(exc)
        timeout = kind == KERNEL_TIMEOUT
        on_event(
            WorkerRestarted(sl.number, f"slice {sl.number} ({sl.jobs} job(s)) failed: {reason}")
        )
        done = self._recorded.get(sl.number, set())
        if done:  # its live results were recorded: only the rest is run again
            left = [
                Task(
                    t.uuid,
                    t.repeat,
                    [x for x in t.sids if (t.uuid, t.repeat, x) not in done],
                    t.attempt,
                )
                for t in sl.tasks
            ]
            left = [t for t in left if t.sids]
            if not left:
                return []
            sl = self._new_slice(left, sl.attempt, sl.isolated)
        # a call that ran out of Modal's execution timeout is not run again whole (it would cost the
        # whole timeout again): its work is split at once
        if not sl.isolated and sl.attempt <= self.max_retries and not timeout:
            on_event(
                LogLine(f"retrying slice {sl.number} alone (attempt {sl.attempt + 1})", "warning")
            )
            return [self._new_slice(sl.tasks, sl.attempt + 1)]
        if len(sl.tasks) > 1:
            on_event(
                LogLine(
                    f"slice {sl.number} keeps failing: one workload per container to find the cause",
                    "warning",
                )
            )
            return [self._new_slice([t], sl.attempt, isolated=True) for t in sl.tasks]
        task = sl.tasks[0]
        if len(task.sids) > 1:
            on_event(LogLine(f"{task.uuid[:8]} keeps failing: each solution alone", "warning"))
            return [
                self._new_slice(
                    [Task(task.uuid, task.repeat, [s], task.attempt)], sl.attempt, isolated=True
                )
                for s in task.sids
            ]
        sid = task.sids[0]
        if timeout:
            result = {
                "status": "TIMEOUT",
                "error": f"no result within the per-call timeout, alone in its container: {reason}",
            }
        else:
            result = {
                "status": "INFRA_TIMEOUT" if kind == INFRA_TIMEOUT else "INFRA_ERROR",
                "error": f"the container failed running this solution alone "
                f"({sl.attempt} attempt(s) and an isolated retry): {reason}. If it repeats, the kernel may be "
                "crashing its process: run it with --backend local or interpreter to see",
            }
        self.recorder.record(
            sid,
            task.uuid,
            task.repeat,
            max(task.attempt, sl.attempt),
            result,
            on_event,
            self._where(sl),
        )
        return []
