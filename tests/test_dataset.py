from __future__ import annotations

import json
from pathlib import Path

import pytest

from fibtui.core.dataset import (
    Dataset,
    load_definition,
    load_solution,
    load_traces,
    load_workloads,
)
from fibtui.core.errors import InputError
from tests.conftest import DEMO, DEMO_DEFINITION

DEMO_DS = DEMO / "dataset"


def demo_definition():
    return Dataset(DEMO_DS).definition(DEMO_DEFINITION)


def workload_line(uuid: str = "u1", batch: int = 1, **over) -> str:
    obj = {
        "definition": DEMO_DEFINITION,
        "solution": None,
        "workload": {
            "uuid": uuid,
            "axes": {"batch_size": batch},
            "inputs": {"q": {"type": "random"}, "scale": {"type": "scalar", "value": 0.5}},
        },
        "evaluation": None,
    }
    obj.update(over)
    return json.dumps(obj)


# ------------------------------------------------------------------ definitions


def test_demo_definition_reads_axes_and_tensors() -> None:
    d = demo_definition()
    assert d.var_axes == ["batch_size"]
    assert d.const_axes == {
        "seq_len": 1,
        "num_q_heads": 4,
        "num_k_heads": 4,
        "num_v_heads": 8,
        "head_size": 128,
    }
    assert d.inputs["state"].optional is True
    assert d.inputs["scale"].is_scalar
    assert d.shape(d.outputs["new_state"], {"batch_size": 3}) == (3, 8, 128, 128)


def test_shared_definition_reads(shared) -> None:
    ds = Dataset(shared("datasets", "flashinfer-trace"))
    d = ds.definition("gdn_decode_qk4_v8_d128_k_last")
    assert d.op_type == "gdn" and d.var_axes == ["batch_size"]
    assert len(ds.workloads(d.name)) == 54


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda d: d.pop("name"), "name", "required field is missing"),
        (lambda d: d.update(op_type=3), "op_type", "expected a string"),
        (
            lambda d: d["axes"]["seq_len"].update(value=-1),
            "axes.seq_len.value",
            "non-negative integer",
        ),
        (
            lambda d: d["axes"]["seq_len"].update(type="fixed"),
            "axes.seq_len.type",
            "'const' or 'var'",
        ),
        (
            lambda d: d["inputs"]["q"].update(shape=["batch_size", "nope"]),
            "inputs.q.shape",
            "axis 'nope'",
        ),
        (lambda d: d["inputs"]["q"].update(dtype="float7"), "inputs.q.dtype", "unknown dtype"),
        (lambda d: d.update(reference="def nope(:"), "reference", "not valid Python"),
        (lambda d: d.update(reference="x = 1"), "reference", "function 'run'"),
        (
            lambda d: d["outputs"].update(q={"shape": None, "dtype": "float32"}),
            "outputs",
            "also used by inputs",
        ),
    ],
)
def test_bad_definition_names_the_field(tmp_path: Path, mutate, field: str, message: str) -> None:
    d = json.loads((DEMO_DS / "definitions" / "gdn" / f"{DEMO_DEFINITION}.json").read_text())
    mutate(d)
    p = tmp_path / "def.json"
    p.write_text(json.dumps(d))
    with pytest.raises(InputError) as exc:
        load_definition(p)
    assert exc.value.field == field
    assert message in str(exc.value)
    assert str(p) in str(exc.value)


def test_definition_syntax_error_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "def.json"
    p.write_text('{\n  "name": "x",\n  "op_type": \n}\n')
    with pytest.raises(InputError) as exc:
        load_definition(p)
    assert exc.value.line == 4 and "not valid JSON" in str(exc.value)


# ------------------------------------------------------------------ workloads


