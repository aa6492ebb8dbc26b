"""CLI output width (issue 18, "CLI column cuts"): on an 80-column terminal every table fits and no
id (run id, uuid, solution name, round, path) is cut; piped (capsys is not a terminal) or with
``--wide``, every column and cell is printed whole and no line is wrapped.

The terminal case is forced with ``FIBTUI_FORCE_TERMINAL=1`` and ``COLUMNS=80`` (fibtui.verbs._common);
the escape sequences a terminal gets are stripped before the lines are measured."""

from __future__ import annotations

import io
import json
import math
import random
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.conftest import REPO, run_cli
from tests.tui_helpers import synthetic_gpu_run

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")
HISTORY_RUNS = [
    "20261129-103529_demo_local",
    "20261129-103545_demo_local",
    "20261129-103637_demo_local",
]
LONG_RUN = "20261129-103529_demo_gdn_decode_qk4_v8_d128_k_last_local"  # 56 characters
LONG_BASE = "baseline_triton_reference_kernel_v1"
LONG_FAST = "candidate_smallbatch_split_v_tiles_v2"
LONG_SLOW = "candidate_persistent_kernel_with_tma_loads_v3"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch):
    """Make the CLI lay out for a terminal of ``width`` columns (default 80)."""

    def set_width(width: int = 80) -> None:
        monkeypatch.setenv("FIBTUI_FORCE_TERMINAL", "1")
        monkeypatch.setenv("COLUMNS", str(width))
        monkeypatch.setenv("LINES", "24")

    set_width()
    return set_width


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """capsys is not a terminal; COLUMNS=80 as a user's shell exports it must not matter then."""
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL", raising=False)
    monkeypatch.setenv("COLUMNS", "80")


@pytest.fixture
def history_ws(tmp_path: Path) -> Path:
    """A demo workspace with its archived H200 rounds: runs, rounds, a parity record."""
    from fibtui.core.demo import create_demo_workspace

    # the archived rounds are committed: a clone without them is broken, not a reason to skip
    assert (REPO / "optimize_ops" / "runs" / HISTORY_RUNS[1]).is_dir(), (
        "optimize_ops/runs lacks the archived demo rounds"
    )
    return create_demo_workspace(tmp_path / "ws", git_init=False)


def lines_of(out: str) -> list[str]:
    """The lines as shown, without escape sequences or the padding at their ends."""
    return [line.rstrip() for line in ANSI.sub("", out).splitlines()]


def assert_fits(out: str, width: int = 80) -> list[str]:
    raw = ANSI.sub("", out).splitlines()
    assert raw, "no output"
    too_wide = [(cell_len(line), line) for line in raw if cell_len(line) > width]  # padding counted
    assert not too_wide, too_wide
    assert "…" not in ANSI.sub("", out)  # nothing was cut with an ellipsis
    return lines_of(out)


def line_with(lines: list[str], *words: str) -> str:
    """The one line holding every word (each whole); fails when the words are split over lines."""
    hits = [line for line in lines if all(w in line for w in words)]
    assert hits, f"no line holds all of {words!r}:\n" + "\n".join(lines)
    return hits[0]


def leaderboard_run(tmp_path: Path) -> Path:
    """A paired fibtui run record with one baseline and two candidates, all with long names."""
    rng = random.Random(9)
    jobs = []
    for w in range(8):
        axes = {"batch_size": 2**w}
        for j in range(2):
            for name, role, factor in (
                (LONG_BASE, "baseline", 1.0),
                (LONG_FAST, "candidate", 0.8),
                (LONG_SLOW, "candidate", 1.2),
            ):
                jobs.append(
                    {
                        "uuid": f"w{w}",
                        "axes": axes,
                        "solution": name,
                        "role": role,
                        "repeat": j,
                        "status": "PASSED",
                        "latency_ms": 0.001 * (w + 1) * factor * math.exp(rng.gauss(0, 0.003)),
                    }
                )
    path = tmp_path / "run.json"
    path.write_text(
        json.dumps(
            {
                "format": "fibtui-run",
                "definition": "d",
                "run_id": "r1",
                "jobs": jobs,
                "workload_selection": "all",
            }
        )
    )
    return path


