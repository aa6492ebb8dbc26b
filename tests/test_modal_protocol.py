"""fibtui's Modal backend against Modal's own protocol: the real modal client (the pinned version)
and the real container entrypoint (``python -m modal._container_entrypoint``, one subprocess per
container) talk gRPC to tests/modal_servicer.py on 127.0.0.1. No network, no credentials: the
client is pointed at the servicer with MODAL_SERVER_URL and a made-up token.

- ModalRunner runs a paired sweep to ``complete`` through App.run / Function.spawn /
  FunctionCall.get and the containers' live events (a modal.Queue);
- in the container, the job runs in a child process the container's parent kills at its job
  timeout, whether the kernel sleeps in Python or holds the interpreter lock;
- a raise while loading is an infrastructure failure, retried on a fresh container;
- a container with a fault stops taking inputs (ContainerStop): the servicer gives it no other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "torch", reason="the gpu extra (torch) is not installed: the worker cannot run here"
)
pytest.importorskip("modal_proto")

from fibtui.core.workspace import open_workspace  # noqa: E402
from fibtui.runners import modal_app  # noqa: E402
from fibtui.runners.modal_runner import ModalRunner  # noqa: E402
from fibtui.services.runs import RunOptions, prepare_run  # noqa: E402
from tests.modal_servicer import ModalServer  # noqa: E402
from tests.runner_helpers import PY_TEMPLATE, make_candidate, make_tiny_workspace  # noqa: E402
from tests.test_modal_faults import HANGS, HOLDS_GIL  # noqa: E402

pytestmark = pytest.mark.slow

RAISES_ON_IMPORT = "raise RuntimeError('CUDA error: device-side assert while loading')\n"


@pytest.fixture
def servicer(monkeypatch: pytest.MonkeyPatch):
    import modal

    server = ModalServer(container_env={"FIBTUI_CACHE_DIR": "/tmp/fibtui-test-modal-cache"})
    url = server.start()
    monkeypatch.setenv("MODAL_SERVER_URL", url)
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-test")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-test")
    modal.client._Client._client_from_env = (
        None  # the client of an earlier test talked to another servicer
    )
    yield server
    server.stop()
    modal.client._Client._client_from_env = None


def run_on(server: ModalServer, tmp_path: Path, kernel: str, monkeypatch, **opts):
    """A paired tiny sweep on 'Modal' (the servicer), interpreter engine in the container."""
    root = make_tiny_workspace(
        tmp_path / "ws", batch_sizes=opts.pop("batch_sizes", (1, 2)), kernel="good_py"
    )
    (root / "solution" / "triton" / "kernel.py").write_text(kernel)
    base = make_candidate(root, "base_py", "good_py")
    ws = open_workspace(root)
    options = RunOptions(
        backend="modal",
        modal_in_process=True,  # the engine config of a CPU run (interpreter); the caller is Modal's
        workloads="all",
        workers=opts.pop("workers", 1),
        baseline=str(base),
        solutions=[str(root / "solution" / "triton")],
        job_timeout_s=opts.pop("job_timeout_s", 30.0),
    )
    prepared = prepare_run(ws, options)
    runner = prepared.runner
    assert isinstance(runner, ModalRunner)
    runner.settings.image = "python:3.11"
    runner.settings.load_timeout_s = opts.pop("load_timeout_s", 120.0)
    runner.settings.max_extra_calls = opts.pop("max_extra_calls", 4)
    runner.max_retries = opts.pop("max_retries", runner.max_retries)
    runner.in_process = False  # the real modal client and app, against the servicer
    runner.caller = runner._default_caller(
        __import__("fibtui.runners.modal_runner", fromlist=["x"]).call_timeout_s(
            runner.settings, 4, runner.settings.job_timeout_s
        )
    )
    events: list[object] = []
    record = runner.run(events.append).to_json()
    assert server.unimplemented == [], server.unimplemented
    return record, events


def test_a_paired_sweep_runs_to_complete_through_modals_protocol(
    servicer: ModalServer, tmp_path: Path, monkeypatch
) -> None:
    from fibtui.runners.events import JobFinished, JobStarted, JobStarting

    record, events = run_on(
        servicer, tmp_path, PY_TEMPLATE.format(body="    y.copy_(x * alpha)"), monkeypatch
    )
    assert record["state"] == "complete" and record["summary"]["passed"] == 4, record["jobs"]
    for name in (
        "AppCreate",
        "FunctionCreate",
        "FunctionMap",
        "FunctionGetInputs",
        "FunctionPutOutputs",
        "FunctionGetOutputs",
        "QueuePut",
        "QueueGet",
        "AppClientDisconnect",
    ):
        assert servicer.calls[name] >= 1, (name, dict(servicer.calls))
    # live status from the container: starting, then running, before the job's rows
    kinds = [
        type(e).__name__ for e in events if isinstance(e, (JobStarting, JobStarted, JobFinished))
    ]
    assert kinds.index("JobStarting") < kinds.index("JobStarted") < kinds.index("JobFinished")
    assert all(c.inputs for c in servicer.containers)


@pytest.mark.parametrize("kernel", [HANGS, HOLDS_GIL], ids=["python-hang", "gil-hang"])
def test_a_hang_is_killed_at_its_job_timeout_in_a_real_container(
    servicer: ModalServer, tmp_path: Path, monkeypatch, kernel: str
) -> None:
    monkeypatch.setenv("FIBTUI_TEST_HANG_N", "1")
    monkeypatch.setenv("FIBTUI_TEST_RELEASE", str(tmp_path / "never"))
    servicer.container_env.update(
        {"FIBTUI_TEST_HANG_N": "1", "FIBTUI_TEST_RELEASE": str(tmp_path / "never")}
    )
    record, _ = run_on(servicer, tmp_path, kernel, monkeypatch, job_timeout_s=3.0)
    st = {(j["axes"]["n"], j["role"]): j for j in record["jobs"]}
    assert st[(1, "candidate")]["status"] == "TIMEOUT" and "killed" in st[(1, "candidate")]["error"]
    assert st[(2, "candidate")]["status"] == "PASSED" and st[(2, "baseline")]["status"] == "PASSED"
    hung = [c for c in servicer.containers if c.stopped and c.inputs]
    assert hung and all(len(c.inputs) == 1 for c in hung)  # told to stop: given nothing more
    # the watchdog, not Modal's call timeout, ended it: the hung container lived seconds
    assert min(c.billed_s for c in hung) < 60


def test_a_kernel_that_raises_on_import_is_its_own_failure_not_the_containers(
    servicer: ModalServer, tmp_path: Path, monkeypatch
) -> None:
    record, _ = run_on(
        servicer, tmp_path, RAISES_ON_IMPORT, monkeypatch, batch_sizes=(1,), max_extra_calls=4
    )
    st = {j["role"]: j for j in record["jobs"]}
    # the candidate cannot build: its own COMPILE/RUNTIME error, never the infrastructure's
    assert st["candidate"]["status"] in ("COMPILE_ERROR", "RUNTIME_ERROR"), st
    assert st["baseline"]["status"] == "PASSED"


def test_a_worker_that_raises_while_loading_stops_its_container_and_is_retried_elsewhere(
    servicer: ModalServer, tmp_path: Path, monkeypatch
) -> None:
    from tests.test_modal_faults import CHILD_HOOKS

    servicer.container_env.update({"FIBTUI_TEST_LOAD_RAISES": "1", "PYTHONPATH": str(CHILD_HOOKS)})
    good = PY_TEMPLATE.format(body="    y.copy_(x * alpha)")
    record, _ = run_on(
        servicer, tmp_path, good, monkeypatch, batch_sizes=(1,), max_extra_calls=4, max_retries=1
    )
    # the infrastructure's failure, retried (max_retries 1 here) on a fresh container each time
    assert {j["status"] for j in record["jobs"]} == {"INFRA_ERROR"}, record["jobs"]
    assert all("failed while loading" in j["error"] for j in record["jobs"]), record["jobs"]
    assert "initialization error" in record["jobs"][0]["error"]
    used = [c for c in servicer.containers if c.inputs]
    assert len(used) == 2 and all(len(c.inputs) == 1 and c.stopped for c in used)


def test_a_poisoned_container_takes_no_further_input(
    servicer: ModalServer, tmp_path: Path, monkeypatch
) -> None:
    from tests.test_modal_faults import CHILD_HOOKS, POISONS

    servicer.container_env.update({"FIBTUI_TEST_POISON_N": "1", "PYTHONPATH": str(CHILD_HOOKS)})
    record, events = run_on(servicer, tmp_path, POISONS, monkeypatch, batch_sizes=(1, 2, 3))
    st = {(j["axes"]["n"], j["role"]): j["status"] for j in record["jobs"]}
    assert st[(1, "candidate")] == "RUNTIME_ERROR", st
    assert [s for k, s in st.items() if k != (1, "candidate")] == ["PASSED"] * 5
    poisoned = [c for c in servicer.containers if c.stopped and c.inputs]
    assert poisoned and all(len(c.inputs) == 1 for c in poisoned)
    assert servicer.calls["ContainerStop"] >= 1


def test_the_doctor_checks_the_container_and_runs_a_one_workload_gate(
    servicer: ModalServer, tmp_path: Path, monkeypatch
) -> None:
    """`fibtui modal doctor` end to end through Modal's protocol (the servicer): the probe call
    answers from a real container entrypoint (on this CPU: no GPU, which the doctor says), and the
    1-workload gate runs through the ModalRunner (the interpreter engine, as on a CPU)."""
    from fibtui.runners import modal_doctor

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2), kernel="good_py")
    ws = open_workspace(root)
    handles = modal_app.build_app(
        app_name="doctor", gpu="B200", image_ref="python:3.11", timeout_s=300, max_containers=1
    )
    lines: list[str] = []
    report = modal_doctor.run_doctor(
        ws, lines.append, prepare=prepare_run, handles=handles, engine="interpreter"
    )
    assert servicer.unimplemented == [], servicer.unimplemented
    checks = {c.name: c for c in report.checks}
    assert checks["modal client"].ok and checks["credentials"].ok
    assert checks["image"].ok and "python" in checks["image"].detail
    # this CPU has no GPU: the doctor says so, as it would for a container without one
    assert checks["GPU"].ok is False and "no GPU visible" in checks["GPU"].detail
    assert checks["1-workload gate"].ok, checks["1-workload gate"].detail
    assert report.run_id and report.container_seconds and report.container_seconds > 0
    assert report.cost_usd is not None and 0 < report.cost_usd < report.worst_case_cost_usd
    assert not report.ok  # the GPU check failed
    assert any("cost: about $" in line for line in lines)


def test_the_doctors_local_checks(monkeypatch) -> None:
    from fibtui.runners import modal_doctor

    assert modal_doctor.client_check("1.6.4").ok and not modal_doctor.client_check("1.5.4").ok
    assert not modal_doctor.client_check("1.7.0").ok
    assert "pip install 'modal>=1.6.4,<1.7'" in modal_doctor.client_check("1.0.5").detail
    probe = {
        "python": "3.12.1",
        "environment": {"torch": "2.9", "gpu": "NVIDIA B200", "capability": "10.0", "cuda": "13.0"},
        "nvidia_smi": "Driver Version: 580.65   CUDA Version: 12.8",
        "ncu": None,
    }
    checks = {c.name: c for c in modal_doctor.container_checks(probe, "B200")}
    assert checks["GPU"].ok and checks["compute capability"].ok
    assert (
        checks["driver vs CUDA"].ok is False
        and "older than torch's CUDA" in checks["driver vs CUDA"].detail
    )
    assert checks["ncu"].ok is None and "not in the image" in checks["ncu"].detail


#: a stand-in ncu for the container (this machine has no GPU counters): profiling writes a report
#: (or says the counters are off limits), --import prints prepared pages
FAKE_NCU = r"""#!{python}
import os, pathlib, sys
args = sys.argv[1:]
pages = pathlib.Path(os.environ["FAKE_NCU_PAGES"])
if "--import" in args:
    page, as_csv = args[args.index("--page") + 1], "--csv" in args
    name = {{("details", True): "details.csv", ("raw", True): "raw.csv", ("details", False): "details.txt"}}[(page, as_csv)]
    sys.stdout.write((pages / name).read_text())
    sys.exit(0)