def test_demo_workloads_fast_path_matches_strict_path(tmp_path: Path) -> None:
    d = demo_definition()
    fast = load_workloads(DEMO_DS / "workloads" / "gdn" / f"{DEMO_DEFINITION}.jsonl", d)
    # A blank line forces the strict line-by-line path: the same table must come out.
    lines = (DEMO_DS / "workloads" / "gdn" / f"{DEMO_DEFINITION}.jsonl").read_text().splitlines()
    p = tmp_path / "w.jsonl"
    p.write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n")
    strict = load_workloads(p, d)
    assert len(fast) == len(strict) == 50
    assert fast.uuids == strict.uuids
    assert (
        fast.frame.get_column("batch_size").to_list()
        == strict.frame.get_column("batch_size").to_list()
    )
    assert sorted(set(fast.frame.get_column("batch_size").to_list())) == [
        1,
        2,
        4,
        8,
        16,
        24,
        32,
        48,
        64,
    ]
    w = fast.get(fast.uuids[0])
    assert w.inputs["scale"].type == "scalar" and w.inputs["scale"].value == pytest.approx(
        0.0883883, rel=1e-5
    )
    assert strict.frame.get_column("line").to_list()[:2] == [1, 3]


def test_workloads_without_definition_guess_axes(tmp_path: Path) -> None:
    p = tmp_path / "w.jsonl"
    p.write_text("\n".join(workload_line(f"u{i}", i + 1) for i in range(5)) + "\n")
    ws = load_workloads(p)
    assert ws.axis_names == ["batch_size"] and len(ws) == 5
    assert ws.axes_of("u3") == {"batch_size": 4}


MALFORMED_WORKLOADS = [
    ("truncated", workload_line("a") + "\n" + workload_line("b")[:40], 2, None, "not valid JSON"),
    ("not an object", workload_line("a") + "\n[1, 2]\n", 2, None, "expected a JSON object"),
    (
        "missing uuid",
        json.dumps(
            {"definition": DEMO_DEFINITION, "workload": {"axes": {"batch_size": 1}, "inputs": {}}}
        ),
        1,
        "workload.uuid",
        "required field is missing",
    ),
    (
        "uuid wrong type",
        json.dumps(
            {
                "definition": DEMO_DEFINITION,
                "workload": {"uuid": 5, "axes": {"batch_size": 1}, "inputs": {}},
            }
        ),
        1,
        "workload.uuid",
        "expected a string",
    ),
    (
        "axis wrong type",
        workload_line("a").replace('"batch_size": 1', '"batch_size": "1"'),
        1,
        "workload.axes.batch_size",
        "expected a non-negative integer",
    ),
    ("negative axis", workload_line("a", -4), 1, "workload.axes.batch_size", "non-negative"),
    (
        "missing var axis",
        workload_line("a").replace('{"batch_size": 1}', "{}"),
        1,
        "workload.axes.batch_size",
        "missing",
    ),
    (
        "unknown input type",
        workload_line("a").replace('"random"', '"zeros"'),
        1,
        "workload.inputs.q.type",
        "expected one of",
    ),
    (
        "scalar without value",
        workload_line("a").replace(', "value": 0.5', ""),
        1,
        "workload.inputs.scale.value",
        "required field",
    ),
    (
        "duplicate uuid",
        workload_line("a") + "\n" + workload_line("a", 2),
        2,
        "workload.uuid",
        "duplicate uuid",
    ),
    (
        "other definition",
        workload_line("a") + "\n" + workload_line("b", definition="other"),
        2,
        "definition",
        "'other'",
    ),
    (
        "missing workload",
        json.dumps({"definition": DEMO_DEFINITION}),
        1,
        "workload",
        "required field is missing",
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "message"),
    MALFORMED_WORKLOADS,
    ids=[m[0] for m in MALFORMED_WORKLOADS],
)
def test_malformed_workloads_name_line_and_field(
    tmp_path: Path, name, text, line, field, message
) -> None:
    p = tmp_path / "w.jsonl"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        ws = load_workloads(p, demo_definition())
        ws.validate_all()
    err = exc.value
    assert err.line == line, str(err)
    assert err.field == field, str(err)
    assert message in str(err)
    assert str(err).startswith(str(p))