def uuids_of(ws: Path) -> list[str]:
    from fibtui.core.dataset import Dataset
    from fibtui.core.workspace import open_workspace

    w = open_workspace(ws)
    return list(Dataset(w.dataset_root).workloads(w.active.definition).uuids)


# --------------------------------------------------------------------------------------------
# runs list
# --------------------------------------------------------------------------------------------


def test_runs_list_at_80_columns_keeps_whole_run_ids_and_names_the_hidden_column(
    capsys, history_ws, terminal
) -> None:
    code, out, _ = run_cli(capsys, "runs", "list", "--workspace", str(history_ws))
    lines = assert_fits(out)
    assert code == 0
    for run_id in HISTORY_RUNS:
        line_with(lines, run_id, "complete")  # the whole id, on its row
    assert lines[0].split() == ["run_id", "state", "jobs", "passed", "backend"]
    assert lines[-1] == "(columns hidden at 80 columns: started; --wide shows them)"


def test_runs_list_piped_prints_every_column_on_one_line_per_run(capsys, history_ws, piped) -> None:
    code, out, _ = run_cli(capsys, "runs", "list", "--workspace", str(history_ws))
    lines = lines_of(out)
    assert code == 0 and ANSI.search(out) is None
    assert lines[0].split() == ["run_id", "state", "jobs", "passed", "backend", "started"]
    assert len(lines) == 1 + len(HISTORY_RUNS) and "hidden" not in out
    for run_id in HISTORY_RUNS:
        assert re.search(
            rf"^{run_id}\s+complete\s+\d+/\d+\s+\d+\s+local\s+2026-11-29T\d\d:\d\d:\d\d\+00:00$",
            out,
            re.M,
        ), out


def test_runs_list_wide_on_a_terminal_hides_nothing(capsys, history_ws, terminal) -> None:
    code, out, _ = run_cli(capsys, "runs", "list", "--wide", "--workspace", str(history_ws))
    lines = lines_of(out)
    assert code == 0 and "hidden" not in out
    assert lines[0].split() == ["run_id", "state", "jobs", "passed", "backend", "started"]
    assert max(cell_len(line) for line in lines) > 80  # not laid out to the terminal's width
    for run_id in HISTORY_RUNS:
        line_with(lines, run_id, "complete", "2026-11-29T")
    # before the verb, as --workspace
    assert run_cli(capsys, "--wide", "runs", "list", "--workspace", str(history_ws))[1] == out


def test_runs_list_prints_a_block_per_row_when_an_id_alone_leaves_no_room(
    capsys, demo_ws, terminal
) -> None:
    synthetic_gpu_run(demo_ws, run_id=LONG_RUN)
    synthetic_gpu_run(demo_ws, aa_history=False)  # 20260101-000000_demo_local
    code, out, _ = run_cli(capsys, "runs", "list", "--workspace", str(demo_ws))
    lines = assert_fits(out)
    assert code == 0
    assert (
        LONG_RUN in lines and "20260101-000000_demo_local" in lines
    )  # each id whole on a line of its own
    # every column is kept, as "header value" pairs under the id
    assert lines.count("  state complete  jobs 100/100  passed 100  backend local") == 2
    assert lines.count("  started 2026-01-01T00:00:00+00:00") == 2
    # narrower than the id itself: the id is still printed whole (the only line over the width)
    terminal(40)
    code, out, _ = run_cli(capsys, "runs", "list", "--workspace", str(demo_ws))
    lines = lines_of(out)
    assert LONG_RUN in lines and [line for line in lines if cell_len(line) > 40] == [LONG_RUN]


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------


