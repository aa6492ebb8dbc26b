"""``fibtui modal doctor``: the first live check for a user with Modal credentials.

Before it spends anything it checks this machine: the modal client's version (the range fibtui's
tests run: ``SUPPORTED``) and where the credentials come from (never the token). Then, after the
cost guard, one tiny B200 call (:func:`fibtui.runners.modal_app.probe`) says what the container
is: the GPU and its compute capability, torch and its CUDA, the driver and the CUDA version it
supports, whether ncu is there; and a 1-workload paired gate (the workspace's solution against
itself, one repeat) runs through the same :class:`~fibtui.runners.modal_runner.ModalRunner` as
any run and says what it cost, from the containers' own wall times at the container rate.

The live call needs the network and credentials: this machine has neither, so the live path is
tested only against tests/modal_servicer.py (Modal's protocol on 127.0.0.1), never against Modal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from fibtui.core.errors import UsageError

if TYPE_CHECKING:
    from fibtui.core.workspace import Workspace
    from fibtui.runners.session import PreparedRun, RunOptions

#: the modal client versions fibtui is tested with (pyproject.toml pins the same range)
SUPPORTED = ((1, 6, 4), (1, 7, 0))
#: the compute capability of the contest's GPU (B200: sm_100)
B200_CAPABILITY = "10.0"
#: the probe's own call timeout (seconds)
PROBE_TIMEOUT_S = 120.0


@dataclass
class Check:
    name: str
    #: True passed, False failed, None: could not be told (said in ``detail``)
    ok: bool | None
    detail: str

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "??  "}[self.ok]
        return f"  {mark} {self.name}: {self.detail}"


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    probe: dict[str, Any] | None = None
    run_id: str | None = None
    container_seconds: float | None = None
    cost_usd: float | None = None
    worst_case_cost_usd: float | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def client_check(version: str | None = None) -> Check:
    """The installed modal client against the range the tests run."""
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed

        try:
            version = installed("modal")
        except PackageNotFoundError:
            return Check("modal client", False, "not installed: pip install 'modal>=1.6.4,<1.7'")
    low, high = SUPPORTED
    v = _version(version)
    inside = low <= v < high
    want = f">={'.'.join(map(str, low))},<{'.'.join(map(str, high[:2]))}"
    return Check(
        "modal client",
        inside,
        f"{version}"
        + ("" if inside else f": fibtui is tested with {want} (pip install 'modal{want}')"),
    )


def credentials_check() -> Check:
    """Where the modal client will read credentials from; the token itself is never read."""
    from fibtui.core import backends

    source = backends.modal_credentials_source()
    if source is None:
        return Check(
            "credentials",
            False,
            "none found: run `modal setup` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)",
        )
    where = "MODAL_TOKEN_ID/MODAL_TOKEN_SECRET" if source == "env" else source
    return Check("credentials", True, f"from {where} (the token is not read here)")


def container_checks(probe: dict[str, Any], gpu: str) -> list[Check]:
    """What the probe's answer says about the container."""
    env = probe.get("environment") or {}
    checks = [
        Check(
            "image",
            "environment_error" not in probe,
            f"python {probe.get('python')}, torch {env.get('torch')}, triton {env.get('triton')}"
            if "environment_error" not in probe
            else f"the worker could not describe the container: {probe['environment_error']}",
        )
    ]
    name = env.get("gpu")
    want = gpu.split(":")[0].rstrip("+!").upper()
    checks.append(
        Check(
            "GPU",
            bool(name) and want in str(name).upper().replace(" ", ""),
            f"{name} (capability {env.get('capability')})"
            if name
            else "no GPU visible in the container",
        )
    )
    if name and want == "B200":
        checks.append(
            Check(
                "compute capability",
                env.get("capability") == B200_CAPABILITY,
                f"{env.get('capability')} (a B200 is {B200_CAPABILITY}: sm_100a kernels run here)",
            )
        )
    smi = str(probe.get("nvidia_smi") or "")
    found = re.search(r"CUDA Version:\s*([\d.]+)", smi)
    driver = re.search(r"Driver Version:\s*([\d.]+)", smi)
    runtime = env.get("cuda")
    if found and runtime:
        fits = _version(found.group(1))[:2] >= _version(str(runtime))[:2]
        checks.append(
            Check(
                "driver vs CUDA",
                fits,
                f"driver {driver.group(1) if driver else '?'} supports CUDA {found.group(1)}; torch "
                f"was built for CUDA {runtime}"
                + ("" if fits else ": the driver is older than torch's CUDA"),
            )
        )
    else:
        checks.append(
            Check(
                "driver vs CUDA",
                None,
                "nvidia-smi gave no CUDA version" if not found else "torch reports no CUDA build",
            )
        )
    checks.append(
        Check(
            "ncu",
            None if not probe.get("ncu") else True,
            f"{probe.get('ncu')} ({probe.get('ncu_version') or 'version unknown'})"
            if probe.get("ncu")
            else "not in the image: fibtui ncu profile --backend modal needs an image with Nsight Compute",
        )
    )
    return checks


