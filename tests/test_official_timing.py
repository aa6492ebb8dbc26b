"""Official-equivalent timing (``fibtui run --timing official``): flashinfer-bench main's method in
fibtui's worker. Its structure (the order of flushes, synchronizes and calls; the median of each
trial, the mean over trials) is checked against a fake device timer; the cutting of a device
activity list at the flush kernel on synthetic activity; the whole path on the CPU interpreter with
a tiny definition; and the decision on official-equivalent latencies from a run record. The GPU
part (CUPTI, the Triton zero-fill) needs a GPU: scripts/device/h200_official.sh."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from fibtui.core import presets, stats
from fibtui.core.errors import InputError
from fibtui.worker import official_timing as ot


class FakeTimer:
    """A device that records what the method asks of it, and answers given spans."""

    def __init__(self, spans: list[list[float]]) -> None:
        self.log: list[str] = []
        self._spans = list(spans)
        self._recording = False

    def flush(self) -> None:
        self.log.append("flush")

    def sync(self) -> None:
        self.log.append("sync")

    def recording(self):
        timer = self

        class _Rec:
            def __enter__(self):
                timer.log.append("record")
                timer._recording = True

            def __exit__(self, *exc):
                timer.log.append("stop")
                timer._recording = False

        return _Rec()

    def begin_call(self) -> None:
        assert self._recording, "a timed call outside the recording"
        self.log.append("begin")

    def end_call(self) -> None:
        self.log.append("end")

    def spans(self, calls: int) -> list[float]:
        return self._spans.pop(0)


def test_one_trial_flushes_syncs_and_calls_in_flashinfer_benchs_order() -> None:
    plan = ot.OfficialPlan(warmup=2, iterations=3, trials=1)
    timer = FakeTimer([[1.0, 2.0, 3.0]])

    def call() -> None:
        timer.log.append("call")

    assert ot.time_trial(call, plan, timer) == [1.0, 2.0, 3.0]
    expected = (
        ["sync", "call", "sync"]  # the first, untimed call
        + ["flush", "call"] * ot.SIZING_CALLS  # flashinfer's sizing pass, each after a zero-fill
        + ["sync"]
        + ["flush", "call"] * plan.warmup
        + ["sync", "record"]
        # each timed call: zero-fill, synchronize, the call, synchronize
        + ["flush", "sync", "begin", "call", "end", "sync"] * plan.iterations
        + ["stop"]
    )
    assert timer.log == expected


def test_the_latency_is_the_mean_over_trials_of_each_trials_median() -> None:
    plan = ot.OfficialPlan(warmup=0, iterations=3, trials=3)
    timer = FakeTimer([[1.0, 5.0, 2.0], [4.0, 4.0, 10.0], [9.0, 3.0, 6.0]])
    calls = [lambda: None] * 3
    got = ot.time_trials(calls, plan, timer)
    assert got.trial_medians_ms == [2.0, 4.0, 6.0]  # medians, not means (4.0 would be 6.0)
    assert got.latency_ms == pytest.approx(4.0)  # the mean of the medians
    assert got.to_json()["trials"] == 3 and got.to_json()["iterations"] == 3


def test_a_timer_that_saw_fewer_calls_than_were_made_is_refused() -> None:
    plan = ot.OfficialPlan(warmup=0, iterations=3, trials=1)
    with pytest.raises(ot.TimingFailed, match="2 timed calls seen, 3 made"):
        ot.time_trials([lambda: None], plan, FakeTimer([[1.0, 2.0]]))


def test_the_activity_list_is_cut_at_the_flush_kernel() -> None:
    f = ot.FLUSH_NAME
    events = [
        (f, 0, 900),
        ("kernel_a", 1_000, 3_000),
        ("kernel_b_side_stream", 2_000, 6_000),  # overlapping: the span runs to the last end
        (f, 7_000, 8_000),
        ("memcpy", 9_000, 9_500),
        ("kernel_a", 9_600, 10_000),
    ]
    assert ot.cut_calls(events) == pytest.approx([0.005, 0.001])
    with pytest.raises(ot.TimingFailed, match="call 1 launched no device work"):
        ot.cut_calls([(f, 0, 1), ("k", 2, 3), (f, 4, 5)])
    # activity before the first flush is no call's (as fibtui's own cutting leaves it out)
    assert ot.cut_calls([("k", 0, 1), (f, 2, 3), ("k", 4, 5)]) == pytest.approx([1e-6])
    # fibtui's own timing's delimiters are not this flush: another name
    assert "_fibtui_l2_flush" not in f


def test_the_flush_is_twice_the_l2_in_whole_mib() -> None:
    assert ot.flush_bytes(60 * 2**20) == 120 * 2**20  # the H200's 60 MiB L2
    assert ot.flush_bytes(50_000_000) == 95 * 2**20  # 100 MB rounded down to whole MiB
    assert ot.flush_bytes(None) == 128 * 2**20


def test_the_plan_is_the_contests_for_the_definition() -> None:
    assert presets.official_timing(presets.EvalPreset()) == {
        "warmup": 10,
        "iterations": 50,
        "trials": 3,
    }
    prefill = presets.preset_for({"name": "gdn_prefill_qk4_v8_d128_k_last", "op_type": "gdn"})
    assert presets.official_timing(prefill) == {"warmup": 1, "iterations": 5, "trials": 3}
    with pytest.raises(ValueError):
        ot.OfficialPlan.from_json({"iterations": 0})


def _tiny_request(official: dict, uuid: str = "w") -> dict:
    """A worker request: the tiny scale definition's Triton kernel on one workload, on the CPU
    interpreter, timed the official way with ``official``'s plan."""
    from tests.runner_helpers import GOOD_TRITON, TINY_DEFINITION

    return {
        "config": {
            "backend": "interpreter",
            "device": "cpu",
            "correctness_trials": 1,
            "plan": {"calls_per_block": 1, "blocks": 1, "warmup_calls": 0},
            "timing": "official",
            "official": official,
        },
        "definition": TINY_DEFINITION,
        "solutions": [
            {
                "id": "candidate-0",
                "name": "tiny",
                "spec": {
                    "language": "triton",
                    "entry_point": "kernel.py::scale",
                    "destination_passing_style": True,
                },
                "sources": [{"path": "kernel.py", "content": GOOD_TRITON}],
            }
        ],
        "jobs": [
            {
                "job_id": "0|w",
                "repeat": 0,
                "workload": {
                    "uuid": uuid,
                    "axes": {"n": 4},
                    "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
                },
            }
        ],
    }


