"""Bad input everywhere: every parser and importer, fuzzed; a committed corpus of malformed files,
each with the exact one-line error the CLI prints for it.

Property tests (hypothesis) start from a small valid document of each format and damage it
(mutated JSON fields, truncated or spliced bytes, random text). For every input the reader either
accepts it or raises :class:`~fibtui.core.errors.InputError` naming the file (and, in line-based
formats, the line); nothing else ever escapes. ``FIBTUI_FUZZ_EXAMPLES`` raises the example count
(the suite default keeps CI fast).

The corpus (``tests/malformed/``, listed in ``tests/malformed/expected.json``) pins the exact error
line of 110+ malformed files across every format, read through the CLI verb a user would run: exit
2, exactly one line on stderr, no traceback. Among them: latencies that are NaN, infinite, past a
float's range (``1e400``, a 400-digit integer), zero, negative or subnormal; axes past int64;
numbers of more than 4300 digits (which Python's json refuses with a ValueError); duplicate results;
and files that start with a UTF-8 byte-order mark (accepted: the error is the next real one, on its
own line). What cannot be committed (FIFOs, sockets, devices) is made at run time below, and every
reader must refuse it at once instead of blocking on it.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fibtui.cli import main as cli_main
from fibtui.core import (
    archive,
    dataset,
    ncu,
    recon,
    regimes,
    results,
    roofline,
    runs,
    stats,
    workspace,
)
from fibtui.core.errors import InputError
from fibtui.services import archive as archive_ops
from tests.runner_helpers import TINY, TINY_DEFINITION, make_tiny_workspace

REPO = Path(__file__).resolve().parent.parent
MALFORMED = Path(__file__).parent / "malformed"
FIXTURES = Path(__file__).parent / "fixtures"

FUZZ = settings(
    max_examples=int(os.environ.get("FIBTUI_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)

# --------------------------------------------------------------------------------------------
# Valid seeds, one per format (small on purpose: the fuzzer damages them)
# --------------------------------------------------------------------------------------------

UUID = "wl-000-n1"
WORKLOAD_LINE = {
    "definition": TINY,
    "solution": None,
    "evaluation": None,
    "workload": {
        "uuid": UUID,
        "axes": {"n": 1},
        "inputs": {"x": {"type": "random"}, "alpha": {"type": "scalar", "value": 1.5}},
    },
}
SOLUTION = {
    "name": "tiny_py",
    "definition": TINY,
    "author": "tests",
    "description": "",
    "spec": {
        "language": "python",
        "target_hardware": ["B200"],
        "entry_point": "kernel.py::scale",
        "dependencies": [],
        "destination_passing_style": True,
    },
    "sources": [
        {"path": "kernel.py", "content": "def scale(x, alpha, y):\n    y.copy_(x * alpha)\n"}
    ],
}
TRACE_LINE = {
    **WORKLOAD_LINE,
    "solution": "tiny_py",
    "evaluation": {
        "status": "PASSED",
        "environment": {"hardware": "NVIDIA H200", "libs": {"torch": "2"}},
        "timestamp": "2026-01-01T00:00:00",
        "log": "",
        "correctness": {"max_relative_error": 1e-6, "max_absolute_error": 1e-7},
        "performance": {"latency_ms": 0.01, "reference_latency_ms": 0.1, "speedup_factor": 10.0},
    },
}
RETAINED_RUN = {
    "generated_at_utc": "2026-01-01T00:00:00Z",
    "definition": TINY,
    "results": {
        TINY: {
            UUID: {
                "status": "PASSED",
                "latency_ms": 0.01,
                "reference_latency_ms": 0.1,
                "speedup_factor": 10.0,
                "max_abs_error": 0.0,
                "max_rel_error": 0.0,
            },
            "wl-001-n2": {"status": "RUNTIME_ERROR", "error": "boom"},
        }
    },
    "summary": {TINY: {"total_workloads": 2, "passed_workloads": 1, "avg_latency_ms": 0.01}},
    "meta": {"completed": 2, "total": 2},
}
SINGLE_CONTAINER = {
    "generated_at_utc": "2026-01-01T00:00:00Z",
    "solution": {"name": "tiny_py", "definition": TINY, "author": "tests"},
    "summary": {"total": 1},
    "results": {
        TINY: {UUID: {"status": "PASSED", "solution": "tiny_py", "latency_ms": 0.02, "log": ""}}
    },
}
HAND_SUMMARY = {
    "candidate": "v2_x",
    "definition": TINY,
    "runs": [{"run": 1, "mean_ms": 0.01}],
    "mean_across_repeats": {"mean_ms": 0.01},
}
DIRECT_TIMING = {"1": [{"kernel_ms": 0.01, "graph_ms": 0.012}], "8": [{"kernel_ms": 0.02}]}
FIBTUI_RECORD = {
    "format": "fibtui-run",
    "version": 1,
    "run_id": "r1",
    "definition": TINY,
    "backend": "interpreter",
    "timing_kind": "cpu-interpreter",
    "jobs": [
        {
            "uuid": UUID,
            "axes": {"n": 1},
            "solution": "tiny_py",
            "role": "candidate",
            "repeat": 0,
            "status": "PASSED",
            "latency_ms": 0.5,
            "reference_latency_ms": 1.0,
        }
    ],
}
RETAINED_LOG = (
    "DEFINITION: tiny_scale\n  Name: tiny_py\n"
    "#  UUID  n  Status  Latency  Ref  Speedup  abs_err  rel_err\n"
    "------------------------------------------------------------\n"
    "0  wl-000-n1  1  PASSED  0.010  0.100  10.00x  0.0  0.0\n"
    "1  wl-001-n2  2  RUNTIME_ERROR  boom\n"
    "Avg latency: 0.010 ms\nRESULT: 1/2 PASSED\n"
    "=== Retry started at 2026-01-01 ===\n"
    "1  wl-001-n2  2  PASSED  0.020  0.100  5.00x  0.0  0.0\n"
)
FIB_CONSOLE = (
    "Processing definition: tiny_scale\n"
    "Solution 'tiny_py' for workload wl-000-n1: PASSED with 10.0x speedup\n"
    "Solution 'tiny_py' for workload wl-001-n2: RUNTIME_ERROR\n"
)
CONFIG_TOML = (
    '[solution]\nname = "tiny_v1"\ndefinition = "tiny_scale"\nauthor = "tests"\n\n'
    '[build]\nlanguage = "triton"\nentry_point = "kernel.py::scale"\ndestination_passing_style = true\n'
)
FIBTUI_TOML = (
    '# settings\n[devices.H200]\nbandwidth_tbs = 4.3\n\n[regimes]\npinned = ["wl-000-n1"]\nunpinned = []\n\n'
    '[stats]\nmin_gain = 0.01\n\n[modal]\ngpu = "B200"\nworkers = 2\npip = ["numpy"]\n\n'
    '[recon.keywords]\nelementwise = ["scale"]\n\n[submission]\ntarget_hardware = ["B200"]\ntag_scheme = "plain"\n\n'
    '[archive]\noperator = "tiny"\nmodel = "demo"\n'
)
ROUND_LINE = {
    "kind": "round",
    "round": "round_2026-01-01_x",
    "date": "2026-01-01",
    "topic": "x",
    "definition": TINY,
    "baseline": {"name": "b"},
    "candidate": {"name": "c"},
    "runs": [{"run_id": "r1", "kind": "gate"}],
    "decision": "archived",
    "reason": "",
    "summary": "",
    "artifacts": [],
    "notes": [],
    "warnings": [],
    "noise_floor": {},
    "settings": {},
    "verdict": "INCONCLUSIVE",
}
AA_LINE = {
    "source": "r1",
    "kind": "paired-run",
    "log_g": 0.001,
    "sigma": 0.01,
    "workloads": 3,
    "repeats": 1,
    "definition": TINY,
    "gpu": "NVIDIA H200",
    "verdict": "INCONCLUSIVE",
}


def recon_note_text() -> str:
    note = recon.new_note(TINY, "2026-01-01")
    note.rows.append(
        recon.NoteRow(
            "flashinfer", "abc1234", "csrc/scale.cu:12", "direct", "the kernel", "port it"
        )
    )
    return recon.render_note(note)


def journal_text() -> str:
    """A real journal (header, two results, end) written through the run API."""
    header = runs.RunHeader(
        run_id="20260101-000000_tiny_interpreter",
        definition=TINY,
        backend="interpreter",
        timing_kind="cpu-interpreter",
        l2_policy="n/a",
        solutions=[runs.SolutionRef("tiny_py", "candidate", "snapshots/candidate-tiny_py")],
        jobs=[
            runs.JobSpec(UUID, {"n": 1}, "tiny_py", "candidate", 0),
            runs.JobSpec("wl-001-n2", {"n": 2}, "tiny_py", "candidate", 0),
        ],
        repeats=1,
        workload_selection="all",
        started="2026-01-01T00:00:00+00:00",
    )
    lines = [json.dumps(header.to_json(), separators=(",", ":"))]
    for job, lat in zip(header.jobs, (0.5, 0.7), strict=True):
        r = runs.JobResult(
            job.uuid, job.axes, job.solution, job.role, job.repeat, "PASSED", latency_ms=lat
        )
        lines.append(json.dumps({"kind": "result", **r.to_json()}, separators=(",", ":")))
    lines.append(
        json.dumps(
            {"kind": "end", "state": "finished", "reason": "", "at": "2026-01-01T00:00:01+00:00"}
        )
    )
    return "\n".join(lines) + "\n"


def ncu_seed(name: str, max_lines: int = 60) -> str:
    text = (FIXTURES / "ncu" / name).read_text(encoding="utf-8")
    return "".join(text.splitlines(keepends=True)[:max_lines])


# --------------------------------------------------------------------------------------------
# Damage
# --------------------------------------------------------------------------------------------

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "PASSED",
            "TIMEOUT",
            "../x",
            "/abs",
            "",
            ".",
            "a/./",
            "k\x00.py",
            "kernel.py::scale",
            "n",
            "x",
        ]
    )
)
json_any = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6,
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


def _set(obj: Any, path: tuple, value: Any, delete: bool = False) -> Any:
    if not path:
        return value
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


@st.composite
def mutated(draw, seed: Any) -> Any:
    """The seed with 1-3 fields replaced by random JSON, deleted, or wrapped in a list."""
    obj = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(obj)))
        op = draw(st.sampled_from(("replace", "replace", "delete", "wrap")))
        if op == "delete" and path:
            obj = _set(obj, path, None, delete=True)
        elif op == "wrap":
            target = obj
            for key in path:
                target = target[key]
            obj = _set(obj, path, [target])
        else:
            obj = _set(obj, path, draw(json_any))
    return obj


@st.composite
def damaged_bytes(draw, seed: bytes) -> bytes:
    """The seed truncated, spliced with random bytes, or with a line dropped or doubled."""
    data = seed
    op = draw(st.sampled_from(("truncate", "splice", "lines", "binary", "deep")))
    if op == "deep":  # a nesting bomb spliced in (json's C parser recurses)
        at = draw(st.integers(0, len(data)))
        return (
            data[:at]
            + draw(
                st.sampled_from(
                    [b"[" * 100_000, b'{"a":' * 60_000, b"[" * 100_000 + b"]" * 100_000]
                )
            )
            + data[at:]
        )
    if op == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if op == "splice":
        at = draw(st.integers(0, len(data)))
        junk = draw(
            st.binary(max_size=12)
            | st.sampled_from([b"\n", b"\x00", b'"', b",", b"}", b"|", b"\xff", b"\r\n"])
        )
        cut = draw(st.integers(0, 6))
        return data[:at] + junk + data[at + cut :]
    if op == "lines":
        lines = data.split(b"\n")
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if draw(st.booleans()):
            del lines[i]
        else:
            lines.insert(i, lines[i] if lines else b"")
        return b"\n".join(lines)
    return draw(st.binary(max_size=200))


def json_file_inputs(seed: Any) -> st.SearchStrategy[bytes]:
    text = json.dumps(seed, indent=1).encode()
    return st.one_of(
        mutated(seed).map(lambda o: json.dumps(o, indent=1).encode()),
        damaged_bytes(text),
        json_any.map(lambda o: json.dumps(o).encode()),
    )


def jsonl_inputs(seed_lines: list[Any]) -> st.SearchStrategy[bytes]:
    text = ("\n".join(json.dumps(o) for o in seed_lines) + "\n").encode()

    @st.composite
    def one_line_mutated(draw):
        i = draw(st.integers(0, len(seed_lines) - 1))
        lines = [json.dumps(o) for o in seed_lines]
        lines[i] = json.dumps(draw(mutated(seed_lines[i])))
        return ("\n".join(lines) + "\n").encode()

    return st.one_of(one_line_mutated(), damaged_bytes(text))


def text_inputs(seed: str) -> st.SearchStrategy[bytes]:
    return st.one_of(damaged_bytes(seed.encode()), st.text(max_size=300).map(str.encode))


# --------------------------------------------------------------------------------------------
# The property: accepted, or one InputError naming the file (and the line in line formats)
# --------------------------------------------------------------------------------------------


def rejected_cleanly(exc: BaseException, path: Path, *, line_based: bool = False) -> InputError:
    assert isinstance(exc, InputError), f"{type(exc).__name__}: {exc}"
    assert exc.path is not None and Path(exc.path) == path, f"error names {exc.path!r}, not {path}"
    text = exc.one_line()
    assert "\n" not in text and text.startswith(str(path))
    if line_based and exc.line is None:
        # whole-file problems have no line; everything about a line names it
        assert any(
            w in exc.message
            for w in (
                "empty",
                "no workloads",
                "no header",
                "no traces",
                "not found",
                "no result rows",
                "not UTF-8",
            )
        ), exc.message
    return exc


def read_with(reader, path: Path, data: bytes, *, line_based: bool = False) -> Any:
    path.write_bytes(data)
    try:
        return reader(path)
    except Exception as exc:  # noqa: BLE001 - the property under test
        rejected_cleanly(exc, path, line_based=line_based)
        return None


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def tiny_definition() -> dataset.Definition:
    return dataset.parse_definition(TINY_DEFINITION, "tiny_scale.json")


# -- dataset files --------------------------------------------------------------------------


@FUZZ
@given(data=json_file_inputs(TINY_DEFINITION))
def test_definitions_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(dataset.load_definition, fuzz_dir / "tiny_scale.json", data)


@FUZZ
@given(
    data=jsonl_inputs(
        [
            WORKLOAD_LINE,
            {
                **WORKLOAD_LINE,
                "workload": {**WORKLOAD_LINE["workload"], "uuid": "wl-001-n2", "axes": {"n": 2}},
            },
        ]
    ),
    with_definition=st.booleans(),
)
def test_workloads_fuzz(
    fuzz_dir: Path, tiny_definition, data: bytes, with_definition: bool
) -> None:
    path = fuzz_dir / "tiny_scale.jsonl"

    def read(p: Path):
        ws = dataset.load_workloads(p, tiny_definition if with_definition else None)
        ws.validate_all()  # every line strictly (inputs included), as `fibtui check --deep`
        for u in ws.uuids:
            ws.axes_of(u)
            ws.get(u).to_json()
        return ws

    read_with(read, path, data, line_based=True)


def _solution_with_source(path: str) -> bytes:
    sol = copy.deepcopy(SOLUTION)
    sol["sources"].append({"path": path, "content": "x = 1\n"})
    return json.dumps(sol).encode()


@FUZZ
@given(data=json_file_inputs(SOLUTION))
@example(data=_solution_with_source("."))
@example(data=_solution_with_source("sub/."))
@example(data=_solution_with_source("a\x00b.py"))
@example(data=_solution_with_source("../../evil.py"))
@example(data=_solution_with_source("/tmp/evil.py"))
@example(data=_solution_with_source("C:/evil.py"))
@example(data=_solution_with_source("kernel.py"))  # a duplicate path
@example(data=_solution_with_source("kernel.py/x.py"))  # a file that is also a folder
@example(data=_solution_with_source("./kernel.py"))
def test_solutions_fuzz(fuzz_dir: Path, data: bytes) -> None:
    """A solution file is accepted only if its sources can be written inside a snapshot folder."""
    from fibtui.core.plan import snapshot, solution_from_path

    path = fuzz_dir / "solution.json"
    sol = read_with(lambda p: solution_from_path(p, None), path, data)
    if sol is not None:
        run_folder = fuzz_dir / "run"
        shutil.rmtree(run_folder, ignore_errors=True)
        ref = snapshot(sol, "candidate", run_folder)
        root = (run_folder / ref.snapshot / "sources").resolve()
        for s in sol.sources:
            target = (root / s["path"]).resolve()
            assert root in target.parents and target.is_file()


@FUZZ
@given(
    data=jsonl_inputs(
        [TRACE_LINE, {**TRACE_LINE, "evaluation": {"status": "RUNTIME_ERROR", "log": "x\nboom"}}]
    )
)
def test_traces_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(dataset.load_traces, fuzz_dir / "traces.jsonl", data, line_based=True)


# -- result formats (through the importer and what `fibtui results show --json` prints) ------


def _load_and_render(path: Path):
    from fibtui.verbs._common import strict_json

    table = results.load_results(path)
    json.dumps(results.table_to_json(table), default=str)
    # what `--json` prints is strict JSON (no bare NaN or Infinity) for anything a reader accepts
    json.dumps(strict_json(results.table_to_json(table)), allow_nan=False)
    for row in table.rows:  # an accepted latency is a finite, positive, normal number
        for value in (row.latency_ms, row.reference_latency_ms, row.speedup):
            assert value is None or (math.isfinite(value) and value >= sys.float_info.min), (
                row,
                value,
            )
    return table


RESULT_SEEDS = {
    "retained_run.json": RETAINED_RUN,
    "benchmark_detailed_results.json": SINGLE_CONTAINER,
    "benchmark_detailed_result_single.json": {
        k: v for k, v in SINGLE_CONTAINER.items() if k != "summary"
    },
    "summary.json": HAND_SUMMARY,
    "direct_timing.json": DIRECT_TIMING,
    "run.json": FIBTUI_RECORD,
}


@pytest.mark.parametrize("name", sorted(RESULT_SEEDS))
@FUZZ
@given(data=st.data())
def test_result_json_formats_fuzz(fuzz_dir: Path, name: str, data) -> None:
    raw = data.draw(json_file_inputs(RESULT_SEEDS[name]))
    read_with(_load_and_render, fuzz_dir / name, raw)


@FUZZ
@given(data=jsonl_inputs([TRACE_LINE]))
def test_result_traces_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(_load_and_render, fuzz_dir / "traces_r.jsonl", data, line_based=False)


@pytest.mark.parametrize(
    ("name", "seed"),
    [
        ("retained_run.log", RETAINED_LOG),
        ("fib_console.log", FIB_CONSOLE),
        ("summary.md", "# Round\n\n| band | ms |\n|---|---|\n| 1 | 0.1 |\n"),
    ],
)
@FUZZ
@given(data=st.data())
def test_result_text_formats_fuzz(fuzz_dir: Path, name: str, seed: str, data) -> None:
    read_with(_load_and_render, fuzz_dir / name, data.draw(text_inputs(seed)))


# -- NCU pages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "seed"),
    [
        ("details.csv", "h200_demo/demo_v1_b1_b64_details.csv"),
        ("raw.csv", "h200_demo/demo_v1_b1_b64_raw.csv"),
        ("details.txt", "gdn_b64_details.txt"),
    ],
)
@FUZZ
@given(data=st.data())
def test_ncu_pages_fuzz(fuzz_dir: Path, name: str, seed: str, data) -> None:
    def read(p: Path):
        report = ncu.load_report(p)
        summaries = ncu.summarize(report)
        json.dumps(ncu.report_to_json(report, summaries), default=str)
        return report

    read_with(read, fuzz_dir / name, data.draw(text_inputs(ncu_seed(seed, 40))), line_based=False)


@FUZZ
@given(data=json_file_inputs(json.loads((FIXTURES / "ncu" / "gdn_b64_hand.json").read_text())))
def test_ncu_hand_json_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(lambda p: ncu.summarize(ncu.load_report(p)), fuzz_dir / "hand.json", data)


# -- TOML: config.toml and fibtui.toml (and every reader of its tables) ----------------------


@FUZZ
@given(data=text_inputs(CONFIG_TOML))
def test_config_toml_fuzz(fuzz_dir: Path, data: bytes) -> None:
    folder = fuzz_dir / "cfg"
    (folder / "solution" / "triton").mkdir(parents=True, exist_ok=True)
    (folder / "solution" / "triton" / "kernel.py").write_text("def scale(x, alpha, y):\n    pass\n")
    path = folder / "config.toml"
    cfg = read_with(workspace.load_config, path, data)
    if cfg is not None:
        workspace.check_topology(folder)  # problems are listed, never raised


def _read_every_setting(root: Path) -> None:
    """Every reader of fibtui.toml's tables, as the verbs call them."""
    from fibtui.core import settings as settings_mod
    from fibtui.core import submission
    from fibtui.runners.modal_runner import modal_settings

    settings_mod.load_settings(root)
    regimes.load_pins(root)
    roofline.device_names(root)
    roofline.get_device("H200", root)
    stats.StatsSettings.from_workspace(root)
    recon.keyword_table(root)
    modal_settings(root)
    submission._scheme(root, None)


