"""The Modal backend without Modal's servers: the plan, slicing, the runner's retries and cancel
(fake calls returning the function's structured results), the function body through modal 1.6's
``Function.local()`` on the CPU interpreter, the files the container gets, and token hygiene."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fibtui.core.errors import InputError, UsageError
from fibtui.core.runs import JobResult, JobSpec, Journal, RunHeader, SolutionRef, read_journal
from fibtui.core.settings import set_setting
from fibtui.core.workspace import open_workspace
from fibtui.runners.events import JobFinished, JobStarted, RunFinished, RunStarted, WorkerRestarted
from fibtui.runners.modal_runner import (
    CONTAINER_CACHE_DIR,
    ModalSettings,
    Task,
    VolumeFile,
    describe_failure,
    make_slices,
    modal_settings,
    plan_modal,
)
from fibtui.services.runs import RunOptions, prepare_resume, prepare_run
from tests.conftest import DEMO_DEFINITION, REPO
from tests.runner_helpers import TINY, make_candidate, make_tiny_workspace

#: the tests that run the function's body (fibtui's worker) need the gpu extra's torch; the others
#: (the plan, slicing, retries with fake calls) run without it
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the gpu extra (torch) is not installed: the worker cannot run here",
)

FAKE_ID = "ak-fibtuiTESTtokenID0123456789"
FAKE_SECRET = "as-fibtuiTESTsecretABCDEFGHIJKLMNOP"


def batch1(ws, n: int = 2) -> list[str]:
    wl = ws.dataset().workloads(DEMO_DEFINITION)
    return [u for u in wl.uuids if wl.axes_of(u)["batch_size"] == 1][:n]


# --------------------------------------------------------------------------------------------
# Fake calls: the structured result of run_slice, without running anything
# --------------------------------------------------------------------------------------------


def fake_out(request: dict[str, Any], status_for=lambda uuid, sid: "PASSED") -> dict[str, Any]:
    jobs = []
    for job in request["jobs"]:
        results = []
        for sid in job["solutions"]:
            status = status_for(job["workload"]["uuid"], sid)
            r: dict[str, Any] = {
                "solution_id": sid,
                "status": status,
                "reference_latency_ms": 1.0,
                "timing": {"kind": "cupti", "environment": {"gpu": "NVIDIA B200"}},
            }
            if status == "PASSED":
                r.update(latency_ms=0.01, max_abs_error=0.0, max_rel_error=0.0, speedup=100.0)
            else:
                r["error"] = "planted"
            results.append(r)
        jobs.append(
            {
                "job_id": job["job_id"],
                "uuid": job["workload"]["uuid"],
                "repeat": job["repeat"],
                "results": results,
                "wall_s": 0.5,
                "restart": False,
                "started": "2026-11-29T10:00:00+00:00",
            }
        )
    return {
        "environment": {"gpu": "NVIDIA B200"},
        "load": {s["id"]: {"ok": True} for s in request["solutions"]},
        "jobs": jobs,
        "timing_kind": "cupti",
        "poisoned": False,
        "slice_id": request["slice_id"],
        "container": {"host": "fake", "task_id": "ta-fake", "wall_s": 1.0},
    }


class FakeCall:
    def __init__(self, behave, request) -> None:
        self.behave = behave
        self.request = request
        self.cancelled = threading.Event()

    def result(self, timeout_s):
        return self.behave(self.request, self)

    def cancel(self) -> None:
        self.cancelled.set()


class FakeCaller:
    in_process = True

    def __init__(self, behave=lambda request, call: fake_out(request)) -> None:
        self.behave = behave
        self.calls: list[FakeCall] = []
        self.lock = threading.Lock()

    @contextmanager
    def session(self):
        yield self

    def submit(self, request):
        call = FakeCall(self.behave, json.loads(json.dumps(request)))
        with self.lock:
            self.calls.append(call)
        return call


def tiny_modal_run(tmp_path: Path, batch_sizes=(1, 2, 3, 4), workers=2, **opts):
    # an in-process Modal run needs the worker's torch here (prepare_run refuses it without)
    pytest.importorskip(
        "torch", reason="the gpu extra (torch) is not installed: the worker cannot run here"
    )
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=batch_sizes)
    base = make_candidate(root, "base_py", "good_py")
    ws = open_workspace(root)
    options = RunOptions(
        backend="modal",
        modal_in_process=True,
        workloads="all",
        workers=workers,
        baseline=str(base),
        solutions=[str(root / "solution" / "triton")],
        **opts,
    )
    return ws, prepare_run(ws, options)


def journal_lines(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "journal.jsonl").read_text().splitlines() if x.strip()]


# --------------------------------------------------------------------------------------------
# Slicing
# --------------------------------------------------------------------------------------------


def test_slices_keep_pairs_together_and_balance() -> None:
    tasks = [Task(f"u{i}", 0, ["baseline-0", "candidate-1"]) for i in range(7)]
    slices = make_slices(tasks, 3)
    assert len(slices) == 3
    assert sorted(s.jobs for s in slices) == [4, 4, 6]
    seen = [t.uuid for s in slices for t in s.tasks]
    assert sorted(seen) == sorted(t.uuid for t in tasks)
    assert all(t.sids == ["baseline-0", "candidate-1"] for s in slices for t in s.tasks)
    assert make_slices(tasks, 50)[-1].number == 7  # never more slices than groups
    assert make_slices([], 4) == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=4), max_size=40),
    st.integers(min_value=1, max_value=12),
)
def test_slicing_property(sizes: list[int], workers: int) -> None:
    tasks = [Task(f"u{i}", i % 3, [f"s{j}" for j in range(n)]) for i, n in enumerate(sizes)]
    slices = make_slices(tasks, workers)
    assert len(slices) <= max(1, workers) and all(s.tasks for s in slices)
    ids = [id(t) for s in slices for t in s.tasks]
    assert sorted(ids) == sorted(id(t) for t in tasks)  # every group exactly once, never split
    if slices:
        loads = [s.jobs for s in slices]
        assert max(loads) - min(loads) <= max(sizes)


# --------------------------------------------------------------------------------------------
# Settings and the plan
# --------------------------------------------------------------------------------------------


def test_settings_from_fibtui_toml(tmp_path: Path) -> None:
    assert modal_settings(tmp_path).gpu == "B200"
    assert modal_settings(tmp_path).image == "flashinfer/flashinfer-ci-cu132:20260401-2c675fb"
    (tmp_path / "fibtui.toml").write_text(
        '[modal]\ngpu = "H200"\nimage_tag = "latest"\ntimeout = 600\n'
        'price_per_gpu_hour_usd = 4.5\nvolume = "mine"\nworkers = 3\n'
    )
    s = modal_settings(tmp_path)
    assert (s.gpu, s.image, s.timeout_s, s.price_per_gpu_hour_usd, s.volume, s.workers) == (
        "H200",
        "flashinfer/flashinfer-ci-cu132:latest",
        600.0,
        4.5,
        "mine",
        3,
    )
    assert set(s.from_file) == {
        "gpu",
        "image_tag",
        "timeout",
        "price_per_gpu_hour_usd",
        "volume",
        "workers",
    }
    for bad, field in (
        ("workers = 0", "modal.workers"),
        ("gpu = 3", "modal.gpu"),
        ("timeout_s = 2", "modal.timeout_s"),
        ('price_per_gpu_hour_usd = "cheap"', "modal.price_per_gpu_hour_usd"),
        ('pip = "x"', "modal.pip"),
    ):
        (tmp_path / "fibtui.toml").write_text(f"[modal]\n{bad}\n")
        with pytest.raises(InputError) as exc:
            modal_settings(tmp_path)
        assert exc.value.field == field and "fibtui.toml" in str(exc.value)
    (tmp_path / "fibtui.toml").write_text("modal = 3\n")
    with pytest.raises(InputError):
        modal_settings(tmp_path)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "gpu",
                "image",
                "image_tag",
                "volume",
                "timeout_s",
                "timeout",
                "workers",
                "price_per_gpu_hour_usd",
                "max_retries",
                "pip",
                "other",
            ]
        ),
        _VALUES,
        max_size=5,
    )
)
def test_settings_parser_never_crashes(tmp_path: Path, table: dict) -> None:
    import tomlkit

    doc = tomlkit.document()
    doc["modal"] = {k: v for k, v in table.items() if v is not None}
    (tmp_path / "fibtui.toml").write_text(tomlkit.dumps(doc))
    try:
        s = modal_settings(tmp_path)
    except InputError as exc:
        assert exc.field and exc.field.startswith("modal.")
        return
    assert isinstance(s, ModalSettings) and s.workers >= 1 and s.timeout_s >= 10


def test_plan_without_network_and_without_importing_modal(demo_ws: Path) -> None:
    code = (
        "import json, sys\n"
        "from fibtui.cli import main\n"
        f"rc = main(['run', '--backend', 'modal', '--plan', '--json', '--workloads', 'all', '--workers', '8', '--workspace', {str(demo_ws)!r}])\n"
        "sys.stderr.write(json.dumps({'rc': rc, 'mods': sorted(m for m in sys.modules if m == 'modal' or m.startswith(('modal.', 'fibtui.runners.modal')))}))\n"
    )
    env = dict(os.environ, MODAL_TOKEN_ID=FAKE_ID, MODAL_TOKEN_SECRET=FAKE_SECRET)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    info = json.loads(proc.stderr.strip().splitlines()[-1])
    assert info["rc"] == 0, proc.stderr
    assert info["mods"] == ["fibtui.runners.modal_runner"]  # the plan never imports modal itself
    plan = json.loads(proc.stdout)
    assert {
        "backend",
        "gpu",
        "image",
        "containers",
        "jobs",
        "estimated_gpu_seconds",
        "estimated_cost_usd",
        "estimate_source",
        "volume",
        "jobs_per_container",
    } <= set(plan)
    assert (
        plan["backend"] == "modal"
        and plan["gpu"] == "B200"
        and plan["containers"] == 8
        and plan["jobs"] == 50
    )
    assert sorted(plan["jobs_per_container"]) == [6] * 6 + [7] * 2
    assert plan["image"] == "flashinfer/flashinfer-ci-cu132:20260401-2c675fb"
    assert plan["per_job_seconds"] == 2.0 and "default" in plan["estimate_source"]
    assert plan["estimated_gpu_seconds"] == pytest.approx(8 * 90 + 50 * 2.0)
    # at the container's full rate: the GPU, 8 reserved CPU cores and 32 GiB of memory
    rate = 6.25 + 8 * 0.0472 + 32 * 0.008
    assert plan["price_per_container_hour_usd"] == pytest.approx(rate, abs=1e-4)
    assert plan["estimated_cost_usd"] == pytest.approx((8 * 90 + 50 * 2.0) / 3600 * rate, abs=1e-4)
    assert plan["credentials"] == "env" and not plan["volume_needed"]
    assert FAKE_ID not in proc.stdout + proc.stderr and FAKE_SECRET not in proc.stdout + proc.stderr


def _fake_gpu_run(
    ws_root: Path,
    run_id: str,
    walls: list[float],
    definition: str = DEMO_DEFINITION,
    kind: str = "cupti",
) -> None:
    folder = ws_root / "optimize_ops" / "runs" / run_id
    folder.mkdir(parents=True)
    refs = [
        SolutionRef("base", "baseline", "snapshots/b"),
        SolutionRef("cand", "candidate", "snapshots/c"),
    ]
    jobs = [
        JobSpec(f"u{i}", {"batch_size": 1}, ref.name, ref.role, 0)
        for i in range(len(walls))
        for ref in refs
    ]
    header = RunHeader(
        run_id, definition, "local", kind, "cold", refs, jobs, 1, "all", "2026-11-28T00:00:00+00:00"
    )
    j = Journal(folder)
    j.write_header(header)
    for i, wall in enumerate(walls):
        for ref in refs:
            j.append_result(
                JobResult(
                    f"u{i}",
                    {"batch_size": 1},
                    ref.name,
                    ref.role,
                    0,
                    "PASSED",
                    latency_ms=0.01,
                    wall_s=wall,
                )
            )
    j.append_end("finished")


def test_plan_estimates_from_the_workspace_history_and_settings(demo_ws: Path) -> None:
    # paired groups: each group's wall time is shared by its two solutions
    _fake_gpu_run(demo_ws, "20261128-000000_demo_local", [2.0, 4.0, 6.0])
    _fake_gpu_run(
        demo_ws, "20261128-000001_demo_interpreter", [500.0], kind="cpu-interpreter"
    )  # ignored
    _fake_gpu_run(demo_ws, "20261128-000002_other_local", [900.0], definition="other")  # ignored
    set_setting(demo_ws, "modal.price_per_gpu_hour_usd", 3.6)
    set_setting(demo_ws, "modal.container_overhead_s", 10)
    ws = open_workspace(demo_ws)
    plan = plan_modal(ws, RunOptions(backend="modal", workloads="all", workers=5, repeats=2))
    assert plan.per_job_seconds == pytest.approx(2.0)  # median of 1, 2, 3 s per job
    assert "median of 3 job(s) in 1 past GPU run(s)" in plan.per_job_source
    # the TUI's sweep estimate on the interpreter reads the same history: only interpreter runs
    from fibtui.core.runs import history_seconds_per_job

    per_job, source = history_seconds_per_job(ws.archive_root, DEMO_DEFINITION, "cpu-interpreter")
    assert per_job == pytest.approx(250.0) and "1 past cpu-interpreter run(s)" in source
    assert plan.jobs == 100 and plan.containers == 5 and plan.jobs_per_container == [20] * 5
    assert plan.estimated_gpu_seconds == pytest.approx(5 * 10 + 100 * 2.0)
    assert plan.estimated_cost_usd == pytest.approx(250 / 3600 * (3.6 + 8 * 0.0472 + 32 * 0.008))
    text = "\n".join(plan.lines())
    assert (
        "100 jobs" in text
        and "5 container(s)" in text
        and "$0.29" in text
        and "median of 3 job(s)" in text
    )


def test_plan_lists_the_volume_and_the_upload_commands(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    ds = root / "dataset"
    blob = ds / "blob" / "tiny" / "x1.safetensors"
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"\0" * 100)
    wl = ds / "workloads" / f"{TINY}.jsonl"
    lines = [json.loads(x) for x in wl.read_text().splitlines()]
    lines[0]["workload"]["inputs"]["x"] = {
        "type": "safetensors",
        "path": "blob/tiny/x1.safetensors",
        "tensor_key": "x",
    }
    lines[1]["workload"]["inputs"]["x"] = {
        "type": "safetensors",
        "path": "blob/tiny/missing.safetensors",
        "tensor_key": "x",
    }
    wl.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    plan = plan_modal(open_workspace(root), RunOptions(backend="modal", workloads="all"))
    assert plan.volume_needed and plan.volume_dir == "dataset"
    assert {(Path(f.local).name, f.remote, f.size) for f in plan.volume_files} == {
        ("x1.safetensors", "/dataset/blob/tiny/x1.safetensors", 100),
        ("missing.safetensors", "/dataset/blob/tiny/missing.safetensors", None),
    }
    assert plan.upload_commands == [
        f"modal volume put --force fibtui-datasets {ds / 'blob'} /dataset/blob"
    ]
    assert any("missing on this machine" in n for n in plan.notes)
    assert plan.container_dataset_root == "/data/dataset"


def test_plan_refuses_other_backends(capsys, demo_ws: Path) -> None:
    from fibtui.cli import main

    assert main(["run", "--backend", "interpreter", "--plan", "--workspace", str(demo_ws)]) == 2
    assert "--plan goes with --backend modal" in capsys.readouterr().err


def test_modal_backend_without_credentials_is_a_clean_usage_error(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(tmp_path / "none.toml"))
    root = make_tiny_workspace(tmp_path / "ws")
    with pytest.raises(UsageError, match="no Modal credentials"):
        prepare_run(open_workspace(root), RunOptions(backend="modal", workloads="all"))
    assert not (root / "optimize_ops" / "runs").exists() or not any(
        (root / "optimize_ops" / "runs").iterdir()
    )


# --------------------------------------------------------------------------------------------
# The runner with fake calls: journal, retries, isolation, timeouts, cancel
# --------------------------------------------------------------------------------------------


def test_fake_calls_flow_into_the_journal_like_a_local_run(tmp_path: Path) -> None:
    ws, prepared = tiny_modal_run(tmp_path)
    caller = FakeCaller()
    prepared.runner.caller = caller
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    assert (
        record["state"] == "complete"
        and record["summary"]["passed"] == 8
        and record["backend"] == "modal"
    )
    assert len(caller.calls) == 2  # two containers
    for call in caller.calls:  # paired baseline and candidate in the same job of the same slice
        assert all(
            job["solutions"] == ["baseline-0", "candidate-1"] for job in call.request["jobs"]
        )
        assert {s["id"] for s in call.request["solutions"]} == {"baseline-0", "candidate-1"}
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
    finished = [e for e in events if isinstance(e, JobFinished)]
    assert len(finished) == 8 and finished[-1].done == 8 and finished[-1].passed == 8
    # without live events from a container (this caller sends none) no job is said to run: they
    # stay queued until their results come (tests/test_modal_faults.py has the live ones)
    assert sum(isinstance(e, JobStarted) for e in events) == 0
    lines = journal_lines(prepared.folder)
    assert (
        lines[0]["kind"] == "header"
        and lines[0]["backend"] == "modal"
        and lines[-1]["kind"] == "end"
    )
    results = [x for x in lines if x["kind"] == "result"]
    # every field (a limit only on an UNSUPPORTED_HERE row, side effects only when there were some)
    assert set(results[0]) == {"kind", *JobResult.__dataclass_fields__} - {"limit", "side_effects"}
    assert {r["wall_s"] for r in results} == {0.5} and {r["started"] for r in results} == {
        "2026-11-29T10:00:00+00:00"
    }
    assert {
        (r["timing"]["slot"], r["timing"]["worker_device"], r["timing"]["container"])
        for r in results
    } == {(1, "in-process", "ta-fake"), (2, "in-process", "ta-fake")}


def test_a_failed_slice_is_retried_alone_and_merged_back(tmp_path: Path) -> None:
    ws, prepared = tiny_modal_run(tmp_path)
    failed = []

    def behave(request, call):
        if request["slice_id"] == 1 and not failed:
            failed.append(request)
            raise RuntimeError("the container was lost")
        return fake_out(request)

    caller = FakeCaller(behave)
    prepared.runner.caller = caller
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    assert record["state"] == "complete" and record["summary"]["passed"] == 8
    assert len(caller.calls) == 3
    retry = caller.calls[-1].request
    assert [j["job_id"] for j in retry["jobs"]] == [
        j["job_id"] for j in failed[0]["jobs"]
    ]  # the same slice, alone
    assert any(
        isinstance(e, WorkerRestarted) and "the container was lost" in e.reason for e in events
    )
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 8 and not contents.duplicate_lines
    retried = {r.uuid for r in contents.results.values() if r.attempt == 2}
    assert retried == {j["workload"]["uuid"] for j in failed[0]["jobs"]}


def test_a_slice_that_keeps_failing_is_isolated_down_to_the_culprit(tmp_path: Path) -> None:
    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1, 2, 3), workers=1)
    bad = "wl-001-n2"

    def behave(request, call):
        jobs = request["jobs"]
        if any(j["workload"]["uuid"] == bad and "candidate-1" in j["solutions"] for j in jobs):
            raise RuntimeError("container exited")
        return fake_out(request)

    caller = FakeCaller(behave)
    prepared.runner.caller = caller
    record = prepared.runner.run(lambda e: None).to_json()
    st = {(j["uuid"], j["role"]): (j["status"], j["error"]) for j in record["jobs"]}
    assert st[(bad, "candidate")][0] == "INFRA_ERROR" and "alone" in st[(bad, "candidate")][1]
    assert "container exited" in st[(bad, "candidate")][1]
    assert {s for k, (s, _) in st.items() if k != (bad, "candidate")} == {"PASSED"}
    # 3 tries of the whole slice, then one container per workload (3), then each solution alone (2)
    assert len(caller.calls) == 3 + 3 + 2
    assert record["summary"]["done"] == 6 and record["state"] == "failed"


@pytest.mark.parametrize(
    "error, status",
    [
        ("FunctionTimeoutError", "TIMEOUT"),  # Modal's execution timeout: the kernel's
        ("OutputExpiredError", "INFRA_TIMEOUT"),  # the others are the infrastructure's
        ("VolumeUploadTimeoutError", "INFRA_TIMEOUT"),
        ("SliceTimeout", "INFRA_TIMEOUT"),
        ("ConnectionError", "INFRA_ERROR"),
    ],
)
def test_only_modals_execution_timeout_is_a_timeout(
    tmp_path: Path, error: str, status: str
) -> None:
    import modal.exception

    from fibtui.runners import modal_app

    cls = getattr(modal.exception, error, None) or getattr(modal_app, error)
    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1,), workers=1)

    def behave(request, call):
        if (
            request["jobs"][0]["solutions"] == ["candidate-1"]
            or len(request["jobs"][0]["solutions"]) > 1
        ):
            raise cls(f"{error} from the call")
        return fake_out(request)

    prepared.runner.caller = FakeCaller(behave)
    record = prepared.runner.run(lambda e: None).to_json()
    st = {j["role"]: j for j in record["jobs"]}
    assert st["candidate"]["status"] == status, st["candidate"]
    assert error in st["candidate"]["error"]
    assert st["baseline"]["status"] == "PASSED"
    if (
        status != "TIMEOUT"
    ):  # retried alone, as any infrastructure failure, a bounded number of times
        assert len(prepared.runner.caller.calls) == 1 + 2 + 2


def test_infra_results_inside_a_slice_are_retried_alone(tmp_path: Path) -> None:
    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1, 2), workers=2)
    seen: list[tuple[str, str]] = []

    def behave(request, call):
        def status_for(uuid, sid):
            if (uuid, sid) == ("wl-000-n1", "baseline-0") and (uuid, sid) not in seen:
                seen.append((uuid, sid))
                return "INFRA_ERROR"
            return "PASSED"

        out = fake_out(request, status_for)
        if request["slice_id"] == 2:  # a container that forgot a result: also retried
            out["jobs"][0]["results"] = out["jobs"][0]["results"][:1]
        return out

    caller = FakeCaller(behave)
    prepared.runner.caller = caller
    record = prepared.runner.run(lambda e: None).to_json()
    assert record["state"] == "complete" and record["summary"]["passed"] == 4
    retry_jobs = [
        (j["workload"]["uuid"], j["solutions"]) for c in caller.calls[2:] for j in c.request["jobs"]
    ]
    assert ("wl-000-n1", ["baseline-0"]) in retry_jobs and (
        "wl-001-n2",
        ["candidate-1"],
    ) in retry_jobs
    contents = read_journal(prepared.folder / "journal.jsonl")
    assert len(contents.results) == 4 and not contents.duplicate_lines
    assert contents.results["0|baseline|base_py|wl-000-n1"].attempt == 2


def test_cancel_stops_the_calls_in_flight_and_resume_finishes(tmp_path: Path) -> None:
    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1, 2, 3, 4), workers=2)
    cancel = threading.Event()

    def behave(request, call):
        if request["slice_id"] == 2:
            assert call.cancelled.wait(30), "never cancelled"
            raise RuntimeError("cancelled")
        return fake_out(request)

    caller = FakeCaller(behave)
    prepared.runner.caller = caller

    def on_event(e):
        if isinstance(e, JobFinished) and e.done >= 4:
            cancel.set()

    record = prepared.runner.run(on_event, cancel).to_json()
    assert record["state"] == "cancelled" and record["summary"]["done"] == 4
    assert caller.calls[1].cancelled.is_set() and len(caller.calls) == 2
    assert journal_lines(prepared.folder)[-1]["state"] == "cancelled"
    resumed = prepare_resume(ws, prepared.run_id)
    caller2 = FakeCaller()
    resumed.runner.caller = caller2
    record = resumed.runner.run(lambda e: None).to_json()
    assert record["state"] == "complete" and record["summary"]["done"] == 8
    assert (
        sum(len(j["solutions"]) for c in caller2.calls for j in c.request["jobs"]) == 4
    )  # only what was missing


def test_remote_mode_requests_use_container_paths_and_sync_the_volume(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The Modal (not in-process) path with Modal's objects replaced: spawn/get/cancel, the volume
    listing and upload, container paths in the request; and no token anywhere."""
    from fibtui.runners import modal_app

    monkeypatch.setenv("MODAL_TOKEN_ID", FAKE_ID)
    monkeypatch.setenv("MODAL_TOKEN_SECRET", FAKE_SECRET)
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    ds = root / "dataset"
    for name in ("a", "b"):
        (ds / "blob").mkdir(exist_ok=True)
        (ds / "blob" / f"{name}.safetensors").write_bytes(b"\1" * (10 if name == "a" else 20))
    wl = ds / "workloads" / f"{TINY}.jsonl"
    lines = [json.loads(x) for x in wl.read_text().splitlines()]
    for line, name in zip(lines, ("a", "b"), strict=True):
        line["workload"]["inputs"]["x"] = {
            "type": "safetensors",
            "path": f"blob/{name}.safetensors",
            "tensor_key": "x",
        }
    wl.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="modal", workloads="all", workers=2))

    class Entry:
        def __init__(self, path, size):
            self.path, self.size, self.type = path, size, 1

    class FakeVolume:
        def __init__(self):
            self.put: list[tuple[str, str]] = []

        def listdir(self, folder, recursive=False):
            assert folder == "/dataset" and recursive
            return [
                Entry("dataset/blob/a.safetensors", 10),
                Entry("dataset/blob/b.safetensors", 3),
            ]  # b is stale

        @contextmanager
        def batch_upload(self, force=False):
            vol = self

            class Batch:
                def put_file(self, local, remote):
                    vol.put.append((local, remote))

            yield Batch()

    class FakeFunctionCall:
        def __init__(self, request, fail):
            self.request, self.fail, self.cancelled = request, fail, False

        def get(self, timeout=None):
            if self.fail:
                raise TimeoutError()  # the builtin one: nothing back in time
            return fake_out(self.request)

        def cancel(self, terminate_containers=False):
            self.cancelled = terminate_containers

    class FakeHandles:
        def __init__(self):
            self.spawned: list[FakeFunctionCall] = []
            self.runs = 0
            handles = self

            class App:
                @contextmanager
                def run(self):
                    handles.runs += 1
                    yield

            class Function:
                def spawn(self, request):
                    call = FakeFunctionCall(
                        json.loads(json.dumps(request)), fail=not handles.spawned
                    )
                    handles.spawned.append(call)
                    return call

            self.app, self.function = App(), Function()

    handles = FakeHandles()
    volume = FakeVolume()
    prepared.runner.caller = modal_app.ModalCaller(handles)
    prepared.runner.volume = volume
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    assert record["state"] == "complete" and handles.runs == 1
    assert volume.put == [(str(ds / "blob" / "b.safetensors"), "/dataset/blob/b.safetensors")]
    assert (
        handles.spawned[0].cancelled is True
    )  # the timed-out call was cancelled, containers terminated
    cfg = handles.spawned[0].request["config"]
    assert (
        cfg["dataset_root"] == "/data/dataset"
        and cfg["cache_dir"] == CONTAINER_CACHE_DIR
        and cfg["device"] == "cuda:0"
    )
    assert record["timing_kind"] == "cupti" and record["settings"]["modal"]["gpu"] == "B200"
    assert record["settings"]["modal"]["in_process"] is False
    dump = "".join(p.read_text(errors="replace") for p in prepared.folder.rglob("*") if p.is_file())
    dump += json.dumps([str(e) for e in events]) + "".join(capsys.readouterr())
    assert FAKE_ID not in dump and FAKE_SECRET not in dump


