from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core import numbers
from fibtui.core.errors import InputError
from fibtui.core.results import load_results, summarize, table_to_json

DEF = "demo_def"


def retained_json(entries: dict[str, dict], **extra) -> dict:
    return {
        "generated_at_utc": "2026-01-01T00:00:00+00:00",
        "definition": DEF,
        "results": {DEF: entries},
        **extra,
    }


def passed(lat: float, ref: float = 1.0) -> dict:
    return {
        "status": "PASSED",
        "latency_ms": lat,
        "reference_latency_ms": ref,
        "speedup_factor": ref / lat,
        "max_abs_error": 1e-6,
        "max_rel_error": 1e-3,
    }


# ------------------------------------------------------------------ shared fixtures (real files)

SHARED_CASES = [
    # (path parts, format, total, passed, mean latency over PASSED)
    (
        ("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.json"),
        "retained-run",
        54,
        54,
        0.006201481481481481,
    ),
    (
        ("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.log"),
        "retained-run-log",
        54,
        54,
        0.006201481481481481,
    ),
    (
        ("fixtures", "artifacts", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64__retained_run.json"),
        "retained-run",
        128,
        128,
        0.007649411458333333,
    ),
    (
        ("fixtures", "artifacts", "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64__retained_run.log"),
        "retained-run-log",
        128,
        128,
        0.0068926484375,
    ),
    (
        ("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl"),
        "fib-traces",
        162,
        162,
        None,
    ),
    (
        ("fixtures", "h200", "flashinfer-bench", "isolated_14wl_3sol_dps.jsonl"),
        "fib-traces",
        42,
        42,
        None,
    ),
    (
        ("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.log"),
        "fib-console-log",
        162,
        162,
        None,
    ),
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
    table = load_results(
        shared("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.log")
    )
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
    data = retained_json(
        {
            "a": passed(0.002),
            "b": passed(0.004),
            "c": {"status": "PARSE_ERROR", "error": "exit_code=1"},
            "d": {"status": "INCORRECT_NUMERICAL", "max_abs_error": 1.0, "max_rel_error": 2.0},
        },
        summary={DEF: {"avg_latency_ms": 0.003, "p95_latency_ms": 0.0039}},
        meta={"completed": 4, "total": 4},
    )
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
    entries = {
        "a": {
            "status": "PASSED",
            "solution": "v3",
            "log": "",
            "performance": {
                "latency_ms": 0.01,
                "reference_latency_ms": 1.0,
                "speedup_factor": 100.0,
            },
            "correctness": {"max_absolute_error": 0.0, "max_relative_error": 0.0},
        },
        "b": {
            "status": "RUNTIME_ERROR",
            "solution": "v3",
            "log": "Traceback...\nRuntimeError: boom",
        },
    }
    p = tmp_path / "benchmark_detailed_results.json"
    p.write_text(
        json.dumps(
            {
                "solution": sol,
                "summary": {},
                "results": {DEF: entries},
                "ncu_profile": {"ncu_set": "detailed", "rows": []},
            }
        )
    )
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
    assert {
        "uuid",
        "solution",
        "status",
        "latency_ms",
        "reference_latency_ms",
        "speedup",
        "axes",
    } <= set(out["rows"][0])
    assert {"total", "passed", "mean_latency_ms", "p95_latency_ms"} <= set(out["summary"])


# ------------------------------------------------------------------ malformed

MALFORMED = [
    ("empty.json", "", None, "file is empty"),
    (
        "truncated.json",
        '{"definition": "d", "results": {"d": {"a": {"status": "PASS',
        1,
        "not valid JSON",
    ),
    (
        "unknown_status.json",
        json.dumps(retained_json({"a": {"status": "GREAT"}})),
        None,
        "unknown status 'GREAT'",
    ),
    (
        "missing_status.json",
        json.dumps(retained_json({"a": {"latency_ms": 1.0}})),
        None,
        "required field is missing",
    ),
    (
        "wrong_type.json",
        json.dumps(retained_json({"a": {"status": "PASSED", "latency_ms": "fast"}})),
        None,
        "expected a number",
    ),
    (
        "passed_no_latency.json",
        json.dumps(retained_json({"a": {"status": "PASSED"}})),
        None,
        "must carry a latency",
    ),
    ("not_object.json", "[1, 2]", None, "expected a JSON object"),
    ("unknown_layout.json", '{"hello": 1}', None, "unrecognized JSON result layout"),
    (
        "trunc.jsonl",
        '{"definition": "d", "workload": {"uuid": "a", "axes": {}, "inputs": {}}, "solution": "s", "evaluation": null}\n{"definition": "d", "workl',
        2,
        "not valid JSON",
    ),
    ("bad.log", "just some text\nnothing here\n", None, "no result table found"),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_result_files(
    tmp_path: Path, name: str, text: str, line: int | None, message: str
) -> None:
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


# ------------------------------------------------------------------ latencies that stay true at the edges

#: (literal as written in the file, what the error shows)
BAD_LATENCIES = [
    ("NaN", "NaN"),
    ("Infinity", "Infinity"),
    ("-Infinity", "-Infinity"),
    ("1e400", "Infinity"),
    ("1" + "0" * 399, "an integer of 400 digits"),
    ("0", "0"),
    ("0.0", "0.0"),
    ("-0.5", "-0.5"),
    ("5e-324", "5e-324 (a subnormal number)"),
    ("2.2e-309", "2.2e-309 (a subnormal number)"),
]


def fill(template: str, **values: str) -> str:
    """``template`` with ``@DEF`` and each ``@NAME`` replaced (JSON text written by hand, braces and all)."""
    for name, value in {"DEF": DEF, **values}.items():
        template = template.replace(f"@{name}", value)
    return template


def _trace_line(uuid: str, latency: str, solution: str = "s", hardware: str = "NVIDIA H200") -> str:
    return fill(
        '{"definition": "@DEF", "solution": "@SOL", "workload": {"uuid": "@UUID", "axes": {"n": 1}, "inputs": {}}, '
        '"evaluation": {"status": "PASSED", "environment": {"hardware": "@HW"}, '
        '"performance": {"latency_ms": @LAT, "reference_latency_ms": 1.0}}}',
        SOL=solution,
        UUID=uuid,
        HW=hardware,
        LAT=latency,
    )


def _bad_latency_files(tmp_path: Path, literal: str) -> list[tuple[Path, int | None, str]]:
    """The same bad latency in every format that states one: (file, line, field)."""
    out = []
    p = tmp_path / "traces.jsonl"
    p.write_text(_trace_line("a", "0.5") + "\n" + _trace_line("b", literal) + "\n")
    out.append((p, 2, "evaluation.performance.latency_ms"))
    p = tmp_path / "retained_run.json"
    p.write_text(
        fill(
            '{"definition": "@DEF", "results": {"@DEF": {"a": {"status": "PASSED", "latency_ms": @LAT}}}}',
            LAT=literal,
        )
    )
    out.append((p, None, f"results.{DEF}.a.latency_ms"))
    p = tmp_path / "benchmark_detailed_results.json"
    p.write_text(
        fill(
            '{"solution": {"name": "s"}, "summary": {}, "results": {"@DEF": {"a": {"status": "PASSED", '
            '"performance": {"latency_ms": @LAT}}}}}',
            LAT=literal,
        )
    )
    out.append((p, None, f"results.{DEF}.a.performance.latency_ms"))
    p = tmp_path / "run.json"
    # a failed job's latency is checked too
    p.write_text(
        fill(
            '{"format": "fibtui-run", "definition": "@DEF", "jobs": [{"uuid": "a", "axes": {"n": 1}, "solution": "s", '
            '"role": "candidate", "repeat": 0, "status": "INCORRECT_NUMERICAL", "latency_ms": @LAT}]}',
            LAT=literal,
        )
    )
    out.append((p, None, "jobs[0].latency_ms"))
    return out


@pytest.mark.parametrize(
    ("literal", "shown"), BAD_LATENCIES, ids=[b[0][:12] for b in BAD_LATENCIES]
)
def test_a_latency_must_be_finite_positive_and_normal_in_every_format(
    tmp_path: Path, literal: str, shown: str
) -> None:
    for path, line, field in _bad_latency_files(tmp_path, literal):
        with pytest.raises(InputError) as exc:
            load_results(path)
        assert (exc.value.path, exc.value.line, exc.value.field) == (path, line, field), str(
            exc.value
        )
        assert exc.value.message == f"latency_ms must be a finite positive number, got {shown}"
    log = tmp_path / "retained_run.log"
    log.write_text(
        f"Definition: {DEF}\n#  UUID  n  Status  Latency  Ref\n0  a  1  PASSED  0.5  1.0\n"
        f"1  b  2  PASSED  {literal}  1.0\n"
    )
    with pytest.raises(InputError) as exc:  # the console table's column, read with float()
        load_results(log)
    assert (exc.value.path, exc.value.line, exc.value.field) == (log, 4, "Latency")
    assert exc.value.message.startswith("Latency must be a finite positive number, got ")


def test_reference_latency_and_speedup_follow_the_same_rule(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    for key, value in (
        ("reference_latency_ms", 0),
        ("speedup_factor", -2.0),
        ("speedup", float("inf")),
    ):
        p.write_text(
            json.dumps(retained_json({"a": {"status": "PASSED", "latency_ms": 0.5, key: value}}))
        )
        with pytest.raises(InputError) as exc:
            load_results(p)
        assert exc.value.field == f"results.{DEF}.a.{key}"
        assert exc.value.message.startswith(f"{key} must be a finite positive number, got ")
    # error magnitudes are not latencies: a wrong output's error may be NaN or infinite, and stays readable
    p.write_text(
        json.dumps(
            retained_json(
                {
                    "a": {
                        "status": "INCORRECT_NUMERICAL",
                        "max_abs_error": float("nan"),
                        "max_rel_error": float("inf"),
                    }
                }
            )
        )
    )
    row = load_results(p).rows[0]
    assert row.status == "INCORRECT_NUMERICAL" and row.max_rel_error == float("inf")


def test_zero_latency_is_not_a_pass_anywhere(tmp_path: Path, capsys) -> None:
    """It used to count as PASSED in `results show` and as a failure in `compare`."""
    from tests.conftest import run_cli

    base, cand = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    base.write_text("\n".join(_trace_line(u, "0.5", "b") for u in "xyz") + "\n")
    cand.write_text(
        "\n".join(_trace_line(u, "0" if u == "y" else "0.4", "c") for u in "xyz") + "\n"
    )
    for argv in (["results", "show", str(cand)], ["compare", str(base), str(cand)]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and not out
        assert err == (
            f"fibtui: error: {cand}:2: field 'evaluation.performance.latency_ms': "
            "latency_ms must be a finite positive number, got 0\n"
        )


def test_json_output_is_strict_rfc_8259(tmp_path: Path, capsys) -> None:
    """`--json` never writes a bare NaN or Infinity: a non-finite number becomes null."""
    from fibtui.verbs._common import emit_json, strict_json
    from tests.conftest import run_cli

    def strict_loads(text: str):
        def refuse(name: str):
            raise AssertionError(f"not JSON: {name}")

        return json.loads(text, parse_constant=refuse)

    p = tmp_path / "r.json"
    p.write_text(
        json.dumps(
            retained_json(
                {
                    "a": {
                        "status": "INCORRECT_NUMERICAL",
                        "max_abs_error": float("nan"),
                        "max_rel_error": float("-inf"),
                    },
                    "b": passed(0.5),
                },
                summary={DEF: {"avg_latency_ms": float("inf")}},
            )
        )
    )
    code, out, _ = run_cli(capsys, "results", "show", str(p), "--json")
    data = strict_loads(out)
    assert code == 0
    row = next(r for r in data["rows"] if r["uuid"] == "a")
    assert row["max_abs_error"] is None and row["max_rel_error"] is None
    assert (
        data["stated_summary"]["avg_latency_ms"] is None
        and data["summary"]["mean_latency_ms"] == 0.5
    )
    # the converter itself: nested values, keys, tuples and objects json cannot write
    assert strict_json(
        {
            "a": [1.5, float("nan"), (float("inf"), 2)],
            3: {"b": -float("inf")},
            float("nan"): Path("x"),
        }
    ) == {"a": [1.5, None, [None, 2]], 3: {"b": None}, "nan": "x"}
    emit_json({"x": float("nan"), "y": [float("inf")], "z": 10**400})
    out = capsys.readouterr().out
    assert strict_loads(out) == {"x": None, "y": [None], "z": 10**400}
    # a hand summary's free-form fields nested 900 deep, a NaN at the bottom: no RecursionError
    p = tmp_path / "summary.json"
    p.write_text(
        '{"candidate": "x", "mean_across_repeats": {"a": ' + "[" * 900 + "NaN" + "]" * 900 + "}}"
    )
    code, out, err = run_cli(capsys, "results", "show", str(p), "--json")
    assert code == 0 and not err
    node = strict_loads(out)["stated_summary"]["a"]
    for _ in range(900):
        (node,) = node
    assert node is None


def test_a_400_digit_figure_in_a_files_own_summary_is_left_aside(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(
        fill(
            '{"definition": "@DEF", "results": {"@DEF": {"a": {"status": "PASSED", "latency_ms": 0.5}}}, '
            '"summary": {"@DEF": {"avg_latency_ms": @BIG, "total_workloads": @BIG}}}',
            BIG="1" + "0" * 399,
        )
    )
    t = load_results(p)
    assert summarize(t.rows)["mean_latency_ms"] == 0.5
    assert t.notes == []  # neither figure compared (nor an OverflowError)


# ------------------------------------------------------------------ duplicates


def test_a_second_trace_of_one_solution_on_one_workload_replaces_the_first(
    tmp_path: Path,
) -> None:
    """flashinfer-bench appends each run's evaluations to one traces file: the newest evaluation
    of a solution on a workload is read (its timestamp, else the later line), and a note names
    the lines it replaced."""
    p = tmp_path / "traces.jsonl"
    p.write_text(
        "\n".join([_trace_line("a", "0.5"), _trace_line("b", "0.6"), _trace_line("a", "0.7")])
        + "\n"
    )
    table = load_results(p)
    assert {r.uuid: r.latency_ms for r in table.rows} == {"a": 0.7, "b": 0.6}
    assert any("replaced by a newer one" in n and "lines 1" in n for n in table.notes)
    # an older timestamp on a later line does not replace a newer evaluation
    newer = _trace_line("a", "0.5").replace(
        '"environment"', '"timestamp": "2026-12-02T10:00:00", "environment"'
    )
    older = _trace_line("a", "0.9").replace(
        '"environment"', '"timestamp": "2026-12-01T10:00:00", "environment"'
    )
    p.write_text(newer + "\n" + older + "\n")
    table = load_results(p)
    assert [r.latency_ms for r in table.rows] == [0.5]
    assert any("lines 2" in n for n in table.notes)
    # another solution, or the same solution measured on another GPU, is not a duplicate
    p.write_text(
        "\n".join(
            [
                _trace_line("a", "0.5"),
                _trace_line("a", "0.6", solution="t"),
                _trace_line("a", "0.7", hardware="NVIDIA B200"),
            ]
        )
        + "\n"
    )
    assert len(load_results(p).rows) == 3


def test_a_duplicate_workload_key_in_a_result_json_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "retained_run.json"
    p.write_text(
        fill(
            '{"definition": "@DEF", "results": {"@DEF": {\n "a": {"status": "PASSED", "latency_ms": 0.5},\n'
            ' "a": {"status": "PASSED", "latency_ms": 0.9}}}}\n'
        )
    )
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert exc.value.path == p and exc.value.line == 3 and exc.value.field == f"results.{DEF}.a"


def test_a_job_listed_twice_in_a_run_record_is_refused(tmp_path: Path) -> None:
    job = {
        "uuid": "a",
        "axes": {"n": 1},
        "solution": "s",
        "role": "candidate",
        "repeat": 0,
        "status": "PASSED",
        "latency_ms": 0.5,
    }
    p = tmp_path / "run.json"
    p.write_text(
        json.dumps(
            {
                "format": "fibtui-run",
                "definition": DEF,
                "jobs": [job, {**job, "repeat": 1}, {**job}],
            }
        )
    )
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert exc.value.field == "jobs[2].uuid" and "first at jobs[0]" in exc.value.message
    p.write_text(json.dumps({"format": "fibtui-run", "definition": [DEF], "jobs": [job]}))
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert exc.value.field == "definition" and exc.value.message == "expected a string, got a list"


# ------------------------------------------------------------------ byte-order marks, fibtui's own journal

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    "name", ["traces.jsonl", "retained_run.json", "retained_run.log", "summary.md", "timing.json"]
)
def test_a_byte_order_mark_is_accepted(tmp_path: Path, name: str) -> None:
    bodies = {
        "traces.jsonl": _trace_line("a", "0.5") + "\n",
        "retained_run.json": json.dumps(retained_json({"a": passed(0.5)})),
        "retained_run.log": f"Definition: {DEF}\n#  UUID  n  Status  Latency\n0  a  1  PASSED  0.5\n",
        "summary.md": "# Round\n\nDefinition: `demo_def`\n\n| band | ms |\n|---|---|\n| 1 | 0.1 |\n",
        "timing.json": '{"1": [{"kernel_ms": 0.5}]}',
    }
    plain, marked = tmp_path / "plain" / name, tmp_path / "bom" / name
    for path, prefix in ((plain, b""), (marked, BOM)):
        path.parent.mkdir()
        path.write_bytes(prefix + bodies[name].encode())
    a, b = table_to_json(load_results(plain)), table_to_json(load_results(marked))
    for out in (a, b):
        out.pop("path")
        for row in out["rows"]:
            row.pop("source", None)
    assert a == b and a["source_format"] != ""
    if name != "timing.json":
        assert a["definition"] == DEF


def _journal(tmp_path: Path, extra_lines: list[str] = ()) -> Path:
    from fibtui.core import runs

    folder = tmp_path / "optimize_ops" / "runs" / "r1"
    folder.mkdir(parents=True)
    header = runs.RunHeader(
        run_id="r1",
        definition=DEF,
        backend="interpreter",
        timing_kind="cpu-interpreter",
        l2_policy="n/a",
        solutions=[runs.SolutionRef("s", "candidate", "snapshots/candidate-s")],
        jobs=[runs.JobSpec(u, {"n": i}, "s", "candidate", 0) for i, u in enumerate("abc")],
        repeats=1,
        workload_selection="all",
        started="2026-01-01T00:00:00+00:00",
    )
    journal = runs.Journal(folder)
    journal.write_header(header)
    for job, lat in zip(header.jobs[:2], (0.5, 0.7), strict=True):
        journal.append_result(
            runs.JobResult(
                job.uuid, job.axes, job.solution, job.role, job.repeat, "PASSED", latency_ms=lat
            )
        )
    with open(journal.path, "a") as fh:
        fh.writelines(line + "\n" for line in extra_lines)
    return journal.path


def test_results_show_reads_fibtuis_own_journal(tmp_path: Path, capsys) -> None:
    from tests.conftest import run_cli

    nan_line = json.dumps(
        {
            "kind": "result",
            "uuid": "c",
            "axes": {"n": 2},
            "solution": "s",
            "role": "candidate",
            "repeat": 0,
            "status": "PASSED",
            "latency_ms": float("nan"),
        }
    )
    path = _journal(tmp_path, [nan_line, '{"kind": "result", "uu'])
    t = load_results(path)
    assert (
        t.source_format == "fibtui-run" and t.meta["read_from"] == "journal" and t.definition == DEF
    )
    assert [(r.uuid, r.latency_ms) for r in t.rows] == [
        ("a", 0.5),
        ("b", 0.7),
    ]  # the NaN line is never a result
    assert any("corrupt or torn: 4, 5" in n for n in t.notes) and any(
        "2 of 3 jobs" in n for n in t.notes
    )
    code, out, err = run_cli(capsys, "results", "show", str(path), "--json")
    assert code == 0 and not err
    data = json.loads(out)
    assert data["summary"]["passed"] == 2 and data["meta"]["run_id"] == "r1"
    # a journal whose header is broken is one line naming the file and line 1
    path.write_text('{"kind": "header", "format": "fibtui-run", "run_id": 7}\n')
    code, _, err = run_cli(capsys, "results", "show", str(path))
    assert (
        code == 2
        and err
        == f"fibtui: error: {path}:1: field 'header': journal header is malformed: bad jobs\n"
    )


# -- duplicates in the console and retained-run logs (two runs in one file), speedup tokens ----

_CONSOLE = (
    "Processing definition: tiny_scale\nSolution 's' for workload {u}: PASSED with {x}x speedup\n"
)


def test_console_log_refuses_a_second_line_for_one_solution_and_workload(tmp_path: Path) -> None:
    p = tmp_path / "console.log"
    p.write_text(
        _CONSOLE.format(u="w1", x="2.0")
        + "Solution 's' for workload w1: PASSED with 2.5x speedup\n"
    )
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert str(exc.value) == (
        f"{p}:3: field 'uuid': a second result for workload w1 and solution 's' "
        "(first on line 2; two runs concatenated?)"
    )
    # another solution, or the same uuid under another definition, is not a repeat
    p.write_text(
        _CONSOLE.format(u="w1", x="2.0")
        + "Solution 't' for workload w1: PASSED with 2.5x speedup\n"
        + _CONSOLE.format(u="w1", x="3.0").replace("tiny_scale", "other_def")
    )
    t = load_results(p)
    assert [(r.definition, r.solution, r.speedup) for r in t.rows] == [
        ("tiny_scale", "s", 2.0),
        ("tiny_scale", "t", 2.5),
        ("other_def", "s", 3.0),
    ]


@pytest.mark.parametrize(
    ("token", "shown"), [("nan", "NaN"), ("inf", "Infinity"), ("0.0", "0.0"), ("-1.5", "-1.5")]
)
def test_console_log_speedup_must_be_finite_and_positive(
    tmp_path: Path, token: str, shown: str
) -> None:
    p = tmp_path / "console.log"
    p.write_text(_CONSOLE.format(u="w1", x=token))
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert (
        str(exc.value)
        == f"{p}:2: field 'speedup': speedup must be a finite positive number, got {shown}"
    )


def test_console_log_speedup_that_is_no_number_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "console.log"
    p.write_text(_CONSOLE.format(u="w1", x="fast"))
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert str(exc.value) == f"{p}:2: field 'speedup': expected a number, got 'fast'"


_LOG_HEAD = "DEFINITION: tiny_scale\n  Name: s\n#  UUID  n  Status  Latency  Ref  Speedup  abs_err  rel_err\n---\n"
_LOG_ROW = "{i}  w{i}  {i}  PASSED  {lat}  1.0  2.0x  0.0  0.0\n"


def test_retained_log_refuses_one_workload_twice_in_one_table(tmp_path: Path) -> None:
    p = tmp_path / "retained_run.log"
    p.write_text(
        _LOG_HEAD
        + _LOG_ROW.format(i=1, lat="0.5")
        + _LOG_ROW.format(i=2, lat="0.6")
        + _LOG_ROW.format(i=1, lat="0.7")
    )
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert (
        str(exc.value)
        == f"{p}:7: field 'UUID': a second result for workload w1 in one table (first on line 5)"
    )


def test_retained_log_refuses_a_second_run_section_with_the_same_workloads(tmp_path: Path) -> None:
    run = (
        "=== Run started at 2026-01-01T00:00:00+00:00 ===\n"
        + _LOG_HEAD
        + _LOG_ROW.format(i=1, lat="0.5")
    )
    p = tmp_path / "retained_run.log"
    p.write_text(run + run.replace("0.5", "0.9"))
    with pytest.raises(InputError) as exc:
        load_results(p)
    assert str(exc.value) == (
        f"{p}:12: field 'UUID': a second result for workload w1 (first on line 6, in another "
        "'=== Run started' section: two runs concatenated?)"
    )


def test_retained_log_reprinted_tables_and_retries_are_not_duplicates(tmp_path: Path) -> None:
    """A log prints its table by latency, then again by workload index; a retry section reruns
    failed workloads. Neither is a second run: the later result wins."""
    p = tmp_path / "retained_run.log"
    p.write_text(
        "=== Run started at 2026-01-01T00:00:00+00:00 ===\n"
        + _LOG_HEAD
        + _LOG_ROW.format(i=2, lat="0.6")
        + _LOG_ROW.format(i=1, lat="0.5")
        + "=== Results ordered by workload index ===\n"
        + _LOG_HEAD[_LOG_HEAD.index("#") :]
        + _LOG_ROW.format(i=1, lat="0.5")
        + _LOG_ROW.format(i=2, lat="0.6")
        + "=== Retry started at 2026-01-01T00:01:00+00:00 ===\n"
        + _LOG_HEAD
        + _LOG_ROW.format(i=2, lat="0.4")
    )
    t = load_results(p)
    assert {r.uuid: r.latency_ms for r in t.rows} == {"w1": 0.5, "w2": 0.4}
    assert t.meta["retries"] == 1