def test_compare_at_80_columns_keeps_the_passed_column(capsys, demo_ws, terminal) -> None:
    synthetic_gpu_run(demo_ws)
    code, out, _ = run_cli(
        capsys, "compare", "20260101-000000_demo_local", "--workspace", str(demo_ws)
    )
    lines = assert_fits(out)
    assert code == 0 and "PROMOTE" in out
    header = line_with(lines, "mean", "passed")
    assert header.split() == ["mean", "p95", "median", "run-to-run", "passed"]
    assert re.search(r"^baseline triton\s.*\s50/50\s*$", out, re.M) and re.search(
        r"^candidate v2_smallb_splitv\s.*\s50/50\s*$", out, re.M
    )
    assert "(columns hidden at 80 columns: best repeat; --wide shows them)" in lines
    line_with(lines, "batch_size=16", "-25.00%", "6/0/0")  # the bands table: whole rows


def test_compare_piped_prints_the_whole_latency_table(capsys, demo_ws, piped) -> None:
    synthetic_gpu_run(demo_ws)
    code, out, _ = run_cli(
        capsys, "compare", "20260101-000000_demo_local", "--workspace", str(demo_ws)
    )
    lines = lines_of(out)
    assert code == 0 and "hidden" not in out
    assert line_with(lines, "mean", "passed").split() == [
        "mean",
        "p95",
        "median",
        "best",
        "repeat",
        "run-to-run",
        "passed",
    ]
    line_with(lines, "candidate v2_smallb_splitv", "50/50")
    # the first line names the run whole, however long, on one line
    assert lines[0].startswith(
        "v2_smallb_splitv vs triton  (20260101-000000_demo_local; 50 paired workloads, scope full)"
    )


def test_compare_leaderboard_keeps_long_candidate_names_whole(
    capsys, tmp_path, terminal, monkeypatch
) -> None:
    path = leaderboard_run(tmp_path)
    code, out, _ = run_cli(capsys, "compare", str(path))
    lines = assert_fits(out)
    assert code == 0
    line_with(lines, "1", LONG_FAST, "PROMOTE")
    line_with(lines, "2", LONG_SLOW, "REJECT")
    assert any(line.startswith("(columns hidden at 80 columns: ") for line in lines)
    # one candidate with both names long: the latency table keeps them whole and its passed column
    code, out, _ = run_cli(capsys, "compare", str(path), "--solution-cand", LONG_SLOW)
    lines = assert_fits(out)
    line_with(lines, f"baseline {LONG_BASE}", "16/16")
    line_with(lines, f"candidate {LONG_SLOW}", "16/16")
    # piped: every column
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "compare", str(path))
    lines = lines_of(out)
    assert "hidden" not in out
    line_with(lines, "1", LONG_FAST, "[0.799, 0.801]", "PROMOTE")


# --------------------------------------------------------------------------------------------
# results show
# --------------------------------------------------------------------------------------------


def test_results_show_at_80_columns_cuts_no_uuid(capsys, demo_ws, terminal, monkeypatch) -> None:
    folder = synthetic_gpu_run(demo_ws)
    uuids = uuids_of(demo_ws)
    monkeypatch.chdir(folder)  # the heading names the file as given: short here, a temp path is not
    code, out, _ = run_cli(capsys, "results", "show", "run.json")
    lines = assert_fits(out)
    assert code == 0
    # two solutions: one table each, titled by its name, so the uuids have the room
    assert "triton (50 rows)" in lines and "v2_smallb_splitv (50 rows)" in lines
    for uuid in uuids:
        assert len([line for line in lines if uuid in line and "PASSED" in line]) == 2
    assert line_with(lines, "uuid", "status").split()[:3] == ["uuid", "batch_size", "status"]
    assert any(line.startswith("(columns hidden at 80 columns: #") for line in lines)
    # one solution: the heading names it
    code, out, _ = run_cli(capsys, "results", "show", "run.json", "--solution", "triton")
    lines = assert_fits(out)
    assert "solution: triton" in " ".join(" ".join(lines).split()) and all(
        any(u in line for line in lines) for u in uuids
    )