def test_failure_messages_never_carry_a_token(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MODAL_TOKEN_ID", FAKE_ID)
    monkeypatch.setenv("MODAL_TOKEN_SECRET", FAKE_SECRET)
    assert FAKE_SECRET not in describe_failure(
        RuntimeError(f"auth failed for {FAKE_ID}:{FAKE_SECRET}")
    )
    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1,), workers=1)

    def behave(request, call):
        raise RuntimeError(f"bad token {FAKE_ID} {FAKE_SECRET}")

    prepared.runner.caller = FakeCaller(behave)
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    assert record["summary"]["done"] == 2 and {j["status"] for j in record["jobs"]} == {
        "INFRA_ERROR"
    }
    dump = "".join(
        p.read_text(errors="replace") for p in prepared.folder.rglob("*") if p.is_file()
    ) + repr(events)
    assert FAKE_ID not in dump and FAKE_SECRET not in dump and "***" in dump


def test_volume_files_are_deduplicated() -> None:
    from fibtui.runners.modal_runner import volume_files_for

    wl = {
        "u1": {
            "inputs": {
                "x": {"type": "safetensors", "path": "blob/x.st", "tensor_key": "a"},
                "y": {"type": "safetensors", "path": "blob/x.st", "tensor_key": "b"},
                "z": {"type": "random"},
            }
        }
    }
    files = volume_files_for(Path("/nowhere"), wl, "ds")
    assert files == [VolumeFile("/nowhere/blob/x.st", "/ds/blob/x.st", None)]


