"""Which flashinfer-bench a parity run used (fibtui.core.provenance): version and commit,
cupti-python, whether its CUPTI timer fell back to CUDA events, a release the contest does not run,
and its eval_config.yaml against fibtui's presets."""

from __future__ import annotations

import pytest

from fibtui.core import presets, provenance

MAIN = {"version": "0.1.3.dev5+g40e6ca78", "cupti_python": "13.4.0", "cupti_importable": True}


def test_a_build_of_main_with_cupti_times_with_cupti_and_warns_of_nothing() -> None:
    bench = provenance.provenance(MAIN, ["INFO benchmark: Solution 'x' ... PASSED"])
    assert bench["commit"] == "40e6ca78" and bench["release"] is False
    assert bench["cuda_event_fallback"] is False and bench["timing"] == "CUPTI"
    assert provenance.provenance_warnings(bench) == []
    assert "commit 40e6ca78" in provenance.describe(bench)


def test_the_fallback_is_seen_in_the_log_or_predicted_from_a_missing_cupti() -> None:
    logged = provenance.provenance(
        MAIN,
        ["UserWarning: CUPTI is not installed. ... Falling back to CUDA events for benchmarking."],
    )
    assert logged["cuda_event_fallback"] is True
    (warning,) = provenance.provenance_warnings(logged)
    assert "CUDA events, not CUPTI" in warning
    missing = provenance.provenance({**MAIN, "cupti_python": None, "cupti_importable": False}, [])
    assert missing["cuda_event_fallback"] is True
    assert "cupti-python is missing" in provenance.provenance_warnings(missing)[0]
    old_cupti = provenance.provenance({**MAIN, "cupti_python": "12.8.0"}, [])
    assert old_cupti["cuda_event_fallback"] is True  # it needs 13+
    unknown = provenance.provenance({"version": "0.1.3.dev1", "cupti_importable": None}, [])
    assert unknown["cuda_event_fallback"] is None and unknown["timing"] == "not known"


def test_a_release_is_not_what_the_contest_runs() -> None:
    old = provenance.provenance({"version": "0.1.2", "cupti_importable": False}, [])
    assert old["release"] is True and old["commit"] is None
    # 0.1.2 predates the CUPTI timer: no fallback to speak of, its own method is CUDA events
    assert old["cuda_event_fallback"] is None and old["timing"].startswith("CUDA events")
    (warning,) = provenance.provenance_warnings(old)
    assert "0.1.2 is a release" in warning and "main branch" in warning
    newer = provenance.provenance({"version": "0.2.0", **{"cupti_python": "13.4.0"}}, [])
    assert any("0.2.0 is a release" in w for w in provenance.provenance_warnings(newer))
    assert provenance.commit_of({"version": "0.1.2", "commit": "abc1234"}) == "abc1234"


def test_imported_traces_say_only_what_their_logs_say() -> None:
    bench = provenance.provenance({"asked": False}, [])
    assert bench["version"] is None and bench["cuda_event_fallback"] is None
    assert "not known" in provenance.describe(bench)


MOE = {"name": "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "op_type": "moe"}


def test_eval_config_tolerances_that_differ_from_the_preset_are_warnings() -> None:
    moe = presets.preset_for(MOE)
    # flashinfer-bench main's eval_config.yaml: op_type moe -> required_matched_ratio 0.95
    resolved = {
        "atol": 0.01,
        "rtol": 0.01,
        "required_matched_ratio": 0.95,
        "warmup_runs": 10,
        "iterations": 50,
        "num_trials": 3,
    }
    warnings = provenance.eval_config_warnings(resolved, moe)
    assert len(warnings) == 3  # atol 0.01 vs 1, rtol 0.01 vs 0.3, matched ratio 0.95 vs 0.9
    assert any("required_matched_ratio 0.95" in w and "preset 0.9" in w for w in warnings)
    default = presets.preset_for({"name": "gdn_decode_qk4_v8_d128_k_last", "op_type": "gdn"})
    same = {**resolved, "required_matched_ratio": None}  # None: the evaluator's default, 1.0
    assert provenance.eval_config_warnings(same, default) == []
    prefill = presets.preset_for({"name": "gdn_prefill_qk4_v8_d128_k_last", "op_type": "gdn"})
    timing = provenance.eval_config_warnings(same, prefill)
    assert [w.split(" for ")[0] for w in timing] == [
        "flashinfer-bench's eval_config.yaml sets warmup_runs 10",
        "flashinfer-bench's eval_config.yaml sets iterations 50",
    ]
    assert provenance.eval_config_warnings(None, default) == []


@pytest.mark.slow
def test_the_installed_flashinfer_bench_is_asked_in_a_subprocess() -> None:
    pytest.importorskip("flashinfer_bench")
    from fibtui.runners.parity import bench_facts

    facts = bench_facts(None, None)
    assert facts["asked"] is True
    import importlib.metadata as m

    assert facts["version"] == m.version("flashinfer-bench")
    assert isinstance(facts["cupti_importable"], bool)
