"""Files flashinfer-bench main itself wrote (tests/fixtures/flashinfer_bench_main, made on an H200)
read as it writes them: a wrong output's errors as the strings "Infinity" and "NaN", no
performance, the traces/<author>/<op_type>/<definition>.jsonl layout; through ``results show``,
``compare`` and ``parity --import`` as a user reads them, never refused."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fibtui.core.errors import InputError
from fibtui.core.results import load_results
from tests.conftest import run_cli

FIXTURE = Path(__file__).parent / "fixtures" / "flashinfer_bench_main"
TRACES = FIXTURE / "traces" / "fibtui" / "gdn" / "demo_gdn_decode_qk4_v8_d128_k_last.jsonl"


def test_the_file_is_what_flashinfer_bench_main_wrote() -> None:
    lines = [json.loads(line) for line in TRACES.read_text().splitlines() if line.strip()]
    errors = {(t["solution"], t["evaluation"]["correctness"]["max_absolute_error"]) for t in lines}
    assert errors == {("fibtui_spoiled_inf", "Infinity"), ("fibtui_spoiled_nan", "NaN")}
    assert all(t["evaluation"]["performance"] is None for t in lines)


def test_results_show_reads_it(capsys) -> None:
    table = load_results(TRACES)
    by = {(r.solution, r.uuid): r for r in table.rows}
    assert len(by) == 4 and {r.status for r in table.rows} == {"INCORRECT_NUMERICAL"}
    assert all(math.isinf(r.max_abs_error) for (s, _), r in by.items() if s.endswith("inf"))
    assert all(math.isnan(r.max_abs_error) for (s, _), r in by.items() if s.endswith("nan"))
    code, out, err = run_cli(capsys, "results", "show", str(TRACES), "--json")
    assert code == 0, err
    assert len(json.loads(out)["rows"]) == 4


def test_compare_and_parity_read_it(tmp_path: Path, capsys) -> None:
    code, out, err = run_cli(
        capsys,
        "compare",
        str(TRACES),
        str(TRACES),
        "--solution-base",
        "fibtui_spoiled_inf",
        "--solution-cand",
        "fibtui_spoiled_nan",
        "--json",
    )
    assert code != 2, err  # read, and judged: both arms wrong, no speed verdict
    assert json.loads(out)["verdict"] != "PROMOTE"
    code, _, err = run_cli(capsys, "demo", str(tmp_path / "d"), "--no-tui")
    assert code == 0, err
    code, out, err = run_cli(
        capsys, "parity", "--import", str(FIXTURE), "--workspace", str(tmp_path / "d"), "--json"
    )
    assert code != 2, err
    record = json.loads(out)
    assert "INCORRECT_NUMERICAL" in json.dumps(record)


def test_a_run_without_the_baseline_profiled_reads_as_no_reference(tmp_path: Path) -> None:
    """``flashinfer-bench run --no-profile-baseline`` writes a PASSED trace whose reference latency
    and speedup are 0.0: nothing was measured, so both read as absent (never a refusal, never a
    speedup of zero); a reference of zero beside a real speedup is still refused."""
    line = json.loads(TRACES.read_text().splitlines()[0])
    line["evaluation"]["status"] = "PASSED"
    line["evaluation"]["correctness"] = {"max_absolute_error": 0.0, "max_relative_error": 0.0}
    line["evaluation"]["performance"] = {
        "latency_ms": 0.0123,
        "reference_latency_ms": 0.0,
        "speedup_factor": 0.0,
    }
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (row,) = load_results(path).rows
    assert row.status == "PASSED" and row.latency_ms == 0.0123
    assert row.reference_latency_ms is None and row.speedup is None
    line["evaluation"]["performance"]["speedup_factor"] = 2.0
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(InputError, match="reference_latency_ms must be a finite positive number"):
        load_results(path)
