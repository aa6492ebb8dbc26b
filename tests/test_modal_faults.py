"""Modal's cost faults (issue 21), against tests/fake_modal.py: Modal's queue of limited
containers, warm reuse, execution timeouts counted from an input's start, cancel and billing, with
fibtui's real function body (run_slice) running the worker in each fake container.

- a container whose kernel lost the CUDA context, or whose job hung, stops taking inputs: Modal
  never gives it another slice, and the jobs it did not run go to a fresh container without
  counting an attempt;
- the runner never has more calls in flight than containers, and Modal's timeout counts from a
  call's start, so no queued slice is ever timed out;
- a hanging job costs one job timeout (the watchdog in the container) plus a container's start-up;
- the plan's worst case (every job hangs) is what the fake bills in that scenario.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core.runs import read_journal
from fibtui.core.settings import set_setting
from fibtui.core.workspace import open_workspace
from fibtui.runners.modal_runner import plan_modal, worst_case_container_seconds
from fibtui.services.runs import RunOptions, prepare_run
from tests.fake_modal import FakeModal
from tests.runner_helpers import PY_TEMPLATE, make_candidate, make_tiny_workspace

pytest.importorskip(
    "torch", reason="the gpu extra (torch) is not installed: the worker cannot run here"
)

#: a kernel that hangs on workloads with n in HANG (or on all of them) until the test releases it
HANGS = PY_TEMPLATE.format(
    body=(
        "    release = os.environ.get('FIBTUI_TEST_RELEASE', '')\n"
        "    hang = os.environ.get('FIBTUI_TEST_HANG_N', '')\n"
        "    if hang == 'all' or str(x.shape[0]) in hang.split(','):\n"
        "        while not os.path.exists(release):\n"
        "            time.sleep(0.05)\n"
        "    y.copy_(x * alpha)"
    )
)

#: a kernel that 'loses the CUDA context' on n in POISON (the engine is told so by the test)
POISONS = PY_TEMPLATE.format(
    body=(
        "    if str(x.shape[0]) in os.environ.get('FIBTUI_TEST_POISON_N', '').split(','):\n"
        "        raise RuntimeError('CUDA error: an illegal memory access was encountered')\n"
        "    y.copy_(x * alpha)"
    )
)


#: a sitecustomize for the slice's child worker: plants a lost CUDA context (see the file)
CHILD_HOOKS = Path(__file__).parent / "modal_child"


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Hung kernels in this process wait for this file; it is made when the test ends."""
    flag = tmp_path / "release"
    monkeypatch.setenv("FIBTUI_TEST_RELEASE", str(flag))
    yield flag
    flag.write_text("go")


def modal_run(
    tmp_path: Path,
    candidate: str,
    batch_sizes=(1, 2, 3, 4),
    workers=2,
    job_timeout_s=2.0,
    paired=True,
    baseline: str | None = None,
):
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=batch_sizes, kernel="good_py")
    (root / "solution" / "triton" / "kernel.py").write_text(candidate)
    base = make_candidate(root, "base_py", "good_py") if paired else None
    if base is not None and baseline is not None:
        (base / "kernel.py").write_text(baseline)
    ws = open_workspace(root)
    options = RunOptions(
        backend="modal",
        modal_in_process=True,
        workloads="all",
        workers=workers,
        baseline=str(base) if base else None,
        solutions=[str(root / "solution" / "triton")],
        job_timeout_s=job_timeout_s,
    )
    return ws, options, prepare_run(ws, options)


def by_status(record: dict) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for j in record["jobs"]:
        out.setdefault(j["status"], []).append((j["axes"]["n"], j["role"]))
    return out