def test_unknown_input_is_caught_when_the_workload_is_used(tmp_path: Path) -> None:
    p = tmp_path / "w.jsonl"
    p.write_text(
        workload_line("a").replace('"q": {"type": "random"}', '"zz": {"type": "random"}') + "\n"
    )
    ws = load_workloads(p, demo_definition())  # the fast path reads uuid + axes only
    with pytest.raises(InputError) as exc:
        ws.validate_all()
    assert exc.value.field == "workload.inputs.zz" and exc.value.line == 1


def test_empty_workloads_file(tmp_path: Path) -> None:
    p = tmp_path / "w.jsonl"
    p.write_text("\n\n")
    with pytest.raises(InputError, match="empty"):
        load_workloads(p, demo_definition())


def test_many_workloads_load_through_the_fast_path(tmp_path: Path) -> None:
    lines = [workload_line(f"u{i:05d}", 1 + i % 64) for i in range(5000)]
    p = tmp_path / "w.jsonl"
    p.write_text("\n".join(lines) + "\n")
    ws = load_workloads(p, demo_definition())
    assert len(ws) == 5000 and not ws._parsed  # nothing parsed line by line
    assert ws.get("u04999").axes == {"batch_size": 1 + 4999 % 64}


# ------------------------------------------------------------------ solutions and traces


def solution_obj(**over) -> dict:
    obj = {
        "name": "s",
        "definition": DEMO_DEFINITION,
        "author": "me",
        "spec": {
            "language": "triton",
            "target_hardware": ["B200"],
            "entry_point": "kernel.py::run",
            "destination_passing_style": False,
        },
        "sources": [{"path": "kernel.py", "content": "def run(): pass\n"}],
    }
    obj.update(over)
    return obj


def test_solution_reads_and_defaults(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    obj = solution_obj()
    del obj["spec"]["destination_passing_style"]
    p.write_text(json.dumps(obj))
    s = load_solution(p)
    assert s.spec.destination_passing_style is True  # the format's default
    assert s.spec.entry_file == "kernel.py" and s.spec.entry_function == "run"


@pytest.mark.parametrize(
    ("sources", "field", "message"),
    [
        ([{"path": "../../x.py", "content": "x"}], "sources[0].path", "traversal"),
        ([{"path": "/etc/passwd", "content": "x"}], "sources[0].path", "absolute"),
        ([], "sources", "non-empty"),
        ([{"path": "other.py", "content": "x"}], "spec.entry_point", "not among the sources"),
    ],
)
def test_unsafe_or_inconsistent_sources_are_refused(
    tmp_path: Path, sources, field, message
) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(solution_obj(sources=sources)))
    with pytest.raises(InputError) as exc:
        load_solution(p)
    assert exc.value.field == field and message in str(exc.value)


def test_shared_traces_read(shared) -> None:
    traces = load_traces(
        shared("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl")
    )
    assert len(traces) == 162
    assert {t.solution for t in traces} == {"triton_bv16", "triton_bv32", "triton_bv32_copy"}
    assert all(t.status == "PASSED" and t.latency_ms and t.latency_ms > 0 for t in traces)
    assert traces[0].hardware == "NVIDIA H200"


def test_trace_with_unknown_status(tmp_path: Path) -> None:
    line = json.loads(workload_line("a"))
    line["solution"] = "s"
    line["evaluation"] = {"status": "MAYBE", "environment": {"hardware": "x"}, "timestamp": "t"}
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(line) + "\n")
    with pytest.raises(InputError) as exc:
        load_traces(p)
    assert exc.value.field == "evaluation.status" and "unknown status 'MAYBE'" in str(exc.value)