@FUZZ
@given(data=text_inputs(FIBTUI_TOML))
def test_fibtui_toml_fuzz(fuzz_dir: Path, data: bytes) -> None:
    root = fuzz_dir / "settings_ws"
    root.mkdir(exist_ok=True)
    read_with(lambda p: _read_every_setting(p.parent), root / "fibtui.toml", data)


# -- recon notes, journals, the archive's own line files -------------------------------------


@FUZZ
@given(data=text_inputs(recon_note_text()))
def test_recon_notes_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(recon.load_note, fuzz_dir / f"recon_2026-01-01_{TINY}.md", data, line_based=False)


@FUZZ
@given(data=jsonl_inputs([json.loads(line) for line in journal_text().splitlines()]))
def test_journals_fuzz(fuzz_dir: Path, data: bytes) -> None:
    folder = fuzz_dir / "runs" / "r1"
    folder.mkdir(parents=True, exist_ok=True)
    contents = read_with(runs.read_journal, folder / "journal.jsonl", data, line_based=True)
    if contents is not None:
        record = runs.build_record(folder, contents)
        json.dumps(record.to_json(), default=str)
        planned = {j.key for j in contents.header.jobs}
        assert set(contents.results) <= planned
        runs.list_runs(fuzz_dir)


@FUZZ
@given(data=jsonl_inputs([ROUND_LINE]))
def test_rounds_file_fuzz(fuzz_dir: Path, data: bytes) -> None:
    root = fuzz_dir / "archive_r"
    (root / "docs").mkdir(parents=True, exist_ok=True)
    read_with(
        lambda p: archive.load_rounds(root), root / archive.ROUNDS_FILE, data, line_based=True
    )


