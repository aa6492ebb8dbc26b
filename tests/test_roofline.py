from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fibtui.core import roofline
from fibtui.core.dataset import Axis, Dataset, Definition, TensorSpec, WorkloadSet, load_workloads
from fibtui.core.errors import InputError
from fibtui.core.results import ResultRow
from fibtui.core.settings import set_setting

GDN = "gdn_decode_qk4_v8_d128_k_last"
TRACES = ("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl")


def make_def(
    axes: dict[str, int | None],
    inputs: dict[str, tuple],
    outputs: dict[str, tuple],
    op_type: str = "custom",
    **raw,
) -> Definition:
    """axes: name -> const value or None (var); tensors: name -> (shape, dtype[, optional])."""

    def spec(name: str, t: tuple) -> TensorSpec:
        return TensorSpec(
            name, None if t[0] is None else tuple(t[0]), t[1], optional=len(t) > 2 and bool(t[2])
        )

    return Definition(
        name="syn",
        op_type=op_type,
        axes={a: Axis(a, "var" if v is None else "const", v) for a, v in axes.items()},
        inputs={n: spec(n, t) for n, t in inputs.items()},
        outputs={n: spec(n, t) for n, t in outputs.items()},
        reference="def run():\n    pass\n",
        raw=dict(raw),
    )


# ------------------------------------------------------------------ the shared gdn definition


def test_gdn_batch64_floor_on_measured_h200(shared, tmp_path: Path) -> None:
    ds = Dataset(shared("datasets", "flashinfer-trace"))
    d = ds.definition(GDN)
    set_setting(tmp_path, "devices.H200.bandwidth_tbs", 4.3)
    dev = roofline.get_device("NVIDIA H200", tmp_path)
    assert dev.bandwidth_tbs == 4.3 and dev.source == "fibtui.toml" and dev.sms == 132
    state = 64 * 8 * 128 * 128 * 4
    assert 2 * state == 67_108_864  # the fp32 state read + write: 67.1 MB
    assert 2 * state / 4.3e6 == pytest.approx(
        15.6, abs=0.05
    )  # docs/measurement.md ("Roofline floors"): 15.6 us
    f = roofline.floor(d, {"batch_size": 64}, dev)
    # q, k (bf16 [64,1,4,128]), v and output (bf16 [64,1,8,128]), a and b (bf16 [64,1,8]),
    # A_log and dt_bias (fp32 [8]), scale (one fp32), state and new_state (fp32 [64,8,128,128]).
    expected = 2 * 65_536 + 2 * 131_072 + 2 * 1024 + 2 * 32 + 4 + 2 * state
    assert f.bytes == expected == 67_504_196
    assert f.bound == "memory" and f.floor_us == pytest.approx(expected / 4.3e6)
    assert 15.6 < f.floor_us < 15.8
    assert f.flops == 8 * 64 * 8 * 128 * 128  # about 8 flops per state element and token


def test_floor_frame_matches_scalar_floor(shared) -> None:
    ds = Dataset(shared("datasets", "flashinfer-trace"))
    d = ds.definition(GDN)
    w = ds.workloads(GDN)
    dev = roofline.get_device("B200")
    frame, notes = roofline.floor_frame(d, w, dev)
    assert frame.height == 54 and "op_type:gdn" in notes[0]
    for row in frame.iter_rows(named=True):
        f = roofline.floor(d, w.axes_of(row["uuid"]), dev, present=w.get(row["uuid"]).inputs)
        assert row["floor_bytes"] == f.bytes and row["floor_us"] == pytest.approx(f.floor_us)


def test_annotate_result_rows_with_floor_and_pct(shared) -> None:
    from fibtui.core.results import load_results

    ds = Dataset(shared("datasets", "flashinfer-trace"))
    d = ds.definition(GDN)
    rows = load_results(shared(*TRACES)).for_solution("triton_bv32")
    out = roofline.annotate_rows(d, rows, roofline.get_device("H200"))
    assert len(out) == 54
    for r in out:
        assert r["floor_us"] > 0 and r["speed_of_light_pct"] == pytest.approx(
            100 * r["floor_us"] / (r["latency_ms"] * 1000)
        )
        assert "pct_of_floor" not in r


# ------------------------------------------------------------------ bytes


def test_dtype_sizes_fp8_fp4_and_scalars() -> None:
    d = make_def(
        {"n": None, "h": 16},
        {
            "x8": (["n", "h"], "float8_e4m3fn"),
            "x4": (["n", "h"], "float4_e2m1"),
            "s": (None, "float32"),
        },
        {"y": (["n"], "bfloat16")},
    )
    assert roofline.workload_bytes(d, {"n": 10}) == 10 * 16 * 1 + 10 * 16 * 0.5 + 4 + 10 * 2