def test_the_interpreter_worker_times_solution_and_reference_the_official_way() -> None:
    pytest.importorskip("torch")
    from fibtui.worker.engine import execute

    request = _tiny_request({"warmup": 1, "iterations": 3, "trials": 2})
    out = execute(request)
    result = out["jobs"][0]["results"][0]
    assert result["status"] == "PASSED", result
    off = result["timing"]["official"]
    assert off["kind"] == "official-equivalent"
    assert (off["warmup"], off["iterations"], off["trials"]) == (1, 3, 2)
    assert len(off["trial_medians_ms"]) == 2 and all(x > 0 for x in off["trial_medians_ms"])
    assert off["latency_ms"] == pytest.approx(sum(off["trial_medians_ms"]) / 2)
    assert len(off["reference_trial_medians_ms"]) == 2 and off["reference_latency_ms"] > 0
    assert off["speedup"] == pytest.approx(off["reference_latency_ms"] / off["latency_ms"])
    # fibtui's own timing of the job is still there, and still what the job's latency is
    assert result["latency_ms"] == result["timing"]["block_medians_ms"][0]


def test_no_profile_baseline_leaves_the_reference_untimed_as_flashinfer_bench_does() -> None:
    """``--no-profile-baseline`` (the plan's ``reference: false``): the solution is timed the
    official way, the reference is not (no reference latency, no speedup), and the record says so;
    the default plan writes no such key (its records stay as they were)."""
    pytest.importorskip("torch")
    from fibtui.worker.engine import execute

    def request(official: dict) -> dict:
        return _tiny_request(official, uuid="w-noref")

    plan = {"warmup": 0, "iterations": 2, "trials": 2}
    off = execute(request({**plan, "reference": False}))["jobs"][0]["results"][0]["timing"][
        "official"
    ]
    assert off["latency_ms"] > 0 and len(off["trial_medians_ms"]) == 2
    assert off["reference_latency_ms"] is None and off["speedup"] is None
    assert off["reference_trial_medians_ms"] == [] and off["reference"] is False
    timed = execute(request(plan))["jobs"][0]["results"][0]["timing"]["official"]
    assert "reference" not in timed and timed["reference_latency_ms"] > 0