@FUZZ
@given(data=jsonl_inputs([AA_LINE]))
def test_aa_file_fuzz(fuzz_dir: Path, data: bytes) -> None:
    read_with(stats.load_aa_file, fuzz_dir / "aa.jsonl", data, line_based=True)


@FUZZ
@given(
    data=json_file_inputs(
        {"current": "k.kernel.py", "snapshot": "k", "latency_us": 1.0, "history": []}
    )
)
def test_best_pointer_fuzz(fuzz_dir: Path, data: bytes) -> None:
    root = fuzz_dir / "archive_b"
    (root / "best_solution_triton").mkdir(parents=True, exist_ok=True)
    read_with(
        lambda p: (
            archive_ops.read_best(root, "triton"),
            archive_ops.best_solution_path(root, "triton"),
        ),
        root / "best_solution_triton" / "best.json",
        data,
    )


# --------------------------------------------------------------------------------------------
# The committed corpus: exact one-line errors through the CLI
# --------------------------------------------------------------------------------------------

CORPUS = json.loads((MALFORMED / "expected.json").read_text(encoding="utf-8"))["entries"]


def install_entry(entry: dict[str, Any], tmp: Path) -> dict[str, str]:
    """A fresh tiny workspace at ``tmp/ws`` with the malformed file installed where the verb reads
    it; returns the placeholders of the entry's argv and error."""
    make_tiny_workspace(tmp / "ws")
    for dest, src in (entry.get("support") or {}).items():
        (tmp / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MALFORMED / src, tmp / dest)
    target = tmp / entry["install"]
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MALFORMED / entry["file"], target)
    return {"file": str(target), "tmp": str(tmp), "ws": str(tmp / "ws")}


def fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def run_cli_in_process(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, cwd: Path
) -> tuple[int, str, str]:
    """``fibtui ARGV`` in this process: exit code, stdout, stderr (an escaping exception fails the test
    exactly as a traceback would)."""
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("FIBTUI_CACHE_DIR", str(cwd / "cache"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def test_the_corpus_is_big_and_covers_every_format() -> None:
    files = {
        p.relative_to(MALFORMED).as_posix()
        for p in MALFORMED.rglob("*")
        if p.is_file() and p.parts[len(MALFORMED.parts)] != "_support" and p.name != "expected.json"
    }
    listed = [e["file"] for e in CORPUS]
    assert sorted(listed) == sorted(files), "every corpus file is listed once in expected.json"
    assert len(files) >= 110
    verbs = {e["argv"][0] for e in CORPUS}
    assert {"regimes", "run", "results", "ncu", "recon", "round", "compare", "pack"} <= verbs
    kinds = {e["file"].split("/")[0] + "/" + e["file"].split("/")[1].split("_")[0] for e in CORPUS}
    for kind in (
        "dataset/definition",
        "dataset/workloads",
        "dataset/solution",
        "dataset/traces",
        "ncu/details",
        "ncu/raw",
        "ncu/hand",
        "config/config",
        "config/fibtui",
        "recon/recon",
        "journals/journal",
        "archive/rounds",
        "archive/aa",
        "archive/best",
    ):
        assert kind in kinds, kind
    assert all(e["error"].startswith("fibtui: error: ") and "\n" not in e["error"] for e in CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=[e["file"] for e in CORPUS])
def test_corpus_file_gives_its_exact_error(
    entry: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = install_entry(entry, tmp_path)
    argv = [fill(a, values) for a in entry["argv"]] + (
        ["--workspace", values["ws"]] if entry.get("workspace", True) else []
    )
    code, _, err = run_cli_in_process(argv, monkeypatch, tmp_path)
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.endswith("\n"), (
        f"expected exactly one line on stderr, got {err!r}"
    )
    assert err.rstrip("\n") == fill(entry["error"], values)
    assert "Traceback" not in err
    if "ws/optimize_ops/runs" not in entry["install"]:
        assert not (tmp_path / "ws" / "optimize_ops" / "runs").exists(), (
            "a refused run must not leave a run folder"
        )


SUBPROCESS_SAMPLE = [
    "dataset/workloads_safetensors_leaves_root.jsonl",
    "dataset/solution_path_traversal.json",
    "ncu/binary_export.txt",
    "journals/journal_torn_header.jsonl",
    "config/fibtui_toml_not_toml.toml",
]


@pytest.mark.slow
def test_corpus_through_real_processes(tmp_path: Path) -> None:
    """A sample in a real `python -m fibtui` process: exit 2, one stderr line, no traceback."""
    by_file = {e["file"]: e for e in CORPUS}
    env = dict(os.environ, PYTHONPATH=str(REPO), FIBTUI_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("FIB_DATASET_PATH", None)
    for i, name in enumerate(SUBPROCESS_SAMPLE):
        entry = by_file[name]
        tmp = tmp_path / f"e{i}"
        values = install_entry(entry, tmp)
        argv = [fill(a, values) for a in entry["argv"]] + (
            ["--workspace", values["ws"]] if entry.get("workspace", True) else []
        )
        proc = subprocess.run(
            [sys.executable, "-m", "fibtui", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=120,
        )
        assert proc.returncode == 2, (name, proc.stderr)
        assert proc.stderr.splitlines() == [fill(entry["error"], values)], name


# --------------------------------------------------------------------------------------------
# Paths that are not regular files (made here: a FIFO cannot be committed). Opening a FIFO for
# reading waits for a writer, forever: every reader must refuse one (and a socket, a device)
# before it opens it.
# --------------------------------------------------------------------------------------------

#: how long a refusal may take; a reader that opened the FIFO would wait forever
FIFO_LIMIT_S = 2.0


@contextlib.contextmanager
def never_blocks_on(*fifos: Path, seconds: float = FIFO_LIMIT_S):
    """Fail when the block takes ``seconds`` or more. A watchdog then opens each FIFO for writing,
    which releases a reader blocked on it, so a regression fails here instead of hanging CI."""
    done = threading.Event()
    fired: list[bool] = []

    def watchdog() -> None:
        if done.wait(seconds):
            return
        fired.append(True)
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    guard = threading.Thread(target=watchdog, daemon=True)
    start = time.monotonic()
    guard.start()
    try:
        yield
    finally:
        done.set()
        guard.join()
    assert not fired, f"a reader blocked on a FIFO for {seconds} s"
    assert time.monotonic() - start < seconds


def fifo_at(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


FIFO_LINE = "fibtui: error: {fifo}: is a named pipe (FIFO), not a regular file; give a file"

#: (id, where the FIFO goes relative to the temp folder, argv, does it read the workspace)
FIFO_CASES = [
    ("results-show", "results.jsonl", ["results", "show", "{fifo}"], True),
    ("results-show-json", "retained_run.json", ["results", "show", "{fifo}", "--json"], True),
    (
        "results-show-journal",
        "ws/optimize_ops/runs/r1/journal.jsonl",
        ["results", "show", "{fifo}"],
        True,
    ),
    ("ncu-import", "details.csv", ["ncu", "import", "{fifo}"], False),
    ("ncu-import-ncu-rep", "report.ncu-rep", ["ncu", "import", "{fifo}"], False),
    ("ncu-diff", "b.csv", ["ncu", "diff", "{fifo}", "{fifo}"], False),
    ("regimes-results", "results.jsonl", ["regimes", "--results", "{fifo}"], True),
    ("regimes-workloads", "ws/dataset/workloads/tiny_scale.jsonl", ["regimes"], True),
    ("regimes-definition", "ws/dataset/definitions/tiny_scale.json", ["regimes", "--json"], True),
    ("archive-file", "result.json", ["archive", "--file", "{fifo}"], True),
]


@pytest.mark.parametrize(
    ("where", "argv", "workspace"), [c[1:] for c in FIFO_CASES], ids=[c[0] for c in FIFO_CASES]
)
def test_a_fifo_is_refused_at_once_with_one_line(
    where: str, argv: list[str], workspace: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tiny_workspace(tmp_path / "ws")
    fifo = fifo_at(tmp_path / where)
    argv = [a.replace("{fifo}", str(fifo)) for a in argv] + (
        ["--workspace", str(tmp_path / "ws")] if workspace else []
    )
    with never_blocks_on(fifo):
        code, _, err = run_cli_in_process(argv, monkeypatch, tmp_path)
    assert code == 2, (code, err)
    assert err.splitlines() == [FIFO_LINE.format(fifo=fifo)]
    assert not (tmp_path / "ws" / "optimize_ops" / "benchmarks").exists(), (
        "nothing archived from a FIFO"
    )


def test_status_and_check_deep_report_a_fifo_workloads_file_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fibtui status` lists the problem beside the definition; `check --deep` counts it as a
    problem (exit 1). Neither waits for a writer."""
    import fibtui.verbs.info as info

    ws = make_tiny_workspace(tmp_path / "ws")
    fifo = fifo_at(ws / "dataset" / "workloads" / "tiny_scale.jsonl")
    monkeypatch.setattr(
        info, "deep_builds", lambda topo: []
    )  # the builds are not what is timed here
    expected = f"{fifo}: is a named pipe (FIFO), not a regular file; give a file"
    with never_blocks_on(fifo):
        code, out, err = run_cli_in_process(
            ["status", "--json", "--workspace", str(ws)], monkeypatch, tmp_path
        )
    assert code == 0 and not err
    (entry,) = json.loads(out)["definitions"]
    assert entry["name"] == TINY and entry["workloads"] is None and entry["error"] == expected
    with never_blocks_on(fifo):
        code, out, err = run_cli_in_process(
            ["check", "--deep", "--json", "--workspace", str(ws)], monkeypatch, tmp_path
        )
    assert code == 1, (code, err)
    report = json.loads(out)
    assert report["valid"] is False and expected in report["problems"]


def test_sockets_and_devices_are_refused_before_any_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fibtui.core import fsio

    make_tiny_workspace(tmp_path / "ws")
    sock_path = tmp_path / "s.jsonl"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(sock_path))
        code, _, err = run_cli_in_process(
            ["results", "show", str(sock_path)], monkeypatch, tmp_path
        )
        assert code == 2 and err.splitlines() == [
            f"fibtui: error: {sock_path}: is a socket, not a regular file; give a file"
        ]
    finally:
        server.close()
    if Path("/dev/null").exists():
        for reader in (
            fsio.read_input,
            fsio.read_input_text,
            dataset.load_workloads,
            ncu.load_report,
            results.load_results,
        ):
            with pytest.raises(InputError) as exc:
                reader(Path("/dev/null"))
            assert (
                exc.value.one_line()
                == "/dev/null: is a character device, not a regular file; give a file"
            )
    folder = tmp_path / "ws" / "dataset"
    with pytest.raises(InputError) as exc:
        fsio.read_input(folder)
    assert exc.value.one_line() == f"{folder}: is a folder, not a file"


def test_every_user_file_reader_refuses_a_fifo(tmp_path: Path) -> None:
    """The readers themselves (what the TUI calls too), each on a FIFO of its own."""
    from fibtui.core import fsio

    readers = {
        "read_input": fsio.read_input,
        "read_input_text": fsio.read_input_text,
        "definition": dataset.load_definition,
        "workloads": dataset.load_workloads,
        "traces": dataset.load_traces,
        "solution": dataset.load_solution,
        "results": results.load_results,
        "ncu": ncu.load_report,
        "journal": runs.read_journal,
        "toml": workspace.read_toml,
        "recon": recon.load_note,
    }
    for name, reader in readers.items():
        fifo = fifo_at(tmp_path / f"{name}.fifo")
        with never_blocks_on(fifo), pytest.raises(InputError) as exc:
            reader(fifo)
        assert (
            exc.value.one_line()
            == f"{fifo}: is a named pipe (FIFO), not a regular file; give a file"
        ), name
    fifo = fifo_at(
        tmp_path / "aa.jsonl"
    )  # optional history files: a FIFO is no history, never a wait
    with never_blocks_on(fifo):
        assert stats.load_aa_file(fifo) == []
        assert runs.list_runs(tmp_path) == []
