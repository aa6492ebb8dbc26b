from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core import numbers
from fibtui.core.errors import InputError
from fibtui.core.results import load_results, summarize, table_to_json

DEF = "demo_def"


def retained_json(entries: dict[str, dict], **extra) -> dict:
    return {"generated_at_utc": "2026-01-01T00:00:00+00:00", "definition": DEF,
            "results": {DEF: entries}, **extra}


def passed(lat: float, ref: float = 1.0) -> dict:
    return {"status": "PASSED", "latency_ms": lat, "reference_latency_ms": ref, "speedup_factor": ref / lat,
            "max_abs_error": 1e-6, "max_rel_error": 1e-3}


# ------------------------------------------------------------------ shared fixtures (real files)

SHARED_CASES = [
    # (path parts, format, total, passed, mean latency over PASSED)
    (("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.json"), "retained-run", 54, 54, 0.006201481481481481),
    (("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.log"), "retained-run-log", 54, 54, 0.006201481481481481),
    (("fixtures", "artifacts", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64__retained_run.json"), "retained-run", 128, 128, 0.007649411458333333),
    (("fixtures", "artifacts", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64__retained_run.log"), "retained-run-log", 128, 128, 0.0068926484375),
    (("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl"), "fib-traces", 162, 162, None),
    (("fixtures", "h200", "flashinfer-bench", "isolated_14wl_3sol_dps.jsonl"), "fib-traces", 42, 42, None),
    (("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.log"), "fib-console-log", 162, 162, None),
]


@pytest.mark.parametrize("case", SHARED_CASES, ids=[c[0][-1] for c in SHARED_CASES])
def test_shared_result_files(shared, case) -> None:
    parts, fmt, total, n_passed, mean = case
    table = load_results(shared(*parts))
    s = summarize(table.rows)
    assert table.source_format == fmt
    assert (s["total"], s["passed"]) == (total, n_passed)
    if mean is not None:
        assert s["mean_latency_ms"] == pytest.approx(mean, rel=1e-12)


def test_retained_log_retry_section_wins(shared) -> None:
    table = load_results(shared("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.log"))
    row = next(r for r in table.rows if r.uuid == "9f238670-9a56-4ab9-94f9-555755f32205")
    assert row.status == "PASSED" and row.latency_ms == pytest.approx(0.00303)  # the retry's result
    assert row.axes == {"batch_size": 4}
    assert table.meta["retries"] == 1


def test_shared_traces_per_solution_means(shared) -> None:
    path = shared("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl")
    table = load_results(path)
    assert table.solutions == ["triton_bv16", "triton_bv32", "triton_bv32_copy"]
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    for sol in table.solutions:
        lat = [r["evaluation"]["performance"]["latency_ms"] for r in raw if r["solution"] == sol]
        s = summarize(table.for_solution(sol))
        assert s["total"] == 54 and s["mean_latency_ms"] == pytest.approx(sum(lat) / len(lat))
        assert s["p95_latency_ms"] == pytest.approx(numbers.p95(lat))


def test_hand_summary_and_markdown_and_direct_timing(shared) -> None:
    t = load_results(shared("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__summary.json"))
    assert t.source_format == "hand-summary" and t.definition == "gdn_decode_qk4_v8_d128_k_last"
    assert t.extra["runs"][0]["avg_latency_ms"] == pytest.approx(0.006201481481481481)
    t = load_results(shared("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__summary.md"))
    assert t.source_format == "markdown-summary" and t.extra["tables"]
    t = load_results(shared("fixtures", "h200", "direct_timing.json"))
    assert t.source_format == "direct-timing"
    sizes = {s["key"]: s for s in t.extra["sizes"]}
    assert sizes["1"]["profiler_kernel_ms"] == pytest.approx(0.0024, rel=1e-6)


# ------------------------------------------------------------------ formats made here


def test_retained_json_with_failures(tmp_path: Path) -> None:
    data = retained_json({"a": passed(0.002), "b": passed(0.004), "c": {"status": "PARSE_ERROR", "error": "exit_code=1"},
                          "d": {"status": "INCORRECT_NUMERICAL", "max_abs_error": 1.0, "max_rel_error": 2.0}},
                         summary={DEF: {"avg_latency_ms": 0.003, "p95_latency_ms": 0.0039}},
                         meta={"completed": 4, "total": 4})
    p = tmp_path / "retained_run.json"
    p.write_text(json.dumps(data))
    t = load_results(p)
    s = summarize(t.rows)
    assert t.source_format == "retained-run"
    assert (s["total"], s["passed"], s["failed"], s["infra_failed"]) == (4, 2, 2, 1)
    assert s["mean_latency_ms"] == pytest.approx(0.003) and not s["complete"]
    assert s["p95_latency_ms"] == pytest.approx(0.0039)
    assert next(r for r in t.rows if r.uuid == "c").error == "exit_code=1"


def test_single_container_layouts(tmp_path: Path) -> None:
    sol = {"name": "v3", "definition": DEF, "author": "me"}
    entries = {"a": {"status": "PASSED", "solution": "v3", "log": "",
                     "performance": {"latency_ms": 0.01, "reference_latency_ms": 1.0, "speedup_factor": 100.0},
                     "correctness": {"max_absolute_error": 0.0, "max_relative_error": 0.0}},
               "b": {"status": "RUNTIME_ERROR", "solution": "v3", "log": "Traceback...\nRuntimeError: boom"}}
    p = tmp_path / "benchmark_detailed_results.json"
    p.write_text(json.dumps({"solution": sol, "summary": {}, "results": {DEF: entries},
                             "ncu_profile": {"ncu_set": "detailed", "rows": []}}))
    t = load_results(p)
    assert t.source_format == "single-container" and t.definition == DEF
    a = next(r for r in t.rows if r.uuid == "a")
    assert a.latency_ms == 0.01 and a.solution == "v3" and a.speedup == 100.0
    assert next(r for r in t.rows if r.uuid == "b").error == "RuntimeError: boom"
    assert "ncu_profile" in t.extra
    p2 = tmp_path / "benchmark_detailed_result_single.json"
    p2.write_text(json.dumps({"solution": sol, "results": {DEF: {"a": entries["a"]}}}))
    assert load_results(p2).source_format == "single-container-single"


def test_retained_log_made_here(tmp_path: Path) -> None:
    text = """=== Run started at 2026-01-01T00:00:00+00:00 ===
Definition: demo_def
  Name: v9_try
  #    UUID   batch_size num_pages   Status     Latency    Ref    Speedup    abs_err    rel_err
------
  0 u0   1   3   PASSED   0.00200   1.0   500.00x   1.0e-07   1.0e-03
  1 u1   2   5   TIMEOUT  exceeded 300s
=== Retry started at 2026-01-01T00:10:00+00:00 ===
  #    UUID   batch_size num_pages   Status     Latency    Ref    Speedup    abs_err    rel_err
  1 u1   2   5   PASSED   0.00400   2.0   500.00x   1.0e-07   1.0e-03
"""
    p = tmp_path / "retained_run.log"
    p.write_text(text)
    t = load_results(p)
    assert [r.status for r in t.rows] == ["PASSED", "PASSED"]
    assert t.rows[1].axes == {"batch_size": 2, "num_pages": 5} and t.rows[1].latency_ms == 0.004
    assert t.rows[0].solution == "v9_try" and t.definition == "demo_def"


def test_axes_joined_from_a_lookup(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(retained_json({"a": passed(0.002)})))
    t = load_results(p, axes_lookup=lambda d, u: {"batch_size": 7} if u == "a" else None)
    assert t.rows[0].axes == {"batch_size": 7}


def test_json_output_has_the_documented_keys(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(retained_json({"a": passed(0.002)})))
    out = table_to_json(load_results(p))
    assert {"definition", "source_format", "rows", "summary"} <= set(out)
    assert {"uuid", "solution", "status", "latency_ms", "reference_latency_ms", "speedup", "axes"} <= set(out["rows"][0])
    assert {"total", "passed", "mean_latency_ms", "p95_latency_ms"} <= set(out["summary"])


# ------------------------------------------------------------------ malformed

MALFORMED = [
    ("empty.json", "", None, "file is empty"),
    ("truncated.json", '{"definition": "d", "results": {"d": {"a": {"status": "PASS', 1, "not valid JSON"),
    ("unknown_status.json", json.dumps(retained_json({"a": {"status": "GREAT"}})), None, "unknown status 'GREAT'"),
    ("missing_status.json", json.dumps(retained_json({"a": {"latency_ms": 1.0}})), None, "required field is missing"),
    ("wrong_type.json", json.dumps(retained_json({"a": {"status": "PASSED", "latency_ms": "fast"}})), None, "expected a number"),
    ("passed_no_latency.json", json.dumps(retained_json({"a": {"status": "PASSED"}})), None, "must carry a latency"),
    ("not_object.json", "[1, 2]", None, "expected a JSON object"),
    ("unknown_layout.json", '{"hello": 1}', None, "unrecognized JSON result layout"),
    ("trunc.jsonl", '{"definition": "d", "workload": {"uuid": "a", "axes": {}, "inputs": {}}, "solution": "s", "evaluation": null}\n{"definition": "d", "workl', 2, "not valid JSON"),
    ("bad.log", "just some text\nnothing here\n", None, "no result table found"),
]


@pytest.mark.parametrize(("name", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_result_files(tmp_path: Path, name: str, text: str, line: int | None, message: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert message in str(exc.value)
    assert str(exc.value).startswith(str(p))
    if line is not None:
        assert exc.value.line == line


def test_unknown_status_names_the_field(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(retained_json({"uuid-1": {"status": "GREAT"}})))
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert exc.value.field == f"results.{DEF}.uuid-1.status"