@pytest.mark.slow  # the slices' child workers start torch
def test_a_poisoned_container_is_never_given_another_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIBTUI_TEST_POISON_N", "1")
    # the child worker believes the CUDA context is lost after the planted error (see the file)
    monkeypatch.setenv("PYTHONPATH", str(CHILD_HOOKS))
    ws, _, prepared = modal_run(tmp_path, POISONS, batch_sizes=(1, 2, 3, 4), workers=1)
    fake = FakeModal(max_containers=1, startup_s=5.0, timeout_s=120.0)
    prepared.runner.caller = fake
    events: list[object] = []
    record = prepared.runner.run(events.append).to_json()
    statuses = by_status(record)
    assert statuses.get("RUNTIME_ERROR") == [(1, "candidate")], statuses
    assert len(statuses["PASSED"]) == 7 and record["summary"]["done"] == 8
    poisoned = [c for c in fake.containers if c.stopped_fetching]
    assert poisoned, "the poisoned container did not stop taking inputs"
    for c in poisoned:
        assert len(c.inputs) == 1, "a poisoned container was given another slice"
    # the jobs it did not run were not charged an attempt (no INFRA_ERROR, none retried to exhaustion)
    assert "INFRA_ERROR" not in statuses
    assert any("stops taking inputs" in str(getattr(e, "reason", "")) for e in events)


