"""Timing kinds never mix, and no confidence without a noise estimate: CPU-interpreter timings,
arms timed differently or on different devices give NO_SPEED_VERDICT (correctness only) in
``fibtui compare``, the round records and the Promotion pane; A/A history is keyed by (definition,
device, timing kind)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Static

from fibtui.core import stats
from fibtui.core.runs import JobResult
from fibtui.core.workspace import open_workspace
from tests.conftest import run_cli
from tests.runner_helpers import make_candidate, make_tiny_workspace
from tests.typed_rows import typed


def _rows(kind: str, gpu: str | None, latencies: list[float], role: str) -> list[JobResult]:
    env = {"gpu": gpu, "backend": "interpreter" if kind == "cpu-interpreter" else "local"}
    return typed(
        [
            {
                "uuid": f"w{i}",
                "axes": {"n": i},
                "status": "PASSED",
                "latency_ms": lat,
                "repeat": r,
                "role": role,
                "timing": {"kind": kind, "environment": env},
            }
            for i, lat in enumerate(latencies)
            for r in range(2)
        ]
    )


def test_cpu_interpreter_rows_give_correctness_only() -> None:
    base = _rows("cpu-interpreter", None, [10.0, 20.0, 30.0, 40.0], "baseline")
    cand = _rows(
        "cpu-interpreter", None, [5.0, 10.0, 15.0, 20.0], "candidate"
    )  # "2x faster" on the CPU
    c = stats.paired_verdict(base, cand)
    assert c.verdict == stats.NO_SPEED_VERDICT
    assert c.geomean_ratio is None and c.interval is None and c.guard == [] and c.per_band == []
    assert c.dispatch_bands == [] and "dispatch" not in c.recommendation()
    assert c.recommendation().startswith(
        "no speed verdict: CPU-interpreter timings give no speed verdict"
    )
    assert "correctness: baseline 8/8, candidate 8/8 PASSED" in c.recommendation()
    data = c.to_json()
    assert data["geomean_ratio"] is None and data["no_speed_reason"].startswith("CPU-interpreter")
    # a failing interpreter row is still reported, as a correctness failure
    cand[0].status, cand[0].latency_ms = "INCORRECT_NUMERICAL", None
    c = stats.paired_verdict(base, cand)
    # every job ran and one is wrong: INCORRECT, with the counts (INCOMPLETE is for missing jobs)
    assert c.verdict == stats.INCORRECT and "fix the failures" in c.recommendation()
    assert "candidate 7/8 PASSED, 1 INCORRECT_NUMERICAL" in c.recommendation()
    # a workload the candidate never ran (a cancelled run): INCOMPLETE
    missing = [r for r in cand if r.uuid != "w0"]
    assert stats.paired_verdict(base, missing).verdict == stats.INCOMPLETE
    assert c.geomean_ratio is None


def test_arms_timed_differently_or_on_two_gpus_give_no_speed_verdict() -> None:
    base = _rows("cupti", "NVIDIA H200", [0.01, 0.02, 0.03, 0.04], "baseline")
    other_gpu = _rows("cupti", "NVIDIA B200", [0.005, 0.01, 0.015, 0.02], "candidate")
    c = stats.paired_verdict(base, other_gpu)
    assert (
        c.verdict == stats.NO_SPEED_VERDICT
        and "different devices (NVIDIA H200 vs NVIDIA B200)" in c.no_speed_reason
    )
    fib = [replace(r, timing={}) for r in other_gpu]
    c = stats.paired_verdict(
        base,
        fib,
        timing=(
            stats.TimingKey("cupti", "NVIDIA H200"),
            stats.TimingKey("flashinfer-bench", "NVIDIA H200"),
        ),
    )
    assert c.verdict == stats.NO_SPEED_VERDICT and "timed differently" in c.no_speed_reason
    same = _rows("cupti", "NVIDIA H200", [0.005, 0.01, 0.015, 0.02], "candidate")
    assert (
        stats.paired_verdict(base, same).verdict == stats.PROMOTE
    )  # 2 repeats: the guard has its noise


def test_one_value_per_workload_without_history_gives_no_guard_claims() -> None:
    """The reported case: flashinfer-bench traces with one latency per workload (the same kernel
    measured 37.1 us once and 68.0 us the next time): no p-values, no dispatch advice."""
    base = [
        {"uuid": f"w{i}", "axes": {"b": i % 4}, "status": "PASSED", "latency_ms": 0.0371}
        for i in range(12)
    ]
    cand = [
        dict(r, latency_ms=0.0680 if i == 8 else 0.0371 * (1 + 0.01 * (i % 3)))
        for i, r in enumerate(base)
    ]
    c = stats.paired_verdict(typed(base), typed(cand))
    assert c.guard == [] and c.per_band == [] and c.dispatch_bands == []
    assert c.noise is not None and c.noise.estimated is False
    assert "Holm" not in json.dumps(c.to_json())
    assert any("cannot be judged" in n for n in c.notes) and c.verdict != stats.BLOCKED


def _interpreter_paired_run(root: Path, capsys) -> str:
    cand = make_candidate(root, "same_again", "good_triton")
    code, out, err = run_cli(
        capsys,
        "run",
        "--workspace",
        str(root),
        "--backend",
        "interpreter",
        "--workloads",
        "all",
        "--baseline",
        str(root / "solution" / "triton"),
        "--solution",
        str(cand),
        "--json",
    )
    assert code == 0, err
    return json.loads(out)["run_id"]


@pytest.mark.slow
def test_compare_and_aa_on_an_interpreter_run(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3, 4))
    run_id = _interpreter_paired_run(root, capsys)
    code, out, _ = run_cli(capsys, "compare", run_id, "--json", "--workspace", str(root))
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "NO_SPEED_VERDICT" and data["geomean_ratio"] is None
    assert data["blocked_by"] == [] and data["dispatch_bands"] == []
    code, out, _ = run_cli(capsys, "compare", run_id, "--workspace", str(root))
    assert "NO_SPEED_VERDICT" in out and "CPU-interpreter timings give no speed verdict" in out
    assert "G =" not in out and "dispatch" not in out and "threshold" not in out
    # an A/A session of interpreter timings calibrates nothing: refused, nothing recorded
    code, _, err = run_cli(capsys, "compare", run_id, "--aa", "--workspace", str(root))
    assert code == 2 and "--aa records nothing: CPU-interpreter timings" in err
    assert not (root / "optimize_ops" / "benchmarks" / "aa.jsonl").exists()
    # and the same-code interpreter run is not taken as A/A history for GPU verdicts
    assert stats.aa_sessions(root / "optimize_ops", "NVIDIA H200") == []
    assert (
        stats.aa_sessions(root / "optimize_ops", None, definition="tiny_scale", timing_kind="cupti")
        == []
    )


@pytest.mark.slow
async def test_the_promotion_pane_says_no_speed_verdict_for_an_interpreter_run(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FIBTUI_CONFIG_DIR", str(tmp_path / "config"))
    root = make_tiny_workspace(tmp_path / "ws", batch_sizes=(1, 2, 3))
    _interpreter_paired_run(root, capsys)
    from fibtui.ui.app import make_app

    app = make_app(open_workspace(root))
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        text = str(app.query_one("#verdict", Static).render())
    assert "NO_SPEED_VERDICT" in text and "CPU-interpreter timings give no speed verdict" in text
    assert "G =" not in text and "dispatch" not in text and "tau" not in text