# --------------------------------------------------------------------------------------------
# The function body, in-process (Function.local()), and what the container gets
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_torch
def test_in_process_modal_run_on_the_demo_matches_a_local_run(
    demo_ws: Path, tmp_path: Path, monkeypatch
) -> None:
    """modal 1.6's Function.local() runs run_slice (fibtui.worker.engine.execute) in this process
    on Triton's CPU interpreter; the journal and run.json have the shape of a local run."""
    import tempfile

    from fibtui.runners.modal_app import InProcessCaller

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    ws = open_workspace(demo_ws)
    uuids = batch1(ws, 2)
    twin = demo_ws / "candidates" / "same_again"
    shutil.copytree(demo_ws / "solution" / "triton", twin)
    base = str(demo_ws / "solution" / "triton")
    prepared = prepare_run(
        ws,
        RunOptions(
            backend="modal",
            modal_in_process=True,
            workloads=",".join(uuids),
            baseline=base,
            solutions=[str(twin)],
            workers=2,
        ),
    )
    events: list[object] = []
    interpret_before = os.environ.get("TRITON_INTERPRET")
    record = prepared.runner.run(events.append).to_json()
    assert (
        os.environ.get("TRITON_INTERPRET") == interpret_before
    )  # the in-process caller restores it
    caller = prepared.runner.caller
    assert isinstance(caller, InProcessCaller) and type(caller.function).__name__ == "Function"
    assert record["summary"]["passed"] == 4 and record["summary"]["complete"], record["jobs"]
    assert record["backend"] == "modal" and record["timing_kind"] == "cpu-interpreter"
    assert prepared.runner.calls == 2
    started = [e for e in events if isinstance(e, JobStarted)]
    assert (
        len(started) == 2
        and all(len(e.solutions) == 2 for e in started)
        and {e.slot for e in started} == {1, 2}
    )
    assert all(j["timing"]["environment"]["backend"] == "interpreter" for j in record["jobs"])

    local = prepare_run(
        ws,
        RunOptions(backend="interpreter", workloads=uuids[0], baseline=base, solutions=[str(twin)]),
    )
    local_record = local.runner.run(lambda e: None).to_json()
    assert set(local_record) == set(record)
    assert set(local_record["jobs"][0]) == set(record["jobs"][0])
    assert set(local_record["jobs"][0]["timing"]) | {"container"} == set(
        record["jobs"][0]["timing"]
    )
    assert set(local_record["summary"]) == set(record["summary"])
    assert (
        {j["status"] for j in local_record["jobs"]}
        == {j["status"] for j in record["jobs"]}
        == {"PASSED"}
    )
    assert (
        list(scratch.iterdir()) == []
    )  # execute() and the local worker removed their build folders