def doctor_worst_case(ws: Workspace) -> float:
    """The most the doctor can cost: the probe call and the gate's calls (one slice and one more),
    each run to Modal's limits at the container rate."""
    from fibtui.runners.modal_runner import (
        call_timeout_s,
        container_rate_usd_per_hour,
        modal_settings,
        worst_case_container_seconds,
    )

    s = doctor_settings(modal_settings(ws.root))
    rate = container_rate_usd_per_hour(s)
    probe = worst_case_container_seconds(
        1, PROBE_TIMEOUT_S, s.startup_timeout_s, s.scaledown_window_s
    )
    gate = worst_case_container_seconds(
        1 + s.max_extra_calls,
        call_timeout_s(s, 1, s.job_timeout_s),
        s.startup_timeout_s,
        s.scaledown_window_s,
    )
    return (probe + gate) / 3600.0 * rate


def doctor_settings(s: Any) -> Any:
    """The workspace's [modal] settings, tightened for a check that must cost cents."""
    s.workers = 1
    s.max_extra_calls = min(s.max_extra_calls, 1)
    s.max_retries = min(s.max_retries, 1)
    s.job_timeout_s = min(s.job_timeout_s, 120.0)
    s.load_timeout_s = min(s.load_timeout_s, 600.0)
    return s


def run_doctor(
    ws: Workspace,
    say: Callable[[str], None],
    *,
    prepare: Callable[[Workspace, RunOptions], PreparedRun],
    handles: Any = None,
    engine: str | None = None,
) -> DoctorReport:
    """The local checks, then the probe and the 1-workload gate on Modal. ``prepare``: how the
    gate's run is prepared (:func:`fibtui.services.runs.prepare_run`: the application's, which a
    runner does not import); ``handles``: the Modal
    app to use (default: built from the workspace's settings); ``engine``: the gate's engine
    (tests on a CPU pass ``interpreter``; on Modal it is the container's GPU)."""
    from fibtui.runners import modal_app
    from fibtui.runners.modal_runner import (
        ModalRunner,
        call_timeout_s,
        container_rate_usd_per_hour,
        modal_settings,
    )
    from fibtui.runners.session import RunOptions

    report = DoctorReport(checks=[client_check(), credentials_check()])
    for c in report.checks:
        say(c.line())
    if not report.ok:
        return report
    settings = doctor_settings(modal_settings(ws.root))
    report.worst_case_cost_usd = doctor_worst_case(ws)
    if handles is None:
        handles = modal_app.build_app(
            app_name=f"{settings.app_name}-doctor",
            gpu=settings.gpu,
            image_ref=settings.image,
            timeout_s=call_timeout_s(settings, 1, settings.job_timeout_s),
            add_python=settings.add_python,
            pip=settings.pip,
            max_containers=1,
            cpu=settings.cpu,
            memory_mb=settings.memory_mb,
            startup_timeout_s=settings.startup_timeout_s,
            scaledown_window_s=settings.scaledown_window_s,
            probe_timeout_s=PROBE_TIMEOUT_S,
        )
    say(f"  one {settings.gpu} call: what the container is ({settings.image})")
    with handles.app.run():
        probe = handles.probe.remote()
    report.probe = probe
    for c in container_checks(probe, settings.gpu):
        report.checks.append(c)
        say(c.line())
    # a 1-workload paired gate: the solution against itself, through the same runner as any run
    config = ws.config_for(None)
    dataset = ws.dataset()
    first = next(iter(dataset.workloads(config.definition).uuids), None)
    if first is None:
        raise UsageError(f"definition {config.definition} has no workloads to gate on")
    options = RunOptions(
        backend="modal",
        workloads=first,
        baseline=str(ws.root),  # the workspace's solution against itself: a paired A/A gate
        workers=1,
        job_timeout_s=settings.job_timeout_s,
        modal_in_process=engine == "interpreter",
    )
    prepared = prepare(ws, options)
    runner = prepared.runner
    assert isinstance(runner, ModalRunner)
    runner.settings = doctor_settings(runner.settings)
    runner.max_retries = runner.settings.max_retries
    runner.in_process = False
    runner.caller = modal_app.ModalCaller(handles)
    record = runner.run(lambda e: None)
    report.run_id = record.run_id
    passed = record.summary.passed == record.summary.total and record.summary.total > 0
    walls = {
        (j.timing or {}).get("container") for j in record.jobs if (j.timing or {}).get("container")
    }
    seconds = float(probe.get("wall_s") or 0.0) + runner.container_seconds
    report.container_seconds = seconds
    report.cost_usd = seconds / 3600.0 * container_rate_usd_per_hour(settings)
    statuses = sorted({j.status for j in record.jobs})
    report.checks.append(
        Check(
            "1-workload gate",
            passed,
            f"run {record.run_id}: {record.summary.passed}/{record.summary.total} PASSED"
            + ("" if passed else f" ({', '.join(statuses)})")
            + f" in {len(walls) or 1} container(s)",
        )
    )
    say(report.checks[-1].line())
    say(
        f"  cost: about ${report.cost_usd:.4f} ({seconds:.1f} s of its calls in the containers at "
        f"${container_rate_usd_per_hour(settings):.2f} per container-hour; start-up and idle time "
        "are billed too and not seen here: the bound was "
        f"${report.worst_case_cost_usd:.2f})"
    )
    return report