def test_optional_input_counted_only_when_present(tmp_path: Path) -> None:
    d = make_def(
        {"n": None},
        {"x": (["n"], "float32"), "opt": (["n"], "float32", True)},
        {"y": (["n"], "float32")},
    )
    assert roofline.workload_bytes(d, {"n": 4}, present=["x"]) == 32
    assert roofline.workload_bytes(d, {"n": 4}, present=["x", "opt"]) == 48
    assert roofline.workload_bytes(d, {"n": 4}) == 48  # unknown: counted
    lines = [
        {
            "definition": "syn",
            "workload": {"uuid": "a", "axes": {"n": 4}, "inputs": {"x": {"type": "random"}}},
        },
        {
            "definition": "syn",
            "workload": {
                "uuid": "b",
                "axes": {"n": 4},
                "inputs": {"x": {"type": "random"}, "opt": {"type": "random"}},
            },
        },
    ]
    path = tmp_path / "syn.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    w = load_workloads(path, d)
    frame, _ = roofline.floor_frame(d, w, roofline.get_device("B200"))
    assert dict(frame.select("uuid", "floor_bytes").iter_rows()) == {"a": 32.0, "b": 48.0}
    # A workload set built in memory has no input specs: optional inputs count, and a note says so.
    mem = WorkloadSet("syn", w.frame, ["n"])
    frame, notes = roofline.floor_frame(d, mem, roofline.get_device("B200"))
    assert frame.get_column("floor_bytes").to_list() == [48.0, 48.0]
    assert any("counted as present" in n for n in notes)


# ------------------------------------------------------------------ FLOPs


def test_gemm_flops_and_compute_bound_floor() -> None:
    d = make_def(
        {"M": None, "N": 4096, "K": 8192},
        {"A": (["M", "K"], "bfloat16"), "B": (["N", "K"], "bfloat16")},
        {"C": (["M", "N"], "bfloat16")},
        op_type="gemm",
    )
    f = roofline.floor(d, {"M": 8192}, roofline.get_device("B200"))
    assert f.flops == 2 * 8192 * 4096 * 8192
    assert f.bound == "compute" and f.floor_us == pytest.approx(f.flops / (2250 * 1e6))
    # fp8 operands use the device's fp8 rate
    d8 = make_def(
        {"M": None, "N": 4096, "K": 8192},
        {"A": (["M", "K"], "float8_e4m3fn"), "B": (["N", "K"], "float8_e4m3fn")},
        {"C": (["M", "N"], "bfloat16")},
        op_type="gemm",
    )
    f8 = roofline.floor(d8, {"M": 8192}, roofline.get_device("B200"))
    assert f8.compute_us == pytest.approx(f.compute_us / 2)


def test_definition_flops_expression_wins_and_is_vectorized() -> None:
    d = make_def(
        {"n": None, "k": 3},
        {"x": (["n", "k"], "float32")},
        {"y": (["n"], "float32")},
        op_type="gemm",
        flops="2 * n * k + 10",
    )
    assert roofline.flops_formula(d).source == "definition"
    assert roofline.floor(d, {"n": 5}, roofline.get_device("H100")).flops == 40.0
    w = WorkloadSet("syn", pl.DataFrame({"uuid": ["a", "b"], "line": [1, 2], "n": [5, 7]}), ["n"])
    frame, _ = roofline.floor_frame(d, w, roofline.get_device("H100"))
    assert frame.get_column("floor_flops").to_list() == [40.0, 52.0]


def test_no_flops_for_unknown_op_type_is_memory_only() -> None:
    d = make_def(
        {"n": None}, {"x": (["n"], "float32")}, {"y": (["n"], "float32")}, op_type="mystery"
    )
    f = roofline.floor(d, {"n": 1000}, roofline.get_device("H200"))
    assert f.flops is None and f.compute_us is None and f.bound == "memory"
    assert f.floor_us == pytest.approx(8000 / 4.8e6)


