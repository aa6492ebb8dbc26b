"""Large result files at the speed of the format (issue 37 item 6): the quick paths give what the
strict ones give. The figures themselves are scripts/bench/bench_large_results.py's
(optimize_ops/benchmarks/large_results/), never asserted here."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fibtui.core import dataset, stats
from fibtui.core.dataset import _Ctx, _fast_trace, iter_jsonl, parse_trace_line
from fibtui.core.errors import InputError
from fibtui.core.results import load_results
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
#: every trace file of the test corpora, good and malformed
TRACES = sorted(
    p
    for p in (REPO / "tests").rglob("*.jsonl")
    if "trace" in p.as_posix().rsplit("/", 2)[-2:][-1] or "traces" in p.parts
)


def line(**over) -> dict:
    obj = {
        "definition": "d",
        "solution": "s",
        "workload": {"uuid": "u1", "axes": {"n": 4}, "inputs": {"x": {"type": "random"}}},
        "evaluation": {
            "status": "PASSED",
            "environment": {"hardware": "NVIDIA B200", "libs": {"torch": "2.8"}},
            "timestamp": "2026-12-01T00:00:00",
            "log": "",
            "correctness": {"max_absolute_error": 1e-7, "max_relative_error": 1e-6},
            "performance": {
                "latency_ms": 0.01,
                "reference_latency_ms": 0.02,
                "speedup_factor": 2.0,
            },
        },
    }
    obj.update(over)
    return obj


def test_the_quick_trace_reader_reads_what_the_strict_one_does() -> None:
    assert len(TRACES) > 5, TRACES
    quick = strict_refused = 0
    for path in TRACES:
        try:
            lines = list(iter_jsonl(path))
        except InputError:
            continue  # not JSON lines at all: the quick reader never sees it
        for n, obj in lines:
            fast = _fast_trace(obj, n)
            try:
                strict = parse_trace_line(_Ctx(path, n), obj)
            except InputError:
                strict_refused += 1
                assert fast is None, (path, n)  # what the strict reader refuses, it leaves
                continue
            if fast is not None:
                quick += 1
                assert fast == strict, (path, n)
    ok = line()
    assert _fast_trace(ok, 1) == parse_trace_line(_Ctx("f", 1), ok)
    assert quick > 0 and strict_refused > 0


@pytest.mark.parametrize(
    "bad",
    [
        {"definition": ""},
        {"solution": 3},
        {"workload": {"uuid": "u", "axes": {"n": -1}, "inputs": {}}},
        {"workload": {"uuid": "u", "axes": {"n": True}, "inputs": {}}},
        {"workload": {"uuid": "u", "axes": {}, "inputs": {"p": {"type": "safetensors"}}}},
        {"evaluation": {"status": "PASSED", "performance": {"latency_ms": float("nan")}}},
        {"evaluation": {"status": "PASSED", "performance": {"latency_ms": 0.0}}},
        {"evaluation": {"status": "PASSED", "performance": {"latency_ms": 1}}},
        {"evaluation": {"status": "PASSED"}},
        {"evaluation": {"status": "NOPE"}},
    ],
)
def test_anything_unusual_goes_to_the_strict_reader(bad: dict) -> None:
    assert _fast_trace(line(**bad), 1) is None


def test_a_large_table_is_printed_plain_with_every_row(capsys, tmp_path: Path, monkeypatch) -> None:
    from fibtui.verbs import results as results_verb

    path = tmp_path / "t.jsonl"
    rows = [
        line(workload={"uuid": f"u{i}\x1b[31m", "axes": {"n": i}, "inputs": {}}) for i in range(30)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(results_verb, "PLAIN_ROWS", 10)
    code, out, _ = run_cli(capsys, "results", "show", str(path))
    assert code == 0 and "\x1b[31m" not in out  # a file's escape is shown, never obeyed
    lines = out.splitlines()
    header = next(
        i for i, x in enumerate(lines) if x.split()[:2] == ["#", "uuid"] or "uuid" in x.split()
    )
    body = lines[header + 1 : header + 31]
    assert [b.split()[0] for b in body] == [str(i) for i in range(30)]
    assert all("PASSED" in b and "0.010000" in b for b in body)
    assert "30/30 PASSED" in out


def test_the_columnar_bootstrap_agrees_with_the_python_one() -> None:
    rng = random.Random(3)
    n = stats.BOOTSTRAP_COLUMNAR_WORKLOADS
    d = [rng.gauss(0.01, 0.02) for _ in range(n)]
    w = [1.0 + (i % 3) for i in range(n)]
    lo, hi = stats._bootstrap_columnar(d, w, 0.95, 400, 0)
    assert (lo, hi) == stats._bootstrap_columnar(d, w, 0.95, 400, 0)  # seeded: the same each run
    mean = sum(a * b for a, b in zip(d, w, strict=True)) / sum(w)
    t = stats._t_interval(d, w, 0.95)
    width = t.log_high - t.log_low
    assert lo < mean < hi
    assert abs((hi - lo) - width) < 0.2 * width  # a mean's percentile interval is the t-interval
    assert stats.bootstrap_resamples(100_000, 2000) == 200
    assert stats.bootstrap_resamples(1000, 2000) == 2000


def test_results_of_the_generated_bench_files_load(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench", REPO / "scripts" / "bench" / "bench_large_results.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = tmp_path / "b.jsonl"
    bench.write_traces(path, 50, "s", 1.0, 1)
    table = load_results(path)
    assert len(table.rows) == 50 and all(r.passed for r in table.rows)
    assert dataset.read_traces(path)[0][0].workload.axes == {"batch_size": 1, "seq_len": 1}
