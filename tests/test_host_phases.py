"""What the harness cost a job, as a run shows it: ``core.runs.host_phases`` takes the median of
each phase of ``timing.job_phases_ms`` over the run's worker jobs, each counted once though every
solution's row carries it, and ``fibtui run`` prints it under its summary."""

from __future__ import annotations

from fibtui.core.runs import JobResult, host_phases


def _job(uuid: str, solution: str, repeat: int, phases: object) -> JobResult:
    return JobResult(
        uuid=uuid,
        axes={"n": 1},
        solution=solution,
        role="candidate" if solution == "c" else "baseline",
        repeat=repeat,
        status="PASSED",
        timing={"kind": "cupti", "job_phases_ms": phases} if phases is not None else {},
    )


def test_the_median_of_each_phase_over_jobs_counted_once() -> None:
    a = {"make": 1.0, "launch": 10.0, "checks": 3.0, "other": 0.5}
    b = {"make": 3.0, "launch": 20.0, "checks": 5.0, "other": 0.5}
    c = {"make": 2.0, "launch": 12.0, "checks": 4.0, "other": 0.5, "official": 9.0}
    jobs = [
        _job("w1", "b", 0, a),
        _job("w1", "c", 0, a),  # the same worker job, on the other solution's row
        _job("w2", "b", 0, b),
        _job("w2", "c", 0, b),
        _job("w1", "b", 1, c),
        _job("w1", "c", 1, c),
    ]
    got = host_phases(jobs)
    assert got is not None and got.jobs == 3
    assert list(got.median_ms) == ["make", "launch", "checks", "other", "official"]
    assert got.median_ms == {
        "make": 2.0,
        "launch": 12.0,
        "checks": 4.0,
        "other": 0.5,
        "official": 0.0,  # absent from two jobs: 0 there
    }
    assert got.total_ms == 18.5
    assert got.describe() == (
        "host time a job (median of 3, ms): make 2.0, launch 12.0, checks 4.0, other 0.5"
    )


def test_rows_without_phases_or_with_junk_give_none() -> None:
    assert host_phases([]) is None
    assert host_phases([_job("w", "b", 0, None)]) is None  # an older fibtui's record
    junk = _job("w", "b", 0, {"make": "fast", "launch": float("nan"), "read": True})
    assert host_phases([junk]) is None


def test_fibtui_run_prints_what_the_harness_cost_a_job(tmp_path, capsys, monkeypatch) -> None:
    import pytest

    pytest.importorskip("torch")
    from tests.conftest import run_cli
    from tests.runner_helpers import make_tiny_workspace

    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(2, 3))
    code, out, err = run_cli(
        capsys, "run", "--workspace", str(root), "--backend", "interpreter", "--no-daemon"
    )
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if "host time a job" in ln)
    assert "(median of 2, ms):" in line
    assert all(f" {p} " in line for p in ("make", "check", "judge", "launch"))