def test_no_profile_baseline_is_a_flag_of_the_official_timing_only(tmp_path: Path) -> None:
    from fibtui.core.errors import UsageError
    from fibtui.core.workspace import open_workspace
    from fibtui.runners.session import RunOptions, engine_config
    from tests.runner_helpers import make_tiny_workspace

    ws = open_workspace(make_tiny_workspace(tmp_path / "ws"))
    definition = ws.dataset().definition(ws.active.definition)
    cfg = engine_config(
        "interpreter",
        definition,
        ws.dataset_root,
        RunOptions(timing="official", profile_baseline=False),
    )
    assert cfg["official"]["reference"] is False
    assert (
        "reference"
        not in engine_config(
            "interpreter", definition, ws.dataset_root, RunOptions(timing="official")
        )["official"]
    )
    with pytest.raises(UsageError, match="--no-profile-baseline goes with --timing official"):
        engine_config(
            "interpreter", definition, ws.dataset_root, RunOptions(profile_baseline=False)
        )


def _record(path: Path, official: bool = True) -> Path:
    """A paired run record of 4 workloads: fibtui's latencies say the candidate is 10% faster,
    the official-equivalent ones (2 x the latency, the reference 50 ms) say it is 5% slower."""
    jobs = []
    for i in range(4):
        for role, fib, off in (("baseline", 1.0, 1.0), ("candidate", 0.9, 1.05)):
            for rep in range(2):
                wobble = 1.0 + 0.001 * rep
                timing: dict = {"kind": "cupti"}
                if official:
                    timing["official"] = {
                        "latency_ms": 0.002 * (i + 1) * off * wobble,
                        "reference_latency_ms": 50.0,
                    }
                jobs.append(
                    {
                        "uuid": f"w{i}",
                        "axes": {"n": i + 1},
                        "solution": role,
                        "role": role,
                        "repeat": rep,
                        "status": "PASSED",
                        "latency_ms": 0.001 * (i + 1) * fib * wobble,
                        "reference_latency_ms": 1.0,
                        "timing": timing,
                    }
                )
    record = {
        "format": "fibtui-run",
        "version": 1,
        "run_id": "r1",
        "definition": "tiny_scale",
        "timing_kind": "cupti",
        "workload_selection": "all",
        "environment": {"gpu": "NVIDIA H200"},
        "solutions": [
            {"name": "baseline", "role": "baseline"},
            {"name": "candidate", "role": "candidate"},
        ],
        "jobs": jobs,
    }
    path.write_text(json.dumps(record))
    return path


def test_a_decision_on_official_equivalent_latencies(tmp_path: Path) -> None:
    src = stats.load_source(str(_record(tmp_path / "run.json")))
    own = stats.compare_sources(src, None).single
    assert own is not None and own.mean_latency is not None
    assert own.mean_latency.change == pytest.approx(-0.1, abs=1e-3)
    view = stats.official_view(src)
    assert stats.timing_key_of_source(view).kind == stats.OFFICIAL_KIND
    off = stats.compare_sources(view, None).single
    assert off is not None and off.mean_latency is not None
    assert off.mean_latency.change == pytest.approx(0.05, abs=1e-3)
    assert off.verdict == stats.REJECT
    assert off.score is not None and off.score.qualifier is None  # the reference timed alike
    base = sum(50.0 / (0.002 * (i + 1)) for i in range(4)) / 4
    assert off.score.score_baseline == pytest.approx(base, rel=1e-3)