@pytest.mark.slow
@needs_torch
def test_the_container_needs_only_the_worker_and_the_app_file(tmp_path: Path) -> None:
    """The files Modal's own mount logic would put in the container (add_local_python_source of
    CONTAINER_MODULES), alone on the path: run_slice imports and runs a job."""
    from modal.mount import _Mount

    from fibtui.runners.modal_app import CONTAINER_MODULES

    root = tmp_path / "root"
    mount = _Mount._from_local_python_packages(*CONTAINER_MODULES)
    files = [
        (local, remote) for entry in mount._entries for local, remote in entry.get_files_to_upload()
    ]
    remotes = sorted(str(r) for _, r in files)
    assert (
        "/root/fibtui/runners/modal_app.py" in remotes
        and "/root/fibtui/worker/engine.py" in remotes
    )
    # of the core, only the standard-library modules the worker imports: what solutions need, how
    # each definition is judged, whether a process is alive (the serving worker's orphan watch)
    assert sorted(r for r in remotes if r.startswith("/root/fibtui/core")) == [
        "/root/fibtui/core/gpuarch.py",
        "/root/fibtui/core/presets.py",
        "/root/fibtui/core/procs.py",
        "/root/fibtui/core/status.py",
        "/root/fibtui/core/toolchain.py",
    ]
    assert not any(r.startswith("/root/fibtui/ui") for r in remotes)
    assert (
        "/root/fibtui/__init__.py" not in remotes
    )  # fibtui is a namespace package in the container
    for local, remote in files:
        target = root / Path(remote).relative_to("/root")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
    ws = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    from fibtui.core.dataset import Dataset

    ds = Dataset(ws / "dataset")
    request = {
        "slice_id": 7,
        "config": {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
            "cache_dir": str(tmp_path / "cache"),
        },
        "definition": ds.definition(TINY).raw,
        "solutions": [
            {
                "id": "candidate-0",
                "name": "tiny",
                "spec": {
                    "language": "triton",
                    "entry_point": "kernel.py::scale",
                    "destination_passing_style": True,
                },
                "sources": [
                    {
                        "path": "kernel.py",
                        "content": (ws / "solution" / "triton" / "kernel.py").read_text(),
                    }
                ],
            }
        ],
        "jobs": [
            {
                "job_id": "0|wl-000-n1",
                "workload": ds.workloads(TINY).get("wl-000-n1").to_json(),
                "repeat": 0,
                "solutions": ["candidate-0"],
            }
        ],
    }
    (tmp_path / "request.json").write_text(json.dumps(request))
    code = (
        "import json, os, sys\n"
        "root = sys.argv[1]\n"
        "sys.path[:] = [root] + [p for p in sys.path if p and p != os.getcwd() and not os.path.isfile(os.path.join(p, 'fibtui', '__init__.py'))]\n"
        "import fibtui.runners.modal_app as m\n"
        "out = m.run_slice(json.load(open(sys.argv[2])))\n"
        "print(json.dumps({'file': m.__file__, 'out': out, 'mods': sorted(k for k in sys.modules if k.split('.')[0] in ('fibtui', 'polars', 'textual', 'rich'))}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root), str(tmp_path / "request.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["file"].startswith(str(root))
    assert not [m for m in info["mods"] if m.startswith(("polars", "textual", "rich"))]
    # the container's parent only watches: the worker (and the two core tables it reads) run in
    # its child, which imported the same copy (the job below PASSED from it)
    assert [m for m in info["mods"] if m.startswith("fibtui.core")] == []
    assert "fibtui.worker.engine" not in info["mods"]
    out = info["out"]
    assert out["slice_id"] == 7 and out["container"]["wall_s"] > 0
    assert out["jobs"][0]["results"][0]["status"] == "PASSED" and out["jobs"][0]["started"]


@needs_torch
def test_modal_modules_are_imported_only_by_the_modal_backend(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,))
    code = (
        "import json, sys\n"
        "import fibtui.cli, fibtui.ui.app\n"
        "fibtui.cli.build_parser()\n"
        "from fibtui.core.workspace import open_workspace\n"
        "from fibtui.services.runs import RunOptions, prepare_run\n"
        f"prepare_run(open_workspace({str(root)!r}), RunOptions(backend='interpreter', workloads='all'))\n"
        "before = sorted(m for m in sys.modules if m == 'modal' or m.startswith(('modal.', 'fibtui.runners.modal')))\n"
        f"prepare_run(open_workspace({str(root)!r}), RunOptions(backend='modal', modal_in_process=True, workloads='all'))\n"
        "mid = sorted(m for m in sys.modules if m == 'modal' or m.startswith('fibtui.runners.modal'))\n"
        "print(json.dumps([before, mid]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    before, mid = json.loads(out.stdout)
    assert before == []
    assert mid == ["fibtui.runners.modal_runner"]  # preparing a modal run still needs no modal


@pytest.mark.slow
@needs_torch
def test_cli_in_process_run_prints_and_records_no_token(tmp_path: Path) -> None:
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2))
    env = dict(
        os.environ, MODAL_TOKEN_ID=FAKE_ID, MODAL_TOKEN_SECRET=FAKE_SECRET, PYTHONPATH=str(REPO)
    )
    procs = []
    for argv in (
        ["run", "--backend", "modal", "--plan", "--json"],
        ["run", "--backend", "modal", "--plan"],
        [
            "run",
            "--backend",
            "modal",
            "--modal-in-process",
            "--workloads",
            "all",
            "--workers",
            "2",
            "--json",
        ],
        ["status", "--json"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "fibtui", *argv, "--workspace", str(root)],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])
        procs.append(proc)
    assert (
        "Modal plan for tiny_scale" in procs[1].stdout
        and "credentials: MODAL_TOKEN_ID" in procs[1].stdout
    )
    rec = json.loads(procs[2].stdout)
    assert rec["backend"] == "modal" and rec["summary"]["complete"] and rec["summary"]["total"] == 2
    assert (
        "2 job(s) in 2 slice(s) in this process" in procs[2].stderr and "[2/2]" in procs[2].stderr
    )
    files = "".join(
        p.read_text(errors="replace") for p in (root / "optimize_ops").rglob("*") if p.is_file()
    )
    for text in [*(p.stdout + p.stderr for p in procs), files]:
        assert FAKE_ID not in text and FAKE_SECRET not in text