def test_results_show_piped_prints_each_row_whole_on_one_line(capsys, demo_ws, piped) -> None:
    folder = synthetic_gpu_run(demo_ws)
    code, out, _ = run_cli(capsys, "results", "show", str(folder / "run.json"))
    lines = lines_of(out)
    assert code == 0 and "hidden" not in out and "…" not in out
    assert line_with(lines, "#", "uuid").split() == [
        "#",
        "solution",
        "uuid",
        "batch_size",
        "status",
        "latency",
        "ms",
        "ref",
        "ms",
        "speedup",
        "abs",
        "err",
        "rel",
        "err",
    ]
    for uuid in uuids_of(demo_ws):
        for name in ("triton", "v2_smallb_splitv"):
            assert re.search(
                rf"^\d+\s+{name}\s+{uuid}\s+\d+\s+PASSED\s+[\d.]+\s+0\.500\s+[\d.]+x\s", out, re.M
            ), (name, uuid)
    assert line_with(lines, "v2_smallb_splitv: 50/50 PASSED", "p95 by linear interpolation")


def test_results_show_long_solution_names_in_a_trace_file(
    capsys, tmp_path, terminal, monkeypatch
) -> None:
    names = [
        "gdn_decode_triton_persistent_smallbatch_v12",
        "gdn_decode_cuda_cutlass_warp_specialized_v3",
    ]
    uuids = [f"{i:08x}-1111-5222-8333-444455556666" for i in range(4)]
    lines_out = []
    for name in names:
        for u in uuids:
            lines_out.append(
                json.dumps(
                    {
                        "definition": "d",
                        "solution": name,
                        "workload": {"uuid": u, "axes": {"n": 1}, "inputs": {}},
                        "evaluation": {
                            "status": "PASSED",
                            "environment": {"hardware": "NVIDIA H200"},
                            "performance": {"latency_ms": 0.5, "reference_latency_ms": 1.0},
                        },
                    }
                )
            )
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines_out) + "\n")
    code, out, _ = run_cli(capsys, "results", "show", str(path))
    lines = assert_fits(out)
    assert code == 0
    for name in names:
        assert any(line.startswith(f"{name} (4 rows)") for line in lines)
        line_with(lines, f"{name}: 4/4 PASSED")
    for u in uuids:
        assert len([line for line in lines if u in line]) == 2
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "results", "show", str(path))
    lines = lines_of(out)
    for name in names:
        for u in uuids:
            line_with(lines, name, u, "PASSED", "0.500000")


# --------------------------------------------------------------------------------------------
# status, round list, recon note, parity, pack, demo
# --------------------------------------------------------------------------------------------


def test_status_candidates_at_80_columns_and_piped(capsys, demo_ws, terminal, monkeypatch) -> None:
    code, out, _ = run_cli(capsys, "status", "--workspace", str(demo_ws))
    lines = assert_fits(out)
    assert code == 0
    for name in ("bad_one_element_off", "torch_eager", "v2_smallb_splitv"):
        line_with(lines, name, f"candidates/{name}")
    line_with(lines, "demo_gdn_decode_qk4_v8_d128_k_last", "yes", "50", "batch_size")
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "status", "--workspace", str(demo_ws))
    lines = lines_of(out)
    assert "hidden" not in out
    for name in ("bad_one_element_off", "torch_eager", "v2_smallb_splitv"):
        line_with(lines, name, "sources", "triton", "kernel.py::gdn_decode", f"candidates/{name}")
    # a long sentence is one line, not wrapped at 80
    judged = line_with(lines, "judged by", "(flashinfer-bench defaults)")
    assert cell_len(judged) > 80


def test_round_list_at_80_columns_and_piped(capsys, history_ws, terminal, monkeypatch) -> None:
    code, out, _ = run_cli(capsys, "round", "list", "--workspace", str(history_ws))
    lines = assert_fits(out)
    assert code == 0
    row = line_with(
        lines, "2026-11-29_v2_smallb_splitv", "v2_smallb_splitv", "triton", "promoted", "PROMOTE"
    )
    assert row.split()[0] == "2026-11-29_v2_smallb_splitv"
    assert "(columns hidden at 80 columns: runs, summary; --wide shows them)" in lines
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "round", "list", "--workspace", str(history_ws))
    line_with(
        lines_of(out),
        "2026-11-29_v2_smallb_splitv",
        "PROMOTE",
        "optimize_ops/docs/round_2026-11-29_v2_smallb_splitv.md",
    )