if os.environ.get("FAKE_NCU_NO_COUNTERS"):
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
assert "--profile-from-start" in args and args[-3:-1] == ["profile", "--request"], args
assert "{{python}}" not in args  # the container put its own Python in
assert pathlib.Path(args[-1]).is_file()  # the worker's request was written in the container
pathlib.Path(args[args.index("--export") + 1]).write_bytes(b"NCU-REP from the container")
print("==PROF== Report written")
"""


@pytest.mark.parametrize("counters", [True, False], ids=["profiled", "no-counters"])
def test_ncu_on_modal_brings_the_report_back_or_says_it_cannot(
    servicer: ModalServer, tmp_path: Path, monkeypatch, counters: bool
) -> None:
    import sys

    from fibtui.runners import modal_ncu
    from fibtui.services.runs import profile_request
    from tests.test_ncu import BASE, TEXT_PAGE, details_csv, raw_csv

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ncu").write_text(FAKE_NCU.format(python=sys.executable))
    (bindir / "ncu").chmod(0o755)
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "details.csv").write_text(details_csv([("_gdn_decode", BASE)]))
    (pages / "raw.csv").write_text(
        raw_csv([("_gdn_decode", ["18.4", "25.19", "49.25", "64", "2,048", "0.256", "1.94", "x"])])
    )
    (pages / "details.txt").write_text(TEXT_PAGE.read_text())
    import os

    servicer.container_env.update(
        {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_NCU_PAGES": str(pages)}
    )
    if not counters:
        servicer.container_env["FAKE_NCU_NO_COUNTERS"] = "1"
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")
    ws = open_workspace(root)
    uuid = ws.dataset().workloads("tiny_scale").uuids[0]
    rep = ws.archive_root / "benchmarks" / "ncu" / "tiny.ncu-rep"
    handles = modal_app.build_app(
        app_name="ncu", gpu="B200", image_ref="python:3.11", timeout_s=300, max_containers=1
    )
    kwargs = dict(
        kernel_regex=None,
        launch_skip=0,
        launch_count=None,
        section_set="detailed",
        clock_control="none",
        timeout_s=60.0,
        say=lambda line: None,
        handles=handles,
        container_paths=False,
    )
    request = profile_request(ws, [uuid])
    if counters:
        result = modal_ncu.profile_on_modal(ws, request, rep, **kwargs)
        assert rep.read_bytes() == b"NCU-REP from the container"
        from fibtui.core.ncu import load_exported

        report = load_exported(result.details_csv, result.raw_csv)
        assert [launch.kernel for launch in report.launches] == ["_gdn_decode"]
        assert servicer.calls["FunctionMap"] == 1
    else:
        with pytest.raises(modal_ncu.NcuOnModalFailed, match="ERR_NVGPUCTRPERM"):
            modal_ncu.profile_on_modal(ws, request, rep, **kwargs)
        assert not rep.exists() and servicer.calls["FunctionMap"] == 1  # one call, nothing more
    assert servicer.unimplemented == []
