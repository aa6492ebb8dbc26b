"""The GPU timer's bookkeeping, on synthetic CUPTI activity (the GPU runs: scripts/device/h200_gate.sh
and h200_session_end.sh): how a profile is cut into calls around fibtui's own kernels,
work on a side stream or after a call's end counted in the call, the schedule's rotation of input
sets, and the rules that read the timed calls against a probe call on unseen inputs."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from fibtui.worker import engine  # noqa: E402
from fibtui.worker.timing import (  # noqa: E402
    FLUSH_NAME,
    KEEP_NAME,
    REFILL_NAME,
    Event,
    SolutionTiming,
    TimingPlan,
    schedule,
    segment,
)

S, SIDE = 7, 13  # the harness's stream, another one


def ev(name: str, start: int, end: int, stream: int = S) -> Event:
    return Event(name, start, end, stream)


def test_a_profile_is_cut_at_the_harness_kernels() -> None:
    events = [
        ev(REFILL_NAME, 0, 10),
        ev(FLUSH_NAME, 10, 50),
        ev("gemm", 60, 100),
        ev("epilogue", 105, 120),
        ev(REFILL_NAME, 130, 140),
        ev(FLUSH_NAME, 140, 180),
        ev("gemm", 190, 230),
        ev(KEEP_NAME, 231, 240),  # a kept call's copy: the harness's, not the call's
    ]
    first, second = segment(events)
    assert [e.name for e in first.events] == ["gemm", "epilogue"]
    assert first.span_ms == pytest.approx((120 - 60) / 1e6)
    assert first.busy_ms == pytest.approx((40 + 15) / 1e6)
    assert [e.name for e in second.events] == ["gemm"]
    assert first.late == second.late == first.side_stream == 0


def test_work_on_a_side_stream_or_after_the_calls_end_counts_in_the_call() -> None:
    events = [
        ev(REFILL_NAME, 0, 10),
        ev(FLUSH_NAME, 10, 50),
        ev("visible", 60, 70),
        ev("hidden", 65, 400, SIDE),  # on another stream, still running when the next call starts
        ev(REFILL_NAME, 80, 90),
        ev("late_launch", 85, 95, SIDE),  # started after the call's own stretch ended
        ev(FLUSH_NAME, 90, 130),
        ev("next", 140, 150),
    ]
    first, second = segment(events)
    assert {e.name for e in first.events} == {"visible", "hidden", "late_launch"}
    assert first.side_stream == 2 and first.late >= 2
    assert first.span_ms == pytest.approx((400 - 60) / 1e6)  # measured to its end, not dropped
    assert [e.name for e in second.events] == ["next"] and second.side_stream == 0


def test_a_call_that_launches_nothing_is_an_empty_segment() -> None:
    events = [
        ev(REFILL_NAME, 0, 5),
        ev(FLUSH_NAME, 5, 20),
        ev(REFILL_NAME, 30, 35),
        ev(FLUSH_NAME, 35, 50),
    ]
    calls = segment(events)
    assert len(calls) == 2 and all(not c.events and c.span_ms == 0.0 for c in calls)


def test_the_schedule_rotates_sets_and_checks_every_set() -> None:
    plan = TimingPlan(calls_per_block=5, blocks=6)
    blocks = schedule(["base", "cand"], plan, pool_sets=4, probe_sets=2, rotate=True)
    assert [b.sid for b in blocks[:4]] == ["base", "cand", "cand", "base"]  # ABBA
    for b in blocks:
        # consecutive calls never share a set
        assert all(x != y for x, y in zip(b.sets, b.sets[1:], strict=False))
        assert b.keep_last
    checked = {b.sets[-1] for b in blocks if b.sid == "cand"}
    assert checked == {0, 1, 2, 3}  # the checked last calls cover every pool set
    assert sorted(b.number for b in blocks if b.sid == "cand" and b.probe is not None) == [0, 3]
    plain = schedule(["base", "cand"], plan, pool_sets=4, probe_sets=2, rotate=False)
    assert all(len(set(b.sets)) == 1 and b.probe is None and not b.keep_last for b in plain)


def _timing(**kw) -> SolutionTiming:
    base = {"latency_ms": 0.010, "block_medians_ms": [0.010, 0.011], "timed_calls": 40}
    return SolutionTiming(**{**base, **kw})


def test_timed_calls_are_read_against_a_call_on_unseen_inputs() -> None:
    honest = _timing(probe_ms=[0.012, 0.011], kernel_names=["k"], probe_kernel_names=["k"])
    assert engine._cached_timing(honest, "cupti") is None
    nothing = _timing(empty_calls=39, kernel_names=["k"], probe_kernel_names=["k"])
    assert engine._cached_timing(nothing, "cupti")["status"] == "CACHED_TIMING"
    other = _timing(probe_ms=[0.012], kernel_names=["memcpy"], probe_kernel_names=["gemm"])
    assert "none of the kernels" in engine._cached_timing(other, "cupti")["error"]
    fast = _timing(probe_ms=[0.2, 0.3], kernel_names=["k"], probe_kernel_names=["k"])
    assert "more than 3x" in engine._cached_timing(fast, "cupti")["error"]
    # the interpreter's wall times are noisier: only a tenfold gap counts there
    assert engine._cached_timing(_timing(probe_ms=[0.05]), "cpu-interpreter") is None
    assert engine._cached_timing(_timing(probe_ms=[0.5]), "cpu-interpreter") is not None
    # one slow timed block is enough to clear it (noise must make every block fast)
    mixed = _timing(probe_ms=[0.2], block_medians_ms=[0.01, 0.09])
    assert engine._cached_timing(mixed, "cupti") is None


def test_on_the_interpreter_a_probe_kept_waiting_by_a_loaded_machine_is_no_evidence() -> None:
    """The interpreter's timer is the wall clock: a probe preempted by another process looks
    tenfold slower in wall time but used no more CPU than the timed calls, and is not read as a
    kept answer; a probe that did ten times the CPU work still is."""
    waited = _timing(probe_ms=[0.5], probe_cpu_ms=[0.011], block_cpu_medians_ms=[0.010, 0.010])
    assert engine._cached_timing(waited, "cpu-interpreter") is None
    worked = _timing(probe_ms=[0.5], probe_cpu_ms=[0.45], block_cpu_medians_ms=[0.010, 0.011])
    assert engine._cached_timing(worked, "cpu-interpreter")["status"] == "CACHED_TIMING"
    # the CPU witness never clears what the wall clock does not accuse
    assert (
        engine._cached_timing(
            _timing(probe_ms=[0.05], probe_cpu_ms=[5.0], block_cpu_medians_ms=[0.01]),
            "cpu-interpreter",
        )
        is None
    )


def test_the_interpreters_timer_keeps_each_calls_process_cpu_time() -> None:
    """time_wall records the process's CPU time of every probe and block beside the wall
    time: a call that waits (sleeps) costs wall time, not CPU; one that computes costs both."""
    import time as _time

    from fibtui.worker.timing import PointerSets, Timed, time_wall

    def busy(_args) -> None:
        t = _time.process_time()
        while _time.process_time() - t < 0.004:
            pass

    def sleepy(_args) -> None:
        _time.sleep(0.004)

    plan = TimingPlan(calls_per_block=2, blocks=2, warmup_calls=0, checks=False)
    got = time_wall(
        {"busy": Timed(busy, lambda r: []), "sleepy": Timed(sleepy, lambda r: [])},
        PointerSets([[0]]),
        1,
        0,
        plan,
    )
    assert len(got["busy"].block_cpu_medians_ms) == 2
    assert min(got["busy"].block_cpu_medians_ms) >= 3.5
    assert min(got["sleepy"].block_medians_ms) >= 3.5
    assert max(got["sleepy"].block_cpu_medians_ms) < 2.0


def test_the_seal_sees_a_patch_and_a_patch_undone() -> None:
    import statistics

    from fibtui.worker.seal import Seal

    seal = Seal()
    assert seal.broken() == []
    real = statistics.median
    statistics.median = lambda values: 0.0
    try:
        assert seal.broken() == ["statistics.median was replaced"]
    finally:
        statistics.median = real
    assert seal.broken() == []


def _rows(latency: float, n: int = 6, checks: bool = True, repeats: int = 2) -> list:
    from tests.typed_rows import typed

    timing = {"kind": "cupti", "l2_policy": "cold", "checks": {"rotation": checks}}
    return typed(
        [
            {
                "uuid": f"w{i}",
                "status": "PASSED",
                "latency_ms": latency * (1 + 0.001 * r),
                "repeat": r,
                "timing": timing,
            }
            for i in range(n)
            for r in range(repeats)
        ]
    )


def test_faster_than_physics_or_unchecked_timing_keeps_a_promote_from_standing() -> None:
    from fibtui.core.stats import BLOCKED, PROMOTE, paired_verdict

    base, fast = _rows(0.010), _rows(0.005)
    assert paired_verdict(base, fast).verdict == PROMOTE
    # the floor of every workload is 6 us: a 5 us latency is below what the bytes allow
    floors = {f"w{i}": 0.006 for i in range(6)}
    blocked = paired_verdict(base, fast, floors_ms=floors)
    assert blocked.verdict == BLOCKED
    assert blocked.integrity and blocked.integrity[0].startswith("faster than physics: 12 latency")
    assert "fibtui promote --force" in blocked.recommendation()
    assert "faster than physics" in " ".join(blocked.to_json()["blocked_by"])
    # a floor under the latency changes nothing
    assert paired_verdict(base, fast, floors_ms={k: 0.004 for k in floors}).verdict == PROMOTE
    unchecked = paired_verdict(base, _rows(0.005, checks=False))
    assert unchecked.verdict == BLOCKED and "without the gate's checks" in unchecked.integrity[0]