def test_recon_note_wraps_text_not_paths(capsys, demo_ws, terminal, monkeypatch) -> None:
    path = "python/flashinfer/gdn/kernels/decode_persistent_smallbatch_split_v.py"
    piece = "the split of the V dimension across two CTAs for batch sizes up to sixteen, with a reduction"
    code, _, err = run_cli(
        capsys,
        "recon",
        "note",
        "--add",
        "flashinfer",
        path,
        "--relevance",
        "direct",
        "--piece",
        piece,
        "--next",
        "port the split to the Triton kernel and time it on the representatives",
        "--workspace",
        str(demo_ws),
    )
    assert code == 0, err
    code, out, _ = run_cli(capsys, "recon", "note", "--workspace", str(demo_ws))
    lines = assert_fits(out)
    line_with(lines, "flashinfer", path)  # the path whole, on the repo's line
    words = " ".join(" ".join(lines).split())
    assert piece in words  # wrapped at spaces only
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "recon", "note", "--workspace", str(demo_ws))
    line_with(lines_of(out), "flashinfer", path, "direct", piece, "port the split")


def test_parity_table_keeps_whole_uuids(capsys, history_ws, terminal, monkeypatch) -> None:
    traces = next((history_ws / "optimize_ops" / "parity").glob("*/traces.jsonl"))
    uuids = [
        json.loads(line)["workload"]["uuid"]
        for line in traces.read_text().splitlines()
        if line.strip()
    ]
    code, out, err = run_cli(
        capsys, "parity", "--import", str(traces), "--workspace", str(history_ws)
    )
    lines = assert_fits(out)
    assert code in (0, 1), err
    for uuid in uuids:
        line_with(lines, uuid, "PASSED")
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(
        capsys, "parity", "--import", str(traces), "--workspace", str(history_ws)
    )
    lines = lines_of(out)
    assert "hidden" not in out
    for uuid in uuids:
        line_with(lines, uuid, "batch_size=", "PASSED", "x")


def test_pack_at_80_columns_and_piped(capsys, demo_ws, terminal, monkeypatch) -> None:
    monkeypatch.chdir(demo_ws)
    code, out, err = run_cli(capsys, "pack", "-o", "solution.json")
    lines = assert_fits(out)
    assert code == 0, err
    words = " ".join(lines).split()  # wrapped at spaces only: each name is one whole word
    assert "demo_gdn_decode_triton_v1" in words and "demo_gdn_decode_qk4_v8_d128_k_last" in words
    assert "solution.json" in words and "kernel.py::gdn_decode," in words
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")
    code, out, _ = run_cli(capsys, "pack", "-o", "solution.json")
    line_with(
        lines_of(out),
        "packed demo_gdn_decode_triton_v1 for demo_gdn_decode_qk4_v8_d128_k_last -> solution.json",
    )
    line_with(lines_of(out), "entry point kernel.py::gdn_decode", "destination passing style")


def test_demo_lines_are_not_wrapped_when_piped(capsys, tmp_path, piped) -> None:
    code, out, _ = run_cli(capsys, "demo", str(tmp_path / "ws"), "--no-tui")
    assert code == 0
    line_with(lines_of(out), "config.toml, solution/triton/kernel.py", "candidates/, optimize_ops/")


# --------------------------------------------------------------------------------------------
# fibtui run's summary and progress lines
# --------------------------------------------------------------------------------------------


def _printer_output(record: dict, long_name: str) -> str:
    from fibtui.core.runs import JobResult, RunRecord
    from fibtui.runners.events import JobFinished
    from fibtui.verbs.run import _Printer

    stream = io.StringIO()
    printer = _Printer(stream=stream)
    job = JobResult(
        uuid="a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8",
        axes={"batch_size": 64},
        solution=long_name,
        role="candidate",
        repeat=0,
        status="PASSED",
        latency_ms=0.0168,
        reference_latency_ms=0.5,
    )
    printer(JobFinished(result=job, done=7, total=100, passed=7, failed=0, eta_s=42.0))
    printer.summary(RunRecord.from_json(record))  # the record as run.json holds it
    return stream.getvalue()