@pytest.mark.parametrize(
    "expr, msg",
    [
        ("2 * q", "unknown axis"),
        ("__import__('os')", "not allowed"),
        ("n.real", "not allowed"),
        ("n if n else 1", "not allowed"),
        ("not n", "only + - *"),
        ("2 **", "not an arithmetic expression"),
        ("1e400", "out of range"),
        ("", "1 to"),
        (True, "expected a number"),
        (-5, "non-negative"),
    ],
)
def test_bad_flops_expressions_are_input_errors(expr, msg) -> None:
    d = make_def({"n": None}, {"x": (["n"], "float32")}, {"y": (["n"], "float32")}, flops=expr)
    with pytest.raises(InputError) as exc:
        roofline.flops_formula(d)
    assert msg in str(exc.value) and exc.value.field == "flops"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.text(alphabet="n0123456789+-*/%() .e", max_size=40)))
def test_flops_parser_never_crashes(text: str) -> None:
    d = make_def({"n": None}, {"x": (["n"], "float32")}, {"y": (["n"], "float32")})
    try:
        formula = roofline.parse_flops_expression(text, d)
    except InputError:
        return
    value = formula.evaluate(d, {"n": 3})
    assert value is None or value >= 0
    frame = pl.DataFrame({"n": [0, 3]}).with_columns(formula.expr(d).alias("f"))
    assert frame.height == 2


def test_speed_of_light_convention() -> None:
    assert roofline.speed_of_light_pct(0.002, 0.5) == pytest.approx(25.0)  # 2 us on a 0.5 us floor
    assert roofline.speed_of_light_pct(0.0005, 0.5) == pytest.approx(100.0)  # at the floor
    assert roofline.speed_of_light_pct(0.01269, 1.0) == pytest.approx(
        7.88, abs=0.01
    )  # the old "1269%"
    assert (
        roofline.speed_of_light_pct(None, 1.0) is None
        and roofline.speed_of_light_pct(1.0, 0.0) is None
    )
    assert roofline.speed_of_light_pct(0.0, 1.0) is None
    assert [roofline.format_speed_of_light(v) for v in (25.0, 7.88, 100.0, None)] == [
        "25%",
        "7.9%",
        "100%",
        "-",
    ]
    # the older inverse ratio, still computed for the Runs pane
    assert roofline.pct_of_floor(0.002, 1.0) == pytest.approx(200.0)  # 2 us on a 1 us floor
    assert roofline.pct_of_floor(None, 1.0) is None and roofline.pct_of_floor(1.0, 0.0) is None


# ------------------------------------------------------------------ devices


def test_device_table_names_and_errors(tmp_path: Path) -> None:
    assert roofline.get_device("h100 sxm").name == "H100"
    assert roofline.get_device("NVIDIA B200").bandwidth_tbs == 8.0
    with pytest.raises(InputError) as exc:
        roofline.get_device("A100")
    assert exc.value.field == "--device" and "B200" in str(exc.value)
    set_setting(tmp_path, "devices.MI300X.bandwidth_tbs", 5.3)
    assert roofline.get_device("mi300x", tmp_path).bandwidth_tbs == 5.3
    assert "MI300X" in roofline.device_names(tmp_path)
    set_setting(tmp_path, "devices.H200.bandwidth_tbs", "fast")
    with pytest.raises(InputError) as exc:
        roofline.get_device("H200", tmp_path)
    assert exc.value.field == "devices.H200.bandwidth_tbs" and str(exc.value).startswith(
        str(tmp_path / "fibtui.toml")
    )
    set_setting(tmp_path, "devices.TPU.sms", 4)
    with pytest.raises(InputError, match="needs bandwidth_tbs"):
        roofline.get_device("TPU", tmp_path)


def test_annotate_rows_without_axes_stays_null() -> None:
    d = make_def({"n": None}, {"x": (["n"], "float32")}, {"y": (["n"], "float32")})
    rows = [
        ResultRow("syn", None, "a", {}, "PASSED", latency_ms=0.001),
        ResultRow("syn", None, "b", {"n": 1000}, "PASSED", latency_ms=0.001),
    ]
    out = roofline.annotate_rows(d, rows, roofline.get_device("H200"))
    assert out[0]["floor_us"] is None and out[0]["speed_of_light_pct"] is None
    assert out[1]["floor_bytes"] == 8000 and out[1]["speed_of_light_pct"] == pytest.approx(
        100 * (8000 / 4.8e6) / 1.0
    )
    # 300,000 fp32 in and out: 2.4 MB, a 0.5 us floor on H200's 4.8 TB/s; 2 us is 25% of the speed of light
    big = roofline.annotate_rows(
        d,
        [ResultRow("syn", None, "c", {"n": 300_000}, "PASSED", latency_ms=0.002)],
        roofline.get_device("H200"),
    )
    assert big[0]["floor_us"] == pytest.approx(0.5) and big[0][
        "speed_of_light_pct"
    ] == pytest.approx(25.0)