def test_official_timings_of_the_interpreter_stay_the_interpreters(tmp_path: Path) -> None:
    """A CPU-interpreter run timed with --timing official never gives a speed verdict."""
    path = _record(tmp_path / "run.json")
    record = json.loads(path.read_text())
    record["timing_kind"] = "cpu-interpreter"
    path.write_text(json.dumps(record))
    view = stats.official_view(stats.load_source(str(path)))
    assert stats.timing_key_of_source(view).kind == stats.CPU_INTERPRETER
    assert stats.compare_sources(view, None).single.verdict == stats.NO_SPEED_VERDICT


def test_official_timing_asked_of_a_run_without_it_is_one_clear_error(tmp_path: Path) -> None:
    src = stats.load_source(str(_record(tmp_path / "run.json", official=False)))
    with pytest.raises(InputError) as exc:
        stats.official_view(src)
    assert "--timing official" in str(exc.value) and "run.json" in str(exc.value)


def test_parity_sets_flashinfer_bench_beside_the_official_twin() -> None:
    """A parity record against a run timed with --timing official sets flashinfer-bench's
    latency over the twin's per workload, with their geometric mean, and warns past 3%."""
    from fibtui.core.results import ResultRow
    from fibtui.runners.parity import OFFICIAL_AGREEMENT, FibtuiRecord, compare

    def bench(latencies):
        return [
            ResultRow(definition="d", solution="s", uuid=u, axes={}, status="PASSED", latency_ms=x)
            for u, x in latencies.items()
        ]

    fib = FibtuiRecord(
        "fibtui run r1 (s, cupti)",
        "r1",
        "cupti",
        "NVIDIA H200",
        {"a": ("PASSED", 0.008), "b": ("PASSED", 0.016)},
        {"a": 0.010, "b": 0.020},
    )
    near = compare(bench({"a": 0.0103, "b": 0.0202}), "s", fib, 0.01)
    assert [r.official_ratio for r in near.rows] == pytest.approx([1.03, 1.01])
    assert near.official_geomean_ratio == pytest.approx(math.sqrt(1.03 * 1.01))
    assert near.official_compared == 2
    assert not any("official-equivalent timing differ" in w for w in near.warnings)
    # against fibtui's own (read-flush) timing the same traces read 1.27x: warned as before
    assert near.geomean_ratio == pytest.approx(math.sqrt(1.2875 * 1.2625))
    far = compare(bench({"a": 0.0110, "b": 0.0220}), "s", fib, 0.01)
    assert math.log(far.official_geomean_ratio) > OFFICIAL_AGREEMENT
    assert any("official-equivalent timing differ by 1.100x" in w for w in far.warnings)


def test_the_gpu_timer_reads_the_profile_through_the_workers_own_reader() -> None:
    """CuptiTimer.spans reads torch.profiler's activity with fibtui.worker.timing's reader (the
    one fibtui's own timing uses) and cuts it at the flush; a fake profile stands in for CUPTI."""
    torch = pytest.importorskip("torch")

    class Act:
        def __init__(self, name: str, start: int, end: int) -> None:
            self._n, self._s, self._e = name, start, end

        def device_type(self):
            return torch.autograd.DeviceType.CUDA

        def name(self) -> str:
            return self._n

        def start_ns(self) -> int:
            return self._s

        def duration_ns(self) -> int:
            return self._e - self._s

        def device_resource_id(self) -> int:
            return 7

    acts = [
        Act(ot.FLUSH_NAME, 0, 500),
        Act("k", 1_000, 3_000),
        Act(ot.FLUSH_NAME, 4_000, 4_500),
        Act("k", 5_000, 5_500),
        Act("k2", 5_600, 9_000),
    ]
    prof = SimpleNamespace(
        profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: acts))
    )
    timer = object.__new__(ot.CuptiTimer)
    timer._prof = prof
    assert timer.spans(2) == pytest.approx([0.002, 0.004])