def test_run_summary_and_progress_keep_solution_names_whole(demo_ws, terminal, monkeypatch) -> None:
    folder = synthetic_gpu_run(demo_ws)
    record = json.loads((folder / "run.json").read_text())
    long_name = "gdn_decode_triton_persistent_smallbatch_split_v_tiles_v12"
    for info in record["summary"]["per_solution"].values():
        if info["role"] == "candidate":
            info["name"] = long_name
    out = _printer_output(record, long_name)
    lines = assert_fits(out)
    assert sum(long_name in line for line in lines) == 2  # the progress line and the summary, whole
    line_with(lines, "complete: 100/100 PASSED", "20260101-000000_demo_local/run.json")
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL")  # a StringIO is not a terminal: nothing wraps
    lines = lines_of(_printer_output(record, long_name))
    line_with(
        lines, "[  7/100] PASSED", long_name, "batch_size=64", "16.80 us", "7/7 ok", "ETA 0:00:42"
    )
    line_with(lines, "candidate", long_name, "50/50 PASSED", "mean", "p95")


# --------------------------------------------------------------------------------------------
# the helper itself
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [30, 40, 52, 64, 80, 100, 140])
def test_print_table_never_cuts_an_id_at_any_width(width: int, monkeypatch) -> None:
    from rich.table import Table

    from fibtui.verbs._common import console, print_table

    monkeypatch.setenv("FIBTUI_FORCE_TERMINAL", "1")
    monkeypatch.setenv("COLUMNS", str(width))
    ids = ["20261129-103529_demo_local", "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8", "x"]
    t = Table("id", "note", "n", "low", box=None, pad_edge=False)
    for i, run_id in enumerate(ids):
        t.add_row(run_id, "a few words of text that may wrap at spaces", str(i), "unimportant")
    stream = io.StringIO()
    con = console(file=stream)
    assert not con.wide and con.width == width
    hidden = print_table(con, t, ids=["id"], drop=["low"])
    lines = lines_of(stream.getvalue())
    for run_id in ids:
        assert any(run_id in line.split() for line in lines), (run_id, lines)
    longest_id = max(len(i) for i in ids)
    assert all(cell_len(line) <= max(width, longest_id) for line in lines), lines
    # nothing is broken inside a word: every token shown is a whole header, id, word or value
    known = {
        "id",
        "note",
        "n",
        "low",
        "unimportant",
        "0",
        "1",
        "2",
        *ids,
        *"a few words of text that may wrap at spaces".split(),
    }
    note = next(
        (i for i, line in enumerate(lines) if line.startswith("(columns hidden")), len(lines)
    )
    table_lines = lines[:note]
    assert {tok for line in table_lines for tok in line.split()} <= known, table_lines
    assert hidden == (["low"] if any("hidden" in line for line in lines) else [])
    if width >= 140:
        assert hidden == [] and len(lines) == 1 + len(ids)


def test_console_is_wide_when_not_a_terminal_or_with_wide(monkeypatch) -> None:
    from fibtui.verbs import _common

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("FIBTUI_FORCE_TERMINAL", raising=False)
    assert _common.console(file=io.StringIO()).wide
    monkeypatch.setenv("FIBTUI_FORCE_TERMINAL", "1")
    con = _common.console(file=io.StringIO())
    assert not con.wide and con.width == 80
    assert _common.console(file=io.StringIO(), wide=True).wide
    _common.set_wide(True)
    try:
        assert _common.console(file=io.StringIO()).wide
    finally:
        _common.set_wide(False)
    # the control-character safety of SafeConsole is kept on a wide console
    stream = io.StringIO()
    _common.console(file=stream, wide=True).print("evil\x1b[31mred")
    assert "\x1b" not in stream.getvalue() and "evil␛[31mred" in stream.getvalue()