@pytest.mark.slow  # the slices' child workers start torch
def test_no_queued_slice_is_timed_out_and_calls_never_exceed_containers(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One hang makes more slices (the requeued jobs) than there are containers while the others
    still run: the runner holds them back, and no call ever waits in Modal's queue long enough
    to be timed out (the fake counts the timeout from an input's start, as Modal does)."""
    monkeypatch.setenv("FIBTUI_TEST_HANG_N", "2")
    ws, _, prepared = modal_run(
        tmp_path, HANGS, batch_sizes=(1, 2, 3, 4, 5, 6), workers=2, job_timeout_s=1.5
    )
    fake = FakeModal(max_containers=2, startup_s=5.0, timeout_s=30.0)
    prepared.runner.caller = fake
    record = prepared.runner.run(lambda e: None).to_json()
    assert fake.max_in_flight <= 2 and fake.timeouts == 0
    statuses = by_status(record)
    assert statuses.get("TIMEOUT") == [(2, "candidate")], statuses
    assert len(statuses["PASSED"]) == 11 and "INFRA_ERROR" not in statuses
    assert all(c.inputs for c in fake.containers)


#: a kernel that holds the interpreter lock while it hangs (a C call through ctypes.PyDLL keeps the
#: GIL): a watchdog thread in the same process would never run again
HOLDS_GIL = PY_TEMPLATE.format(
    body=(
        "    import ctypes\n"
        "    if os.environ.get('FIBTUI_TEST_HANG_N') == 'all' or str(x.shape[0]) in os.environ.get('FIBTUI_TEST_HANG_N', '').split(','):\n"
        "        ctypes.PyDLL(None).sleep(3600)\n"
        "    y.copy_(x * alpha)"
    )
)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", [HANGS, HOLDS_GIL], ids=["python-hang", "gil-hang"])
def test_a_hanging_job_costs_one_job_timeout_plus_start_up(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch, kernel: str
) -> None:
    """The job runs in a child process; the container's parent kills it at the job timeout,
    whatever it holds (a kernel that keeps the GIL included)."""
    monkeypatch.setenv("FIBTUI_TEST_HANG_N", "1")
    ws, _, prepared = modal_run(
        tmp_path, kernel, batch_sizes=(1,), workers=1, job_timeout_s=2.0, paired=False
    )
    fake = FakeModal(max_containers=1, startup_s=5.0, timeout_s=600.0, scaledown_s=10.0)
    prepared.runner.caller = fake
    record = prepared.runner.run(lambda e: None).to_json()
    (job,) = record["jobs"]
    assert job["status"] == "TIMEOUT" and "2 s job timeout" in job["error"]
    assert "the worker was killed" in job["error"]
    (c,) = fake.containers
    # start-up + the child's own start (torch, the solutions: seconds on a loaded CPU) + the 2 s
    # job timeout + the watchdog's look and the kill; no idle time: the container stopped
    assert c.billed_s <= 5.0 + 20.0 + 2.0 + 1.0, c.billed_s
    assert c.busy_s >= 2.0 and c.idle_s == 0.0
    assert c.stopped_fetching and fake.timeouts == 0  # the watchdog, never Modal's 600 s timeout
    lines = [
        json.loads(x)
        for x in (prepared.folder / "journal.jsonl").read_text().splitlines()
        if x.strip()
    ]
    assert [x["status"] for x in lines if x.get("kind") == "result"] == ["TIMEOUT"]


@pytest.mark.slow
def test_the_worst_case_bounds_an_all_hanging_run_and_a_defeated_watchdog(
    tmp_path: Path, release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every job hangs: each job group runs until its job timeout in a container of its own
    (which then stops taking inputs). The plan's worst case (every call the run may make runs to
    Modal's startup and call timeouts and idles its scale-down window) is above that bill, and
    above the bill of a run whose watchdog never fires (only Modal's call timeout ends a call)."""
    monkeypatch.setenv("FIBTUI_TEST_HANG_N", "all")
    startup, job_timeout = 4.0, 1.0
    ws, options, prepared = modal_run(
        tmp_path, HANGS, batch_sizes=(1, 2), workers=2, job_timeout_s=job_timeout, baseline=HANGS
    )
    set_setting(ws.root, "modal.startup_timeout_s", startup)
    set_setting(ws.root, "modal.load_timeout_s", 60)
    set_setting(ws.root, "modal.scaledown_window_s", 3)
    set_setting(ws.root, "modal.max_extra_calls", 2)
    plan = plan_modal(open_workspace(ws.root), options)
    # 2 groups in 2 slices of one group: call timeout = load + (job timeout + look + kill) + margin
    assert plan.call_timeout_s == 97.0  # ceil(60 + (1.0 + 0.2 + 5.0) + 30)
    assert plan.max_calls == 2 + 2
    assert plan.worst_case_gpu_seconds == worst_case_container_seconds(4, 97.0, startup, 3.0)
    rate = 6.25 + 8 * 0.0472 + 32 * 0.008
    assert plan.price_per_container_hour_usd == pytest.approx(rate)
    assert plan.worst_case_cost_usd == pytest.approx(plan.worst_case_gpu_seconds / 3600 * rate)
    prepared.runner.settings.max_extra_calls = 2
    fake = FakeModal(max_containers=2, startup_s=startup, timeout_s=97.0, scaledown_s=3.0)
    prepared.runner.caller = fake
    record = prepared.runner.run(lambda e: None).to_json()
    # each group's first solution hangs (TIMEOUT); its other solution is requeued until the
    # run's calls are spent, then recorded as not run, never launched
    statuses = sorted(j["status"] for j in record["jobs"])
    assert statuses.count("TIMEOUT") >= 2 and set(statuses) <= {"TIMEOUT", "INFRA_ERROR"}
    assert len(fake.calls) <= plan.max_calls
    assert all(len(c.inputs) == 1 and c.stopped_fetching for c in fake.containers)
    assert fake.billed_s <= plan.worst_case_gpu_seconds, fake.billed_s
    assert fake.timeouts == 0

    # the watchdog defeated (a body that never returns): Modal's call timeout ends each call
    def stuck(request, progress=None):
        import time as _t

        _t.sleep(3600)

    ws2, options2, prepared2 = modal_run(
        tmp_path / "b", HANGS, batch_sizes=(1, 2), workers=2, job_timeout_s=job_timeout
    )
    prepared2.runner.settings.max_extra_calls = 2
    fake2 = FakeModal(
        max_containers=2, startup_s=startup, timeout_s=1.5, body=stuck, scaledown_s=3.0
    )
    prepared2.runner.caller = fake2
    record2 = prepared2.runner.run(lambda e: None).to_json()
    assert fake2.timeouts == len(fake2.calls) <= 2 + 2
    assert {j["status"] for j in record2["jobs"]} <= {"TIMEOUT", "INFRA_ERROR"}
    bound = worst_case_container_seconds(len(fake2.calls), 1.5, startup, 3.0)
    assert fake2.billed_s <= bound + 0.5 * len(fake2.calls), (fake2.billed_s, bound)


# ------------------------------------------------------------------ the plan, the guard, the client


def test_the_plan_shows_the_worst_case_and_the_reservations(capsys, tmp_path: Path) -> None:
    from tests.conftest import run_cli

    ws, options, _ = modal_run(
        tmp_path, HANGS, batch_sizes=(1, 2, 3), workers=2, job_timeout_s=300.0
    )
    code, out, _ = run_cli(
        capsys,
        "run",
        "--backend",
        "modal",
        "--plan",
        "--json",
        "--workloads",
        "all",
        "--workspace",
        str(ws.root),
        "--timeout",
        "300",
    )
    plan = json.loads(out)
    assert code == 0 and plan["jobs"] == 3 and plan["job_timeout_s"] == 300.0
    # 3 workloads in 3 slices (4 workers by default) of one group: call timeout = min(timeout_s,
    # load 600 + 1 x (300 + 0.2 + 5) + 30) = min(1800, 935.2) -> 936 s
    assert plan["call_timeout_s"] == 936.0 and plan["startup_timeout_s"] == 900.0
    assert plan["max_calls"] == 3 + 8 and plan["scaledown_window_s"] == 10.0
    assert plan["price_per_container_hour_usd"] == pytest.approx(6.25 + 8 * 0.0472 + 32 * 0.008)
    assert plan["worst_case_gpu_seconds"] == pytest.approx(11 * (900 + 936 + 10))
    assert plan["worst_case_cost_usd"] == pytest.approx(
        plan["worst_case_gpu_seconds"] / 3600 * plan["price_per_container_hour_usd"], abs=1e-3
    )
    assert plan["cpu"] == 8.0 and plan["memory_mb"] == 32768 and plan["needs_confirmation"] is True
    code, out, _ = run_cli(
        capsys,
        "run",
        "--backend",
        "modal",
        "--plan",
        "--workloads",
        "all",
        "--workspace",
        str(ws.root),
    )
    assert (
        "worst case (an upper bound): all 11 call(s)" in out
        and "reserves 8 CPU and 32768 MiB" in out
    )


def test_an_expensive_worst_case_needs_yes(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import run_cli

    ws, _, _ = modal_run(tmp_path, HANGS, batch_sizes=(1, 2, 3), workers=2)
    runs_before = sorted((ws.root / "optimize_ops" / "runs").iterdir())
    set_setting(ws.root, "modal.confirm_above_usd", 0.5)
    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-x")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-y")
    code, out, err = run_cli(
        capsys, "run", "--backend", "modal", "--workloads", "all", "--workspace", str(ws.root)
    )
    assert code == 2 and "more than [modal] confirm_above_usd ($0.50): nothing was launched" in err
    assert (
        "worst case (an upper bound):" in err
        and sorted((ws.root / "optimize_ops" / "runs").iterdir()) == runs_before
    )


def test_settings_take_reservations_and_refuse_nonsense(tmp_path: Path) -> None:
    from fibtui.core.errors import InputError
    from fibtui.runners.modal_runner import modal_settings

    ws, _, _ = modal_run(tmp_path, HANGS, batch_sizes=(1,), workers=1)
    set_setting(ws.root, "modal.cpu", 4)
    set_setting(ws.root, "modal.memory_mb", 16384)
    set_setting(ws.root, "modal.job_timeout_s", 120)
    s = modal_settings(ws.root)
    assert (s.cpu, s.memory_mb, s.job_timeout_s) == (4.0, 16384, 120.0)
    set_setting(ws.root, "modal.memory_mb", 64)
    with pytest.raises(InputError, match="modal.memory_mb"):
        modal_settings(ws.root)


def test_the_function_reserves_cpu_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the app registers with Modal: the reservations, Modal's own timeouts and the container
    cap (modal 1.6's App.function(cpu=, memory=, timeout=, startup_timeout=, max_containers=))."""
    import modal

    from fibtui.runners import modal_app

    seen: dict = {}
    real = modal.App.function

    def spy(self, **kwargs):
        if not seen:  # the first is the slice function (the probe and the profiler follow)
            seen.update(kwargs)
        return real(self, **kwargs)

    monkeypatch.setattr(modal.App, "function", spy)
    modal_app.build_app(
        app_name="t",
        gpu="B200",
        image_ref="python:3.12",
        timeout_s=600,
        cpu=8.0,
        memory_mb=32768,
        startup_timeout_s=900,
        max_containers=2,
    )
    assert {
        k: seen[k]
        for k in ("cpu", "memory", "timeout", "startup_timeout", "max_containers", "retries")
    } == {
        "cpu": 8.0,
        "memory": 32768,
        "timeout": 600,
        "startup_timeout": 900,
        "max_containers": 2,
        "retries": 0,
    }


def test_credentials_are_found_without_reading_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibtui.core import backends

    monkeypatch.delenv("MODAL_TOKEN_ID", raising=False)
    monkeypatch.delenv("MODAL_TOKEN_SECRET", raising=False)
    cfg = tmp_path / ".modal.toml"
    cfg.write_text('[default]\ntoken_id = "ak-abc"\ntoken_secret = "as-SECRET"\n')
    monkeypatch.setenv("MODAL_CONFIG_PATH", str(cfg))
    seen: list[str] = []
    real_open = open

    class Spy:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.fh.close()

        def __iter__(self):
            for line in self.fh:
                seen.append(line)
                yield line

    monkeypatch.setattr(
        "builtins.open",
        lambda p, *a, **k: (
            Spy(real_open(p, *a, **k)) if str(p) == str(cfg) else real_open(p, *a, **k)
        ),
    )
    assert backends.modal_credentials_source() == str(cfg)
    assert not any("token_secret" in line for line in seen)  # reading stopped at token_id
    cfg.write_text('[default]\ntoken_secret = "as-SECRET"\n')
    seen.clear()
    assert backends.modal_credentials_source() is None


def test_modal_output_goes_to_the_run_not_to_stdout(tmp_path: Path, capsys) -> None:
    """modal.enable_output()'s manager, with its consoles pointed at a sink: what Modal prints
    while an app runs (image build and pull, logs) arrives as lines, and nothing reaches stdout
    (the TUI's screen, or --json's document)."""
    from modal.output import OutputManager

    from fibtui.runners import modal_app

    lines: list[str] = []
    with modal_app.modal_output(lines.append):
        manager = OutputManager.get()
        assert manager is not None
        manager._console.print("Building image im-123\nStep 1/3: pulling flashinfer/flashinfer-ci")
        manager._stderr_console.print("warning from the container")
    assert lines == [
        "Building image im-123",
        "Step 1/3: pulling flashinfer/flashinfer-ci",
        "warning from the container",
    ]
    assert capsys.readouterr().out == ""


def test_cancel_during_the_image_build_launches_nothing(tmp_path: Path) -> None:
    import threading
    import time as _time
    from contextlib import contextmanager

    ws, _, prepared = modal_run(tmp_path, HANGS, batch_sizes=(1, 2), workers=1)
    building = threading.Event()

    class SlowBuild(FakeModal):
        @contextmanager
        def session(self):
            building.set()
            _time.sleep(3)  # app.run() building or pulling the image
            yield self

    fake = SlowBuild(max_containers=1, startup_s=1.0, timeout_s=60.0)
    prepared.runner.caller = fake
    cancel = threading.Event()
    threading.Thread(
        target=lambda: (building.wait(), _time.sleep(0.3), cancel.set()), daemon=True
    ).start()
    t0 = _time.monotonic()
    record = prepared.runner.run(lambda e: None, cancel).to_json()
    assert _time.monotonic() - t0 < 2.5, "the cancel waited for the build"
    assert record["state"] == "cancelled" and fake.calls == [] and record["summary"]["done"] == 0


def test_resume_of_a_modal_run_goes_through_the_cost_guard(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--resume starts containers too: a run whose remaining worst case costs more than
    [modal] confirm_above_usd is not resumed without --yes (it was, before: issue 34)."""
    from fibtui.core.runs import read_journal
    from tests.conftest import run_cli

    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-x")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-y")
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3), kernel="good_py")
    ws = open_workspace(root)
    set_setting(ws.root, "modal.confirm_above_usd", 0.5)
    prepared = prepare_run(ws, RunOptions(backend="modal", workloads="all", workers=2))
    journal = (prepared.folder / "journal.jsonl").read_text()
    code, out, err = run_cli(
        capsys, "run", "--resume", prepared.run_id, "--workspace", str(ws.root)
    )
    assert code == 2 and "nothing was launched; rerun with --yes" in err, err
    assert "worst case (an upper bound): all 10 call(s)" in err  # 2 slices + 8 extra
    assert (prepared.folder / "journal.jsonl").read_text() == journal  # nothing written
    # --retry-failed: the same guard over the failed jobs, before its retry line is written
    from fibtui.core.runs import JobResult, Journal

    header = read_journal(prepared.folder / "journal.jsonl").header
    j = header.jobs[0]
    Journal(prepared.folder).append_result(
        JobResult(
            uuid=j.uuid,
            axes=j.axes,
            solution=j.solution,
            role=j.role,
            repeat=j.repeat,
            status="INFRA_ERROR",
            error="lost",
        )
    )
    journal = (prepared.folder / "journal.jsonl").read_text()
    code, out, err = run_cli(
        capsys, "run", "--retry-failed", prepared.run_id, "--workspace", str(ws.root)
    )
    assert code == 2 and "retrying the failed jobs of run" in err, err
    assert "Modal: 1 job(s)" in err
    assert (prepared.folder / "journal.jsonl").read_text() == journal


@pytest.mark.slow
async def test_the_tuis_retry_of_a_modal_run_asks_first_with_its_worst_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`t` on a Modal run starts containers: it shows the worst case and asks, and nothing is
    written before the answer (a declined retry leaves the journal as it was)."""
    from fibtui.core.runs import JobResult, Journal
    from fibtui.ui.app import make_app
    from fibtui.ui.panes.runs import RunsPane
    from fibtui.ui.screens.confirm import ConfirmScreen

    monkeypatch.setenv("MODAL_TOKEN_ID", "ak-x")
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-y")
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2), kernel="good_py")
    ws = open_workspace(root)
    prepared = prepare_run(ws, RunOptions(backend="modal", workloads="all", workers=1))
    j = read_journal(prepared.folder / "journal.jsonl").header.jobs[0]
    journal = Journal(prepared.folder)
    journal.append_result(
        JobResult(
            uuid=j.uuid,
            axes=j.axes,
            solution=j.solution,
            role=j.role,
            repeat=j.repeat,
            status="INFRA_ERROR",
            error="lost",
        )
    )
    journal.append_end("failed")
    before = (prepared.folder / "journal.jsonl").read_text()
    app = make_app(open_workspace(root))
    app.run_control.note_acknowledged = True
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("3")
        for _ in range(200):
            pane = app.query(RunsPane)
            if pane and pane.first().shown_run == prepared.run_id:
                break
            await pilot.pause(0.05)
        pane = app.query_one(RunsPane)
        assert pane.shown_run == prepared.run_id
        app.run_control.retry_failed()
        for _ in range(200):
            if isinstance(app.screen, ConfirmScreen):
                break
            await pilot.pause(0.05)
        assert isinstance(app.screen, ConfirmScreen)
        facts = " ".join(text for _, text in app.screen._facts)
        assert "worst case (an upper bound)" in facts and "Modal: 1 job(s)" in app.screen._title
        assert (prepared.folder / "journal.jsonl").read_text() == before
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert (prepared.folder / "journal.jsonl").read_text() == before


def test_ncu_on_modal_asks_first_when_its_call_may_cost_more(capsys, tmp_path: Path) -> None:
    from tests.conftest import run_cli

    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1,), kernel="good_py")
    set_setting(root, "modal.confirm_above_usd", 0.01)
    uuid = open_workspace(root).dataset().workloads("tiny_scale").uuids[0]
    code, out, err = run_cli(
        capsys, "ncu", "profile", "--backend", "modal", "--workload", uuid, "--workspace", str(root)
    )
    assert code == 2 and "worst case of this profile call" in err and "--yes" in err
    folder = root / "optimize_ops" / "benchmarks" / "ncu"
    assert not folder.exists() or not any(folder.iterdir())


def test_a_container_that_had_a_fault_runs_nothing_more_even_if_given_an_input() -> None:
    """Should Modal hand a container that was told to stop another input anyway, run_slice starts
    no worker: every job goes back not run (no attempt counted) and the container is told again."""
    import contextvars

    from fibtui.runners import modal_app

    stops: list[bool] = []

    def body() -> dict:
        modal_app.CONTAINER_STATE.set({"fault": "hung"})
        modal_app.STOP_HOOK.set(lambda: stops.append(True))
        return modal_app.run_slice(
            {
                "slice_id": 3,
                "jobs": [
                    {"job_id": "0|u1", "workload": {"uuid": "u1"}, "solutions": ["a", "b"]},
                    {"job_id": "0|u2", "workload": {"uuid": "u2"}, "solutions": ["a"]},
                ],
            }
        )

    out = contextvars.copy_context().run(body)
    assert out["refused"] == "hung" and stops == [True] and out["stopped_taking_inputs"]
    results = [r for job in out["jobs"] for r in job["results"]]
    assert len(results) == 3 and all(r["not_run"] and r["status"] == "INFRA_ERROR" for r in results)
    assert out["slice_id"] == 3 and out["container"]["wall_s"] < 1.0  # no worker was started