def test_dataset_index_and_name_mismatch(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    (root / "definitions").mkdir(parents=True)
    d = json.loads((DEMO_DS / "definitions" / "gdn" / f"{DEMO_DEFINITION}.json").read_text())
    (root / "definitions" / "renamed.json").write_text(json.dumps(d))
    ds = Dataset(root)
    assert ds.definition_names == ["renamed"]
    with pytest.raises(InputError, match="declares name"):
        ds.definition("renamed")
    with pytest.raises(InputError, match="no definition named"):
        ds.definition("missing")


# ------------------------------------------------------------------ numbers at the edges, byte-order marks

MAX_AXIS = 2**63 - 1


@pytest.mark.parametrize("with_definition", [True, False], ids=["definition", "guessed-axes"])
def test_axes_fit_in_int64_or_are_refused_on_their_line(
    tmp_path: Path, with_definition: bool
) -> None:
    """A workload axis past int64 used to be a polars ComputeError traceback."""
    definition = demo_definition() if with_definition else None
    p = tmp_path / "w.jsonl"
    p.write_text(workload_line("a", 1) + "\n" + workload_line("b", MAX_AXIS) + "\n")
    ws = load_workloads(p, definition)
    assert ws.axes_of("b") == {"batch_size": MAX_AXIS}
    for value, shown in (
        (MAX_AXIS + 1, str(MAX_AXIS + 1)),
        (10**30, str(10**30)),
        (10**400, "an integer of 401 digits"),
    ):
        p.write_text(workload_line("a", 1) + "\n" + workload_line("b", value) + "\n")
        with pytest.raises(InputError) as exc:
            load_workloads(p, definition).validate_all()
        assert (exc.value.path, exc.value.line, exc.value.field) == (
            p,
            2,
            "workload.axes.batch_size",
        )
        assert exc.value.message == f"{shown} is too large for an axis (at most 2**63 - 1)"


def test_a_number_json_cannot_read_is_one_line(tmp_path: Path) -> None:
    """Python's json refuses integers of more than 4300 digits with a ValueError (not a
    JSONDecodeError); each reader turns it into the file and line."""
    huge = "1" + "0" * 5000
    p = tmp_path / "w.jsonl"
    p.write_text(
        workload_line("a", 1)
        + "\n"
        + workload_line("b", 1).replace('"value": 0.5', f'"value": {huge}')
        + "\n"
    )
    with pytest.raises(InputError) as exc:
        load_workloads(p, demo_definition()).validate_all()
    assert (exc.value.line, exc.value.message) == (
        2,
        "not valid JSON: a number with more than 4300 digits",
    )
    d = tmp_path / "d.json"
    source = next((DEMO_DS / "definitions").rglob(f"{DEMO_DEFINITION}.json"))
    d.write_text(source.read_text().replace("{", '{"big": ' + huge + ", ", 1))
    with pytest.raises(InputError) as exc:
        load_definition(d)
    assert exc.value.one_line() == f"{d}: not valid JSON: a number with more than 4300 digits"


def test_a_const_axis_past_int64_is_refused(tmp_path: Path) -> None:
    from tests.runner_helpers import TINY_DEFINITION

    d = tmp_path / "tiny_scale.json"
    d.write_text(
        json.dumps(
            {
                **TINY_DEFINITION,
                "axes": {"n": {"type": "var"}, "m": {"type": "const", "value": 2**64}},
            }
        )
    )
    with pytest.raises(InputError) as exc:
        load_definition(d)
    assert exc.value.field == "axes.m.value" and "too large for an axis" in exc.value.message


def test_positive_number_rule() -> None:
    from fibtui.core.dataset import positive_number_problem

    for good in (1, 0.5, 1e-300, 2.2250738585072014e-308, 1e308, 10**300):
        assert positive_number_problem(good, "x") is None, good
    for bad, shown in (
        (0, "0"),
        (-0.0, "-0.0"),
        (-1, "-1"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (5e-324, "5e-324 (a subnormal number)"),
        (10**309, "an integer of 310 digits"),
        (True, "a boolean"),
        ("1", "a string"),
        (None, "null"),
    ):
        assert (
            positive_number_problem(bad, "latency_ms")
            == f"latency_ms must be a finite positive number, got {shown}"
        )


def test_traces_refuse_bad_latencies_and_keep_the_newest_of_two_runs(tmp_path: Path) -> None:
    def line(uuid: str, latency, hardware: str = "H200") -> str:
        return json.dumps(
            {
                "definition": "d",
                "solution": "s",
                "workload": {"uuid": uuid, "axes": {}, "inputs": {}},
                "evaluation": {
                    "status": "PASSED",
                    "environment": {"hardware": hardware},
                    "performance": {"latency_ms": latency},
                },
            }
        )

    p = tmp_path / "t.jsonl"
    p.write_text(line("a", 0.5) + "\n" + line("b", float("nan")) + "\n")
    with pytest.raises(InputError) as exc:
        load_traces(p)
    assert (exc.value.line, exc.value.field) == (2, "evaluation.performance.latency_ms")
    # the same solution on the same workload and device twice: two runs flashinfer-bench appended
    # to one file, the newer read (another device is another evaluation)
    p.write_text(line("a", 0.5) + "\n" + line("a", 0.5, "B200") + "\n" + line("a", 0.6) + "\n")
    traces = load_traces(p)
    assert [(t.hardware, t.latency_ms, t.line) for t in traces] == [
        ("B200", 0.5, 2),
        ("H200", 0.6, 3),
    ]


def test_a_byte_order_mark_is_accepted_in_every_dataset_file(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    definition_path = next((DEMO_DS / "definitions").rglob(f"{DEMO_DEFINITION}.json"))
    d = tmp_path / definition_path.name
    d.write_bytes(bom + definition_path.read_bytes())
    assert load_definition(d).name == DEMO_DEFINITION
    w = tmp_path / "w.jsonl"
    w.write_bytes(bom + (workload_line("a", 1) + "\n" + workload_line("b", 2) + "\n").encode())
    ws = load_workloads(w, demo_definition())
    assert ws.uuids == ["a", "b"] and ws.get("a").line == 1
    ws = load_workloads(w)  # the definition guessed from the first line, through the BOM
    assert ws.definition == DEMO_DEFINITION and ws.axes_of("b") == {"batch_size": 2}
    t = tmp_path / "t.jsonl"
    t.write_bytes(bom + workload_line("a", 1).encode() + b"\n")
    assert [tr.workload.uuid for tr in load_traces(t)] == ["a"]
    # a BOM at the start of a later line (two files concatenated) is harmless too, on both paths
    w.write_bytes((workload_line("a", 1) + "\n").encode() + bom + workload_line("b", 2).encode())
    ws = load_workloads(w, demo_definition())
    ws.validate_all()
    assert ws.get("b").axes == {"batch_size": 2} and ws.get("b").line == 2


def test_find_duplicate_key_names_the_path_and_both_lines() -> None:
    from fibtui.core.dataset import find_duplicate_key

    text = (
        '{"results": {"d": {\n "u1": {"status": "PASSED", "s\\\\\\"": 1},\n "u2": {},\n "u1": {}}}}'
    )
    assert json.loads(text)  # valid JSON: the parser kept the last u1
    assert find_duplicate_key(text) == ("results.d.u1", 4, 2)
    # keys repeated in sibling objects, inside arrays, or as values are not duplicates
    assert find_duplicate_key('{"a": [{"k": 1}, {"k": 2}], "k": "k", "b": {"k": 3}}') is None
    assert find_duplicate_key('{"a": [1, {"q": 1,\n"q": 2}]}') == ("a.1.q", 2, 1)
    assert find_duplicate_key('{"x\\\\": 1, "x\\\\": 2}') == (
        "x\\",
        1,
        1,
    )  # escapes compared decoded


def test_read_json_file_names_the_line_of_the_second_key(tmp_path: Path) -> None:
    from fibtui.core.dataset import read_json_file

    p = tmp_path / "r.json"
    p.write_text('{"results": {\n  "u1": 1,\n  "u1": 2\n}}')
    assert read_json_file(p) == {"results": {"u1": 2}}  # without unique_keys: json's own rule
    with pytest.raises(InputError) as exc:
        read_json_file(p, unique_keys=True)
    assert str(exc.value) == (
        f"{p}:3: field 'results.u1': a second entry with this key in one object "
        "(first on line 2; two runs concatenated?)"
    )
