"""Official parity: the command per contest definition, the whole run path with a fake
flashinfer-bench on PATH, imports of real H200 traces beside fibtui's records, the warnings."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fibtui.core.dataset import parse_definition
from fibtui.core.errors import InputError
from fibtui.core.presets import preset_for
from fibtui.core.results import ResultRow
from fibtui.core.runs import JobResult, JobSpec, Journal, RunHeader, SolutionRef, write_record
from fibtui.core.settings import set_setting
from fibtui.core.workspace import open_workspace
from fibtui.runners import parity as parity_mod
from fibtui.runners.parity import (
    LAUNCHER_CODE,
    FibtuiRecord,
    compare,
    fibtui_record,
    flashinfer_bench_launcher,
    import_parity,
    parity_command,
    parity_status,
    parity_tau,
)
from fibtui.services.runs import RunOptions, prepare_run
from tests.conftest import DEMO_DEFINITION, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "parity"
DEMO_TRACES = (
    FIXTURES / "parity_traces_demo_rep.jsonl"
)  # flashinfer-bench 0.1.2, official shape, H200
H200_RECORD = (
    FIXTURES / "h200_demo_cold_run1.run.json"
)  # fibtui on the same H200, cold L2, all 50 workloads
SOLUTION = "demo_gdn_decode_triton_v1"
B1 = "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8"  # the batch-1 workload among the demo's representatives


def _definition(name: str, op_type: str, tags: list[str]):
    return parse_definition(
        {
            "name": name,
            "op_type": op_type,
            "tags": tags,
            "axes": {"n": {"type": "var"}},
            "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
            "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
            "reference": "def run(x):\n    return x\n",
        }
    )


CONTEST = [
    ("gdn_decode_qk4_v8_d128_k_last", "gdn", ["stage:decode"], []),
    (
        "gdn_prefill_qk4_v8_d128_k_last",
        "gdn",
        ["stage:prefill"],
        ["--warmup-runs", "1", "--iterations", "5", "--num-trials", "3"],
    ),
    (
        "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
        "moe",
        [],
        ["--atol", "1", "--rtol", "0.3", "--required-matched-ratio", "0.9"],
    ),
    ("dsa_sparse_decode_h16_ckv512_kpe64_topk2048_ps64", "dsa_paged", ["stage:decode"], []),
    ("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "dsa_paged", [], []),
]


@pytest.mark.parametrize(
    ("name", "op_type", "tags", "flags"),
    CONTEST,
    ids=[c[0].split("_")[0] + "_" + c[0].split("_")[1] for c in CONTEST],
)
def test_official_command_per_contest_definition(
    name: str, op_type: str, tags: list[str], flags: list[str]
) -> None:
    argv = parity_command(
        "/data/DIR",
        name,
        "my_sol",
        preset_for(_definition(name, op_type, tags)),
        ["flashinfer-bench"],
    )
    assert argv == [
        "flashinfer-bench",
        "run",
        "--local",
        "/data/DIR",
        "--definitions",
        name,
        "--solutions",
        "my_sol",
        "--use-isolated-runner",
        "--save-results",
        "--resume",
        "--timeout",
        "300",
        *flags,
    ]


def test_launcher_from_path_or_this_python(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert flashinfer_bench_launcher() == ([sys.executable, "-c", LAUNCHER_CODE], "python -c")
    fake = tmp_path / "flashinfer-bench"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert flashinfer_bench_launcher() == ([str(fake)], "PATH")


def test_print_shows_the_command_and_writes_nothing(
    capsys, demo_ws: Path, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(
        parity_mod, "_bench_installed", lambda: False
    )  # as on a machine without the bench extra
    code, out, _ = run_cli(
        capsys, "parity", "--print", "--json", "--workloads", "all", "--workspace", str(demo_ws)
    )
    plan = json.loads(out)
    assert code == 0 and plan["definition"] == DEMO_DEFINITION and plan["solution"] == SOLUTION
    assert len(plan["workloads"]) == 50 and plan["launcher"] == "python -c"
    argv = plan["argv"]
    assert argv[:3] == [sys.executable, "-c", LAUNCHER_CODE]
    assert argv[3:] == [
        "run",
        "--local",
        plan["dataset_dir"],
        "--definitions",
        DEMO_DEFINITION,
        "--solutions",
        SOLUTION,
        "--use-isolated-runner",
        "--save-results",
        "--resume",
        "--timeout",
        "300",
    ]
    assert Path(plan["dataset_dir"]).parent.parent == demo_ws / "optimize_ops" / "parity"
    assert not (demo_ws / "optimize_ops" / "parity").exists()
    code, out, _ = run_cli(capsys, "parity", "--print", "--workspace", str(demo_ws))
    assert code == 0 and "--use-isolated-runner --save-results --resume --timeout 300" in out
    assert "fibtui[bench]" in out  # not installed in this test environment: say how to get it


FAKE_BENCH = r'''#!{python}
"""A stand-in for flashinfer-bench: reads the FlashInfer-Trace folder it is given, writes traces."""
import json, os, pathlib, sys
args = sys.argv[1:]
pathlib.Path(os.environ["FAKE_FIB_ARGV"]).write_text(json.dumps(args))
if os.environ.get("FAKE_FIB_PID") and not os.environ.get("FAKE_FIB_LOG_FIRST"):  # slow: say who we are, wait
    import time
    pathlib.Path(os.environ["FAKE_FIB_PID"]).write_text(str(os.getpid()))
    time.sleep(120)
if os.environ.get("FAKE_FIB_EXIT"):
    print("boom: something went wrong", flush=True)
    sys.exit(int(os.environ["FAKE_FIB_EXIT"]))
local = pathlib.Path(args[args.index("--local") + 1])
d = args[args.index("--definitions") + 1]
s = args[args.index("--solutions") + 1]
op = json.loads(next((local / "definitions").rglob(d + ".json")).read_text())["op_type"]
sols = [json.loads(p.read_text()) for p in (local / "solutions").rglob("*.json")]
assert [x["name"] for x in sols] == [s], sols
lines = [json.loads(x) for x in next((local / "workloads").rglob(d + ".jsonl")).read_text().splitlines() if x.strip()]
status = os.environ.get("FAKE_FIB_STATUS", "PASSED")
if os.environ.get("FAKE_FIB_LOG_FIRST"):  # as flashinfer-bench does: a log line per workload, the traces at the end
    import time
    for i, w in enumerate(lines):
        st = "INCORRECT_NUMERICAL" if i == 0 else status
        print("[00:00:0%d] INFO flashinfer_bench.bench.benchmark: Solution '%s' for workload %s: %s with 3.00x speedup"
              % (i, s, w["workload"]["uuid"], st), flush=True)
    pathlib.Path(os.environ["FAKE_FIB_PID"]).write_text(str(os.getpid()))
    time.sleep(120)
out = local / "traces" / op / (d + ".jsonl")
out.parent.mkdir(parents=True, exist_ok=True)
with out.open("a") as fh:
    for w in lines:
        ev = {{"status": status, "environment": {{"hardware": "FAKE GPU", "libs": {{"torch": "x"}}}},
              "timestamp": "2026-11-29T00:00:00", "log": "" if status == "PASSED" else "mismatch\n",
              "correctness": {{"max_relative_error": 0.01, "max_absolute_error": 0.001, "extra": None}},
              "performance": {{"latency_ms": 0.05, "reference_latency_ms": 0.5, "speedup_factor": 10.0}} if status == "PASSED" else None}}
        fh.write(json.dumps({{"definition": d, "workload": w["workload"], "solution": s, "evaluation": ev}}) + "\n")
        print("Solution '%s' for workload %s: %s" % (s, w["workload"]["uuid"], status), flush=True)
print("Saved %d traces for definition %s" % (len(lines), d))
'''


@pytest.fixture
def fake_bench(tmp_path: Path, monkeypatch) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "flashinfer-bench"
    exe.write_text(FAKE_BENCH.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_FIB_ARGV", str(tmp_path / "argv.json"))
    for var in ("FAKE_FIB_STATUS", "FAKE_FIB_EXIT", "FAKE_FIB_PID", "FAKE_FIB_LOG_FIRST"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "argv.json"


@pytest.mark.slow
def test_the_whole_parity_run_with_a_fake_flashinfer_bench(
    capsys, demo_ws: Path, fake_bench: Path, monkeypatch
) -> None:
    ws = open_workspace(demo_ws)
    wl = ws.dataset().workloads(DEMO_DEFINITION)
    small = [u for u in wl.uuids if wl.axes_of(u)["batch_size"] == 1][:2]
    # fibtui's own gate on the same workloads, measured by the CPU interpreter in this test
    gate = prepare_run(ws, RunOptions(backend="interpreter", workloads=",".join(small))).runner.run(
        lambda e: None
    )
    assert gate.summary.complete

    code, out, err = run_cli(
        capsys, "parity", "--workloads", ",".join(small), "--json", "--workspace", str(demo_ws)
    )
    rec = json.loads(out)
    assert code == 0, err
    archive = Path(rec["path"])
    argv = json.loads(fake_bench.read_text())
    assert argv == [
        "run",
        "--local",
        str(archive / "dataset"),
        "--definitions",
        DEMO_DEFINITION,
        "--solutions",
        SOLUTION,
        "--use-isolated-runner",
        "--save-results",
        "--resume",
        "--timeout",
        "300",
    ]
    assert rec["command"][1:] == argv and Path(rec["command"][0]).name == "flashinfer-bench"
    for name in (
        "command.json",
        "console.log",
        "traces.jsonl",
        "comparison.json",
        "parity.json",
        "solution.json",
    ):
        assert (archive / name).is_file(), name
    assert (
        f"Solution '{SOLUTION}' for workload {small[0]}: PASSED"
        in (archive / "console.log").read_text()
    )
    assert "Saved 2 traces" in err  # live output (stderr under --json)
    workloads = (
        (archive / "dataset" / "workloads" / "gdn" / f"{DEMO_DEFINITION}.jsonl")
        .read_text()
        .splitlines()
    )
    assert [json.loads(x)["workload"]["uuid"] for x in workloads] == small
    packed = json.loads((archive / "solution.json").read_text())
    assert packed["name"] == SOLUTION and packed["sources"][0]["path"] == "kernel.py"
    assert rec["complete"] and rec["passed"] == rec["total"] == 2 and rec["source"] == "run"
    comp = rec["comparisons"][0]
    assert (
        comp["fibtui"].startswith(f"fibtui run {gate.run_id}")
        and comp["fibtui_timing_kind"] == "cpu-interpreter"
    )
    assert [r["fibtui_status"] for r in comp["rows"]] == ["PASSED", "PASSED"] and not comp[
        "verdict_mismatches"
    ]
    assert all(r["ratio"] is None for r in comp["rows"])  # interpreter latencies are never compared
    assert any("latencies not" in n for n in comp["notes"]) and not comp["warnings"]
    st_ = parity_status(ws, DEMO_DEFINITION)
    assert st_ is not None and st_.complete and st_.id == rec["id"] and st_.source == "run"

    # the same kernel judged wrong by the harness: a verdict mismatch, exit 1, the newest status is not ready
    monkeypatch.setenv("FAKE_FIB_STATUS", "INCORRECT_NUMERICAL")
    code, out, _ = run_cli(
        capsys, "parity", "--workloads", ",".join(small), "--workspace", str(demo_ws)
    )
    assert code == 1
    assert "verdicts differ on 2 workload(s)" in out and "not submission-ready" in out
    st2 = parity_status(ws, DEMO_DEFINITION)
    assert st2 is not None and not st2.complete and st2.id != st_.id
    code, out, _ = run_cli(capsys, "parity", "--status", "--json", "--workspace", str(demo_ws))
    assert code == 1 and json.loads(out)["parity"]["id"] == st2.id

    # a harness that fails: archived with its console, not ready
    monkeypatch.setenv("FAKE_FIB_EXIT", "3")
    code, out, _ = run_cli(
        capsys, "parity", "--workloads", small[0], "--json", "--workspace", str(demo_ws)
    )
    rec = json.loads(out)
    assert code == 1 and rec["returncode"] == 3 and not rec["complete"]
    assert any("exited with code 3" in n for n in rec["notes"]) and any(
        "saved no traces" in n for n in rec["notes"]
    )
    assert "boom" in (Path(rec["path"]) / "console.log").read_text()


def test_run_refuses_without_flashinfer_bench(
    capsys, demo_ws: Path, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(
        parity_mod, "_bench_installed", lambda: False
    )  # as on a machine without the bench extra
    code, _, err = run_cli(capsys, "parity", "--workspace", str(demo_ws))
    assert code == 2 and "flashinfer-bench is not installed" in err and "--import" in err


def test_import_of_the_h200_traces_beside_fibtuis_h200_record(capsys, demo_ws: Path) -> None:
    """Real numbers: flashinfer-bench 0.1.2 (official shape) and fibtui (cold L2, CUPTI) on the
    same H200, same demo kernel, the 9 representatives."""
    code, out, err = run_cli(
        capsys,
        "parity",
        "--import",
        str(DEMO_TRACES),
        "--against",
        str(H200_RECORD),
        "--json",
        "--workspace",
        str(demo_ws),
    )
    rec = json.loads(out)
    assert code == 0, err
    assert (
        rec["source"] == "import"
        and rec["solution"] == SOLUTION
        and rec["passed"] == rec["total"] == 9
    )
    assert rec["environment"]["hardware"] == "NVIDIA H200"
    main_comp, wrong = rec["comparisons"]
    assert main_comp["compared"] == 9 and main_comp["geomean_ratio"] == pytest.approx(
        8.07, abs=0.01
    )
    assert main_comp["min_ratio"] == pytest.approx(3.32, abs=0.01) and main_comp[
        "max_ratio"
    ] == pytest.approx(21.97, abs=0.01)
    assert any(
        w.startswith("flashinfer-bench reports 8.07x fibtui's latency") and "launch overhead" in w
        for w in main_comp["warnings"]
    )
    assert all(r["flag"] == "latency" for r in main_comp["rows"])
    assert (
        wrong["solution"] == "bad_one_element_off"
        and wrong["passed"] == 0
        and len(wrong["rows"]) == 9
    )
    archive = Path(rec["path"])
    assert (archive / "traces.jsonl").read_text() == DEMO_TRACES.read_text()
    assert json.loads((archive / "command.json").read_text())["imported_from"] == str(
        DEMO_TRACES.resolve()
    )
    code, out, _ = run_cli(
        capsys,
        "parity",
        "--import",
        str(DEMO_TRACES),
        "--against",
        str(H200_RECORD),
        "--workspace",
        str(demo_ws),
    )
    assert code == 0 and "8.07x" in out and "16.45x" in out and "submission-ready" in out


@pytest.mark.slow
def test_import_beside_interpreter_records_made_here(demo_ws: Path) -> None:
    """fibtui's interpreter verdicts agree with flashinfer-bench's H200 verdicts, for the good kernel
    and for the deliberately wrong one."""
    ws = open_workspace(demo_ws)
    record = prepare_run(
        ws,
        RunOptions(
            backend="interpreter",
            workloads=B1,
            solutions=[str(demo_ws), str(demo_ws / "candidates" / "bad_one_element_off")],
        ),
    ).runner.run(lambda e: None)
    names = {j.solution: j.status for j in record.jobs}
    assert names == {SOLUTION: "PASSED", "bad_one_element_off": "INCORRECT_NUMERICAL"}
    rec = import_parity(ws, DEMO_TRACES)
    by_solution = {c.solution: c for c in rec.comparisons}
    for solution, status in names.items():
        comp = by_solution[solution]
        row = next(r for r in comp.rows if r.uuid == B1)
        assert (row.bench_status, row.fibtui_status, row.flag, row.ratio) == (
            status,
            status,
            None,
            None,
        )
        assert (
            not comp.verdict_mismatches
            and comp.fibtui_timing_kind == "cpu-interpreter"
            and not comp.warnings
        )
        assert (
            sum(1 for r in comp.rows if r.fibtui_status is None) == 8
        )  # fibtui ran only the batch-1 workload
    assert rec.complete


def test_import_of_the_shared_h200_fixtures(shared, demo_ws: Path) -> None:
    dataset = shared("datasets", "flashinfer-trace")
    cfg = demo_ws / "config.toml"
    cfg.write_text(cfg.read_text().replace(DEMO_DEFINITION, "gdn_decode_qk4_v8_d128_k_last"))
    shutil.rmtree(demo_ws / "dataset")
    ws = open_workspace(demo_ws, dataset)
    iso = import_parity(
        ws, shared("fixtures", "h200", "flashinfer-bench", "isolated_14wl_3sol_dps.jsonl")
    )
    assert iso.definition == "gdn_decode_qk4_v8_d128_k_last" and len(iso.comparisons) == 3
    assert (
        all(len(c.rows) == 14 for c in iso.comparisons)
        and iso.environment["hardware"] == "NVIDIA H200"
    )
    assert any("traces hold no" in n for n in iso.notes)
    per = import_parity(
        ws, shared("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl")
    )
    assert all(len(c.rows) == 54 for c in per.comparisons)
    assert parity_status(ws, "gdn_decode_qk4_v8_d128_k_last").id == per.id


def test_import_of_a_trace_folder(tmp_path: Path, demo_ws: Path) -> None:
    folder = tmp_path / "from_elsewhere"
    (folder / "traces" / "gdn").mkdir(parents=True)
    shutil.copyfile(DEMO_TRACES, folder / "traces" / "gdn" / f"{DEMO_DEFINITION}.jsonl")
    (folder / "console.log").write_text("Solution ... PASSED\n")
    rec = import_parity(open_workspace(demo_ws), folder)
    assert rec.total == 9 and (rec.path / "console.log").is_file()
    with pytest.raises(InputError, match="no flashinfer-bench traces"):
        import_parity(open_workspace(demo_ws), demo_ws / "solution")
    with pytest.raises(InputError, match="no such file"):
        import_parity(open_workspace(demo_ws), tmp_path / "nope.jsonl")


def _row(
    uuid: str, status: str = "PASSED", latency: float | None = 0.01, solution: str = "s"
) -> ResultRow:
    return ResultRow(
        "d", solution, uuid, {"n": 1}, status, latency_ms=latency if status == "PASSED" else None
    )


def test_disagreement_warnings_with_synthetic_latencies() -> None:
    fib = FibtuiRecord(
        "fibtui run r1 (s, cupti)",
        "r1",
        "cupti",
        "NVIDIA B200",
        {"a": ("PASSED", 0.010), "b": ("PASSED", 0.020), "c": ("INCORRECT_NUMERICAL", None)},
    )
    same = compare(
        [_row("a", latency=0.01005), _row("b", latency=0.0201)],
        "s",
        fib,
        0.01,
        bench_hardware="NVIDIA B200",
    )
    assert (
        same.geomean_ratio == pytest.approx(1.005, abs=1e-3)
        and not same.warnings
        and same.compared == 2
    )
    slower = compare([_row("a", latency=0.015), _row("b", latency=0.030)], "s", fib, 0.01)
    assert slower.warnings == [
        "flashinfer-bench reports 1.50x fibtui's latency (geometric mean over 2 workload(s), "
        "1.50-1.50x; tau 1.0%, default 1%)"
    ]
    overhead = compare([_row("a", latency=0.1), _row("b", latency=0.2)], "s", fib, 0.01)
    assert "10.00x" in overhead.warnings[0] and "launch overhead" in overhead.warnings[0]
    loose = compare(
        [_row("a", latency=0.015), _row("b", latency=0.030)], "s", fib, 0.6, "[stats] min_gain"
    )
    assert not loose.warnings and all(r.flag is None for r in loose.rows)
    verdict = compare([_row("a"), _row("c", latency=0.01)], "s", fib, 0.01)
    assert verdict.verdict_mismatches == ["c"]
    assert (
        verdict.warnings[0]
        == "verdicts differ on 1 workload(s): c (flashinfer-bench PASSED, fibtui INCORRECT_NUMERICAL)"
    )
    assert [r.flag for r in verdict.rows] == [None, "verdict"]
    other_gpu = compare([_row("a")], "s", fib, 0.01, bench_hardware="NVIDIA H200")
    assert any("different GPUs" in n for n in other_gpu.notes)
    nothing = compare([_row("a")], "s", None, 0.01)
    assert nothing.fibtui is None and any("no fibtui run" in n for n in nothing.notes)
    assert [
        r.bench_status
        for r in compare([_row("a", "RUNTIME_ERROR"), _row("a")], "s", fib, 0.01).rows
    ] == ["PASSED"]


def _write_run(
    root: Path, run_id: str, kind: str, latency: float, solution: str = "s", uuids=("a", "b")
) -> None:
    folder = root / "optimize_ops" / "runs" / run_id
    folder.mkdir(parents=True)
    ref = SolutionRef(solution, "candidate", "snapshots/c")
    header = RunHeader(
        run_id,
        "d",
        "local",
        kind,
        "cold",
        [ref],
        [JobSpec(u, {}, solution, "candidate", r) for r in range(2) for u in uuids],
        2,
        "all",
        "t",
    )
    j = Journal(folder)
    j.write_header(header)
    for r in range(2):
        for u in uuids:
            j.append_result(
                JobResult(u, {}, solution, "candidate", r, "PASSED", latency_ms=latency * (1 + r))
            )
    j.append_end("finished")
    write_record(folder)


def test_fibtuis_record_prefers_gpu_runs_holding_the_solution(tmp_path: Path) -> None:
    _write_run(tmp_path, "20261101-000000_d_local", "cupti", 0.010)
    _write_run(tmp_path, "20261102-000000_d_local", "cupti", 0.020, solution="other")
    _write_run(tmp_path, "20261103-000000_d_interpreter", "cpu-interpreter", 100.0)
    found = fibtui_record(tmp_path / "optimize_ops", "d", "s", ["a", "b"])
    assert found is not None and found.run_id == "20261101-000000_d_local"
    assert found.by_uuid["a"] == ("PASSED", pytest.approx(0.015))  # mean over the repeats
    assert fibtui_record(tmp_path / "optimize_ops", "d", "s", ["zzz"]) is None
    against = fibtui_record(
        tmp_path / "optimize_ops", "d", "s", ["a"], against="20261103-000000_d_interpreter"
    )
    assert against.timing_kind == "cpu-interpreter"


def test_tau_from_the_settings(tmp_path: Path) -> None:
    assert parity_tau(tmp_path) == (0.01, "default 1%")
    set_setting(tmp_path, "stats.min_gain", 0.02)
    assert parity_tau(tmp_path) == (0.02, "fibtui.toml [stats] min_gain 2%")
    set_setting(tmp_path, "stats.min_gain", 3)
    with pytest.raises(InputError) as exc:
        parity_tau(tmp_path)
    assert exc.value.field == "stats.min_gain"


def test_status_without_any_parity(capsys, demo_ws: Path) -> None:
    assert parity_status(demo_ws, DEMO_DEFINITION) is None
    (demo_ws / "optimize_ops" / "parity" / "broken").mkdir(parents=True)
    (demo_ws / "optimize_ops" / "parity" / "broken" / "parity.json").write_text("{not json")
    assert parity_status(open_workspace(demo_ws), DEMO_DEFINITION) is None
    code, out, _ = run_cli(capsys, "parity", "--status", "--workspace", str(demo_ws))
    assert code == 1 and "no parity run yet" in out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.dictionaries(
                st.sampled_from(["definition", "workload", "solution", "evaluation"]),
                st.one_of(
                    st.none(),
                    st.text(max_size=5),
                    st.integers(),
                    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
                ),
                max_size=4,
            ),
            min_size=1,
            max_size=3,
        ).map(lambda objs: "\n".join(json.dumps(o) for o in objs).encode()),
    )
)
def test_import_of_garbage_is_a_clean_input_error(tmp_path_factory, data: bytes) -> None:
    root = tmp_path_factory.mktemp("ws")
    ws = root / "demo"
    if not ws.exists():
        shutil.copytree(Path(__file__).parent.parent / "kernels" / "gdn_decode_demo", ws)
    path = root / "traces.jsonl"
    path.write_bytes(data)
    try:
        rec = import_parity(open_workspace(ws), path)
    except InputError as exc:
        # one line naming the file (or a line of it), never another file or a traceback
        assert (
            exc.path == path
            and exc.one_line().startswith(f"{path}:")
            and "\n" not in exc.one_line()
        ), exc
        parity = ws / "optimize_ops" / "parity"
        assert not parity.exists() or not any(parity.iterdir()), (
            "a refused import left a folder in the archive"
        )
        return
    # accepted: the counts are what the file holds, and the archived record reads back the same
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    assert 0 <= rec.passed <= rec.total <= len(lines)
    assert rec.complete == (rec.total > 0 and rec.passed == rec.total)
    saved = json.loads((rec.path / "parity.json").read_text())
    assert (saved["passed"], saved["total"]) == (rec.passed, rec.total)
    assert (rec.path / "traces.jsonl").read_bytes().strip() == data.strip()


def test_the_installed_flashinfer_bench_is_asked_which_evaluator_it_uses() -> None:
    """flashinfer-bench 0.1.2 (the package index's) has no top-k indexer evaluator: it judges the
    demo indexer elementwise, where the contest (its main branch) and fibtui judge the selected set.
    The parity record says so as a warning, so a differing status is explained, not hidden."""
    pytest.importorskip(
        "flashinfer_bench", reason="the bench extra (flashinfer-bench) is not installed here"
    )
    from fibtui.core.presets import evaluator_for
    from fibtui.core.toolchain import bench_version
    from fibtui.runners.parity import official_evaluator

    demo = (
        Path(__file__).resolve().parent.parent
        / "kernels"
        / "dsa_topk_demo"
        / "dataset"
        / "definitions"
        / "dsa_paged"
        / "dsa_topk_indexer_demo_h4_d32_topk32_ps16.json"
    )
    ours = evaluator_for(json.loads(demo.read_text()))
    theirs = official_evaluator(demo)
    assert ours == "dsa_topk_indexer" and theirs in ("default", "dsa_topk_indexer")
    if bench_version() == "0.1.2":
        assert theirs == "default"
    gdn = (
        Path(__file__).resolve().parent.parent
        / "kernels"
        / "gdn_decode_demo"
        / "dataset"
        / "definitions"
        / "gdn"
    )
    assert official_evaluator(next(gdn.glob("*.json"))) == "default"
    assert official_evaluator(demo, python="/nonexistent/python") is None


def test_a_parity_run_says_when_flashinfer_bench_judges_with_another_evaluator(
    capsys, tmp_path: Path, fake_bench: Path
) -> None:
    """The fake flashinfer-bench runs through this Python, whose flashinfer-bench (0.1.2) would
    judge the demo indexer elementwise: the record warns, naming both evaluators."""
    pytest.importorskip(
        "flashinfer_bench", reason="the bench extra (flashinfer-bench) is not installed here"
    )
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.toolchain import bench_version

    ws = create_demo_workspace(tmp_path / "dsa", operator="dsa_topk", git_init=False)
    code, out, err = run_cli(
        capsys, "parity", "--workloads", "all", "--json", "--workspace", str(ws)
    )
    rec = json.loads(out)
    assert rec["evaluator"] == "dsa_topk_indexer" and rec["total"] == 12, err
    if bench_version() == "0.1.2":
        assert rec["bench_evaluator"] == "default"
        assert any(
            "judged with its default evaluator" in w and "dsa_topk_indexer" in w
            for w in rec["warnings"]
        )


def _parity_with_a_slow_bench(demo_ws: Path, tmp_path: Path, **env_extra: str):
    """`fibtui parity --json` on the demo in a process of its own, returned once the fake
    flashinfer-bench has written its pid (it then sleeps): (the fibtui process, the bench's pid)."""
    import subprocess
    import time

    pid_file = tmp_path / "bench.pid"
    env = {
        **os.environ,
        "FAKE_FIB_PID": str(pid_file),
        **env_extra,
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fibtui",
            "parity",
            "--workloads",
            "all",
            "--json",
            "--workspace",
            str(demo_ws),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc, int(pid_file.read_text())


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_flashinfer_bench_too_and_the_record_says_so(
    demo_ws: Path, fake_bench: Path, tmp_path: Path, signame: str
) -> None:
    """flashinfer-bench runs in a process group of its own: a fibtui killed by SIGTERM (a
    `timeout`, a job scheduler) would leave it running on the GPU. The signal stops it, the record
    is archived and printed, and the exit code is 128 + the signal."""
    import signal

    proc, bench_pid = _parity_with_a_slow_bench(demo_ws, tmp_path)
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + getattr(signal, signame), err
    rec = json.loads(out)
    assert any(signame in n for n in rec["notes"]), rec["notes"]
    assert not rec["complete"] and Path(rec["path"], "parity.json").is_file()
    assert f"{signame}: stopping flashinfer-bench" in err
    with pytest.raises(ProcessLookupError):
        os.kill(bench_pid, 0)


def test_a_stopped_run_keeps_the_statuses_flashinfer_bench_logged(
    demo_ws: Path, fake_bench: Path, tmp_path: Path
) -> None:
    """flashinfer-bench writes a definition's traces only when the definition ends; one stopped
    before (a `timeout`, Ctrl-C) has logged a status per finished workload and saved nothing (seen
    on the H200: 7 of 8 GDN prefill workloads logged PASSED, 0 traces). The record keeps those
    statuses, marked as from the log, compares their verdicts with fibtui's, and is not complete."""
    import signal

    proc, _ = _parity_with_a_slow_bench(demo_ws, tmp_path, FAKE_FIB_LOG_FIRST="1")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    rec = json.loads(out)
    rows = rec["comparisons"][0]["rows"]
    assert len(rows) == len(rec["workloads"]) > 1
    assert [r["uuid"] for r in rows] == rec["workloads"]  # the log's order, every selected workload
    assert all(
        r["bench_from"] == "log" and r["bench_latency_ms"] is None and r["ratio"] is None
        for r in rows
    )
    assert [r["bench_status"] for r in rows] == ["INCORRECT_NUMERICAL"] + ["PASSED"] * (
        len(rows) - 1
    )
    assert all(r["axes"] for r in rows)  # read from the dataset folder fibtui prepared
    assert (rec["passed"], rec["total"]) == (len(rows) - 1, len(rows)) and not rec["complete"]
    assert any("console log only" in n for n in rec["comparisons"][0]["notes"])
    fib = [r for r in rows if r["fibtui_status"]]
    for r in fib:  # where fibtui holds the workload, a PASSED-vs-failure pair is a verdict mismatch
        assert (r["flag"] == "verdict") == (
            (r["bench_status"] == "PASSED") != (r["fibtui_status"] == "PASSED")
        )


def test_log_statuses_reads_the_h200_console_logs_and_nothing_else(tmp_path: Path) -> None:
    from fibtui.runners.parity import log_statuses

    log = tmp_path / "console.log"
    uuid_a, uuid_b = "a4427926-b711-413a-a932-1604f79f9431", "122fe53b-b821-4d11-bc71-6ea8d6900722"
    log.write_bytes(
        b"[05:50:04] INFO flashinfer_bench.cli.main: Resume mode enabled: will skip already evaluated solutions\n"
        + f"[05:50:12] INFO flashinfer_bench.bench.benchmark: Solution 'gdn_prefill_triton_v1' for workload {uuid_a}: "
        "PASSED with 181.97x speedup vs. mathematical reference\n".encode()
        + f"[05:50:32] INFO flashinfer_bench.bench.benchmark: Solution 'x' for workload {uuid_b}: RUNTIME_ERROR\n".encode()
        + f"[05:50:33] INFO ...: Solution 'x' for workload {uuid_b}: PASSED with 2.0x\n".encode()  # a rerun: the last wins
        + b"\xff\xfe not UTF-8 at all\n"
    )
    assert log_statuses(log) == {
        "gdn_prefill_triton_v1": {uuid_a: "PASSED"},
        "x": {uuid_b: "PASSED"},
    }
    assert log_statuses(tmp_path / "absent.log") == {} and log_statuses(None) == {}
    shipped = list(
        Path(__file__)
        .resolve()
        .parents[1]
        .glob(
            "optimize_ops/benchmarks/h200_20261202_definitions/call4_prefill/*_parity_console.log"
        )
    )
    assert len(shipped) == 1  # committed with the H200 results
    by = log_statuses(shipped[0])  # that run was stopped after 7 of 8 workloads, no trace saved
    assert (
        list(by) == ["gdn_prefill_triton_v1"]
        and list(by["gdn_prefill_triton_v1"].values()) == ["PASSED"] * 7
    )