def test_modal_unreachable_is_one_line_and_the_run_can_resume(tmp_path: Path, monkeypatch) -> None:
    from fibtui.runners.modal_runner import ModalUnavailable

    ws, prepared = tiny_modal_run(tmp_path, batch_sizes=(1,), workers=1)

    class Unreachable(FakeCaller):
        @contextmanager
        def session(self):
            raise ConnectionError(f"could not connect to api.modal.com with {FAKE_SECRET}")
            yield self

    prepared.runner.caller = Unreachable()
    monkeypatch.setenv("MODAL_TOKEN_SECRET", FAKE_SECRET)
    with pytest.raises(ModalUnavailable) as exc:
        prepared.runner.run(lambda e: None)
    text = exc.value.one_line()
    assert (
        "could not connect" in text
        and f"--resume {prepared.run_id}" in text
        and FAKE_SECRET not in text
    )
    assert exc.value.exit_code == 1 and not (prepared.folder / "lock").exists()
    resumed = prepare_resume(ws, prepared.run_id)
    resumed.runner.caller = FakeCaller()
    assert resumed.runner.run(lambda e: None).state == "complete"


def test_failure_kinds_name_only_modals_execution_timeout_the_kernels() -> None:
    import modal.exception as me

    from fibtui.runners.modal_runner import INFRA, INFRA_TIMEOUT, KERNEL_TIMEOUT, failure_kind

    assert (
        failure_kind(me.FunctionTimeoutError("Function exceeded timeout of 600 s"))
        == KERNEL_TIMEOUT
    )
    # a container that never started is the infrastructure's, whatever class carries it
    assert failure_kind(me.FunctionTimeoutError("startup timeout exceeded")) == INFRA_TIMEOUT
    for exc in (me.OutputExpiredError("x"), me.MountUploadTimeoutError("x"), TimeoutError()):
        assert failure_kind(exc) == INFRA_TIMEOUT
    for exc in (me.ConnectionError("x"), me.InternalFailure("x"), RuntimeError("lost")):
        assert failure_kind(exc) == INFRA
