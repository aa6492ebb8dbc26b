from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fibtui.core import regimes, roofline
from fibtui.core.dataset import Axis, Dataset, Definition, TensorSpec, WorkloadSet
from fibtui.core.errors import InputError
from fibtui.core.results import ResultRow, load_results
from fibtui.core.settings import set_setting, settings_path
from tests.conftest import DEMO_DEFINITION, run_cli

GDN = "gdn_decode_qk4_v8_d128_k_last"
TRACES = ("fixtures", "h200", "flashinfer-bench", "persistent_54wl_3sol_returning.jsonl")


def filter_holds(filt: dict, axes: dict) -> bool:
    for a, v in filt.items():
        if isinstance(v, list):
            if not v[0] <= axes[a] <= v[1]:
                return False
        elif axes[a] != v:
            return False
    return True


def check_partition(report: regimes.RegimeReport) -> None:
    """Every workload in exactly one band, inside that band's filter; counts and shares add up."""
    data = report.to_json()
    names = [b["name"] for b in data["bands"]]
    assert len(names) == len(set(names))
    assert (
        sum(b["workloads"] for b in data["bands"])
        == data["workload_count"]
        == len(data["workloads"])
    )
    by_band: dict[str, int] = {}
    bands = {b["name"]: b for b in data["bands"]}
    for w in data["workloads"]:
        b = bands[w["band"]]
        by_band[w["band"]] = by_band.get(w["band"], 0) + 1
        members = b["members"] or [b["filter"]]
        assert filter_holds(b["filter"], w["axes"]) and any(
            filter_holds(m, w["axes"]) for m in members
        )
    assert by_band == {n: bands[n]["workloads"] for n in names}
    if data["mode"] == "latency":
        assert sum(b["latency_share"] for b in data["bands"]) == pytest.approx(1.0)
    else:
        assert all(
            b["latency_share"] is None and b["mean_latency_ms"] is None for b in data["bands"]
        )


# ------------------------------------------------------------------ (a) the shared dataset + H200 traces


def shared_report(shared, **kw) -> regimes.RegimeReport:
    ds = Dataset(shared("datasets", "flashinfer-trace"))
    rows = load_results(shared(*TRACES)).for_solution("triton_bv32")
    return regimes.analyze(
        ds.definition(GDN), ds.workloads(GDN), rows, device=roofline.get_device("H200"), **kw
    )


def test_shared_dataset_bands_shares_representatives_floors(shared) -> None:
    report = shared_report(shared)
    assert report.varying_axes == ["batch_size"] and report.dominant_axis == "batch_size"
    assert report.const_axes == {
        "seq_len": 1,
        "num_q_heads": 4,
        "num_k_heads": 4,
        "num_v_heads": 8,
        "head_size": 128,
    }
    assert [b.name for b in report.bands] == [f"batch_size={v}" for v in (1, 4, 8, 16, 32, 48, 64)]
    assert [b.workloads for b in report.bands] == [10, 8, 7, 7, 7, 7, 8]
    assert all(b.passed == b.workloads for b in report.bands)
    assert sum(b.latency_share for b in report.bands) == pytest.approx(1.0)
    assert report.target_representatives == (2, 3) and 2 <= len(report.representatives) <= 3
    reasons = " | ".join(r.reason for r in report.representatives)
    assert (
        "largest workload (batch_size=64)" in reasons
        and "smallest workload (batch_size=1)" in reasons
    )
    assert all(r.reason for r in report.representatives)
    check_partition(report)
    # floors from the bytes: batch 64 moves 67,504,196 bytes (state read + write = 67.1 MB of it)
    w64 = report.table.filter(pl.col("batch_size") == 64).row(0, named=True)
    assert w64["floor_bytes"] == 67_504_196 and w64["floor_us"] == pytest.approx(67_504_196 / 4.8e6)
    assert w64["speed_of_light_pct"] == pytest.approx(
        100 * w64["floor_us"] / (w64["latency_ms"] * 1000)
    )
    assert 0 < w64["speed_of_light_pct"] < 100
    # the mean over the PASSED runs of each workload: here one run each
    raw = [json.loads(line) for line in shared(*TRACES).read_text().splitlines()]
    lat = {
        r["workload"]["uuid"]: r["evaluation"]["performance"]["latency_ms"]
        for r in raw
        if r["solution"] == "triton_bv32"
    }
    assert report.total_latency_ms == pytest.approx(sum(lat.values()))
    # the shape matrix: one row per band, kernel columns empty until NCU evidence is attached
    assert [m.band for m in report.shape_matrix] == [b.name for b in report.bands]
    assert all(
        m.dominant_kernel is None and m.bottleneck is None and m.limiter is None
        for m in report.shape_matrix
    )


def test_repeats_are_averaged_and_failures_counted(shared) -> None:
    ds = Dataset(shared("datasets", "flashinfer-trace"))
    d, w = ds.definition(GDN), ds.workloads(GDN)
    first, second = w.uuids[0], w.uuids[1]
    rows = [
        ResultRow(GDN, "s", first, {}, "PASSED", latency_ms=0.010),
        ResultRow(GDN, "s", first, {}, "PASSED", latency_ms=0.020),
        ResultRow(GDN, "s", first, {}, "INCORRECT_NUMERICAL"),
        ResultRow(GDN, "s", second, {}, "PASSED", latency_ms=0.030),
        ResultRow(GDN, "s", "not-a-workload", {}, "PASSED", latency_ms=1.0),
    ]
    report = regimes.analyze(d, w, rows)
    t = {r["uuid"]: r for r in report.table.iter_rows(named=True)}
    assert (
        t[first]["latency_ms"] == pytest.approx(0.015)
        and t[first]["runs"] == 3
        and t[first]["passed_runs"] == 2
    )
    band = report.band("batch_size=1")
    assert band.passed == 1 and band.with_latency == 2 and band.latency_share == pytest.approx(1.0)
    assert any("not among" in n for n in report.notes) and any(
        "52 workload(s) have no result rows" in n for n in report.notes
    )
    check_partition(report)


def test_shape_matrix_takes_ncu_evidence(shared) -> None:
    report = shared_report(shared)
    row = regimes.attach_kernel_evidence(
        report.shape_matrix,
        "batch_size=64",
        dominant_kernel="gdn_decode_kernel",
        bottleneck="memory-bound",
        limiter="registers",
        source="b64.ncu-rep",
    )
    assert report.to_json()["shape_matrix"][-1] == {
        "band": "batch_size=64",
        "uuid": row.uuid,
        "dominant_kernel": "gdn_decode_kernel",
        "bottleneck": "memory-bound",
        "limiter": "registers",
        "source": "b64.ncu-rep",
    }
    with pytest.raises(InputError, match="no band named"):
        regimes.attach_kernel_evidence(
            report.shape_matrix, "batch_size=3", dominant_kernel=None, bottleneck=None, limiter=None
        )


# ------------------------------------------------------------------ (b) synthetic: two coupled axes + an outlier

SYN = "syn_coupled_alpha_beta"


def write_synthetic(root: Path) -> tuple[Path, dict[str, float], str]:
    """A dataset whose axes alpha and beta vary together, a tiny combination, and one workload
    holding half of the latency. Returns (dataset root, latency per uuid, the outlier's uuid)."""
    definition = {
        "name": SYN,
        "op_type": "synthetic",
        "description": "two coupled axes",
        "axes": {
            "alpha": {"type": "var"},
            "beta": {"type": "var"},
            "width": {"type": "const", "value": 64},
        },
        "inputs": {"x": {"shape": ["alpha", "beta", "width"], "dtype": "bfloat16"}},
        "outputs": {"y": {"shape": ["alpha", "width"], "dtype": "float32"}},
        "reference": "def run(x):\n    return x\n",
    }
    (root / "definitions" / "syn").mkdir(parents=True)
    (root / "workloads" / "syn").mkdir(parents=True)
    (root / "definitions" / "syn" / f"{SYN}.json").write_text(json.dumps(definition))
    combos = [(1, 16, 6), (2, 16, 6), (2, 256, 6), (4, 256, 6), (1, 256, 1)]
    lines, latency = [], {}
    for alpha, beta, count in combos:
        for i in range(count):
            uuid = f"w-{alpha}-{beta}-{i}"
            latency[uuid] = 0.001 * alpha * beta / 16
            lines.append(
                {
                    "definition": SYN,
                    "workload": {
                        "uuid": uuid,
                        "axes": {"alpha": alpha, "beta": beta},
                        "inputs": {"x": {"type": "random"}},
                    },
                }
            )
    outlier = "w-4-256-heavy"
    latency[outlier] = 10.0
    lines.append(
        {
            "definition": SYN,
            "workload": {
                "uuid": outlier,
                "axes": {"alpha": 4, "beta": 256},
                "inputs": {"x": {"type": "random"}},
            },
        }
    )
    (root / "workloads" / "syn" / f"{SYN}.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )
    return root, latency, outlier


def write_results(path: Path, latency: dict[str, float]) -> Path:
    path.write_text(
        json.dumps(
            {
                "definition": SYN,
                "results": {
                    SYN: {u: {"status": "PASSED", "latency_ms": v} for u, v in latency.items()}
                },
            }
        )
    )
    return path


def test_synthetic_coupled_regimes_and_outlier(tmp_path: Path) -> None:
    root, latency, outlier = write_synthetic(tmp_path / "ds")
    ds = Dataset(root)
    rows = load_results(write_results(tmp_path / "r.json", latency)).rows
    report = regimes.analyze(
        ds.definition(SYN), ds.workloads(SYN), rows, device=roofline.get_device("B200")
    )
    assert report.varying_axes == ["alpha", "beta"] and report.const_axes == {"width": 64}
    names = [b.name for b in report.bands]
    # coupled regimes: the combinations that occur (the one-workload alpha=1, beta=256 merged away)
    assert names == [
        "alpha=1, beta=16",
        "alpha=2, beta=16",
        "alpha=2, beta=256 (+1 merged)",
        "alpha=4, beta=256",
        f"outlier {outlier}",
    ]
    merged = report.band("alpha=2, beta=256 (+1 merged)")
    assert merged.kind == "merged" and merged.filter == {"alpha": [1, 2], "beta": 256}
    assert (
        merged.members == [{"alpha": 1, "beta": 256}, {"alpha": 2, "beta": 256}]
        and merged.workloads == 7
    )
    assert all(set(b.filter) == {"alpha", "beta"} for b in report.bands)
    # the dominant outlier stands alone and leads the representatives
    assert report.outliers == [outlier]
    ob = report.band(f"outlier {outlier}")
    assert (
        ob.kind == "outlier"
        and ob.outlier
        and ob.workloads == 1
        and ob.latency_share == pytest.approx(10 / sum(latency.values()))
    )
    assert report.representatives[0].uuid == outlier and report.representatives[
        0
    ].reason.startswith("outlier: holds")
    assert report.target_representatives == (3, 4) and 3 <= len(report.representatives) <= 4
    assert len({r.uuid for r in report.representatives}) == len(report.representatives)
    check_partition(report)
    # floors from bytes: x bf16 [alpha, beta, 64] + y fp32 [alpha, 64]
    w = report.table.filter(pl.col("uuid") == outlier).row(0, named=True)
    assert w["floor_bytes"] == 4 * 256 * 64 * 2 + 4 * 64 * 4


def test_synthetic_band_outlier_without_single_heavy_workload(tmp_path: Path) -> None:
    root, latency, outlier = write_synthetic(tmp_path / "ds")
    latency[outlier] = 0.064  # like its neighbours
    for u in latency:
        if u.startswith("w-1-16-"):
            latency[u] = 1.0  # 6 of 32 workloads, most of the latency
    ds = Dataset(root)
    report = regimes.analyze(
        ds.definition(SYN),
        ds.workloads(SYN),
        load_results(write_results(tmp_path / "r.json", latency)).rows,
    )
    assert report.outliers == ["alpha=1, beta=16"] and report.band("alpha=1, beta=16").outlier
    assert not any(b.kind == "outlier" for b in report.bands)
    check_partition(report)


# ------------------------------------------------------------------ (c) the bundled demo, counts only


def test_demo_counts_only(demo_ws: Path) -> None:
    ds = Dataset(demo_ws / "dataset")
    report = regimes.analyze(ds.definition(DEMO_DEFINITION), ds.workloads(DEMO_DEFINITION))
    data = report.to_json()
    assert (
        data["mode"] == "counts-only"
        and data["total_latency_ms"] is None
        and data["latency_source"] == "none: counts only"
    )
    assert data["varying_axes"] == ["batch_size"] and len(data["bands"]) == 9
    assert all(b["latency_share"] is None and b["passed"] is None for b in data["bands"])
    assert data["outliers"] == [] and 2 <= len(data["representatives"]) <= 3
    assert all(
        w["latency_ms"] is None and w["speed_of_light_pct"] is None and w["floor_bytes"] > 0
        for w in data["workloads"]
    )
    assert all(b["mean_speed_of_light_pct"] is None for b in data["bands"])
    assert any("counts only" in r["reason"] for r in data["representatives"])
    check_partition(report)
    assert (
        report.to_json()
        == regimes.analyze(ds.definition(DEMO_DEFINITION), ds.workloads(DEMO_DEFINITION)).to_json()
    )


# ------------------------------------------------------------------ (d) pins


def test_pins_survive_a_reload_and_are_honored(demo_ws: Path) -> None:
    ds = Dataset(demo_ws / "dataset")
    d, w = ds.definition(DEMO_DEFINITION), ds.workloads(DEMO_DEFINITION)
    auto = regimes.analyze(d, w)
    dropped = auto.representatives[0].uuid
    chosen = w.uuids[20]
    assert chosen not in {r.uuid for r in auto.representatives}
    regimes.pin(demo_ws, chosen)
    regimes.unpin(demo_ws, dropped)
    set_setting(demo_ws, "stats.min_gain", 0.01)  # other settings leave the pins alone
    pinned, unpinned = regimes.load_pins(demo_ws)  # read back from fibtui.toml
    assert (pinned, unpinned) == ([chosen], [dropped])
    assert "[regimes]" in settings_path(demo_ws).read_text()
    report = regimes.analyze(d, w, pinned=pinned, unpinned=unpinned)
    uuids = [r.uuid for r in report.representatives]
    assert (
        uuids[0] == chosen
        and report.representatives[0].pinned
        and report.representatives[0].reason == "pinned by the user"
    )
    assert dropped not in uuids and len(uuids) == 3
    # pinning again after an unpin moves the uuid back
    regimes.pin(demo_ws, dropped)
    assert regimes.load_pins(demo_ws) == ([chosen, dropped], [])
    # and automatic gives both back to the automatic choice: the first report again
    regimes.automatic(demo_ws, chosen)
    regimes.unpin(demo_ws, dropped)
    regimes.automatic(demo_ws, dropped)
    assert regimes.load_pins(demo_ws) == ([], [])
    again = regimes.analyze(d, w, pinned=[], unpinned=[])
    assert [r.uuid for r in again.representatives] == [r.uuid for r in auto.representatives]


def test_broken_pins_in_settings_are_input_errors(demo_ws: Path) -> None:
    set_setting(demo_ws, "regimes.pinned", 3)
    with pytest.raises(InputError) as exc:
        regimes.load_pins(demo_ws)
    assert exc.value.field == "regimes.pinned" and str(exc.value).startswith(
        str(settings_path(demo_ws))
    )
    with pytest.raises(InputError):
        regimes.pin(demo_ws, "has space")


# ------------------------------------------------------------------ (e) the CLI


def test_cli_json_on_shared_traces(capsys, shared, demo_ws: Path) -> None:
    code, out, err = run_cli(
        capsys,
        "regimes",
        "--workspace",
        str(demo_ws),
        "--dataset",
        str(shared("datasets", "flashinfer-trace")),
        "--definition",
        GDN,
        "--results",
        str(shared(*TRACES)),
        "--solution",
        "triton_bv32",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert {
        "definition",
        "varying_axes",
        "const_axes",
        "bands",
        "outliers",
        "representatives",
        "workloads",
    } <= set(data)
    assert (
        data["definition"] == GDN
        and data["varying_axes"] == ["batch_size"]
        and data["const_axes"]["head_size"] == 128
    )
    assert {"name", "filter", "workloads", "latency_share", "mean_latency_ms"} <= set(
        data["bands"][0]
    )
    assert data["bands"][0]["filter"] == {"batch_size": 1}
    assert {"uuid", "band", "reason"} <= set(data["representatives"][0])
    assert {"uuid", "axes", "latency_ms", "floor_bytes", "floor_us", "speed_of_light_pct"} <= set(
        data["workloads"][0]
    )
    assert (
        "pct_of_floor" not in data["workloads"][0] and "mean_pct_of_floor" not in data["bands"][0]
    )
    assert data["speed_of_light_convention"].startswith("100 * floor / latency")
    w = data["workloads"][0]
    assert w["speed_of_light_pct"] == pytest.approx(100 * w["floor_us"] / (w["latency_ms"] * 1000))
    assert (
        data["device"]["name"] == "H200" and "hardware" in data["device"]["chosen_by"]
    )  # from the traces
    assert "triton_bv32" in data["latency_source"]


def test_cli_human_output_with_chart(capsys, shared, demo_ws: Path) -> None:
    set_setting(demo_ws, "devices.H200.bandwidth_tbs", 4.3)
    code, out, err = run_cli(
        capsys,
        "regimes",
        "--workspace",
        str(demo_ws),
        "--dataset",
        str(shared("datasets", "flashinfer-trace")),
        "--definition",
        GDN,
        "--results",
        str(shared(*TRACES)),
        "--solution",
        "triton_bv16",
        "--device",
        "h200",
    )
    assert code == 0, err
    assert "batch_size=64" in out and "representatives (target 2-3 of 54 workloads)" in out
    assert "latency vs batch_size" in out and "4.3 TB/s" in out and "\x1b[" not in out
    words = " ".join(out.split())  # the console wraps at its width
    assert (
        "share" in out
        and "SoL %" in out
        and "100 x floor / latency" in words
        and "% of floor" not in words
    )


def test_cli_counts_only_on_the_demo_and_pins(capsys, demo_ws: Path) -> None:
    code, out, _ = run_cli(capsys, "regimes", "--workspace", str(demo_ws), "--json")
    data = json.loads(out)
    assert code == 0 and data["mode"] == "counts-only" and data["device"]["name"] == "B200"
    uuid = data["workloads"][10]["uuid"]
    code, out, _ = run_cli(capsys, "regimes", "--workspace", str(demo_ws), "--pin", uuid, "--json")
    assert code == 0 and json.loads(out)["representatives"][0]["uuid"] == uuid
    code, out, _ = run_cli(
        capsys, "regimes", "--workspace", str(demo_ws), "--json"
    )  # a later run, no flags
    data = json.loads(out)
    assert data["pinned"] == [uuid] and data["representatives"][0]["pinned"]
    code, out, _ = run_cli(capsys, "regimes", "--workspace", str(demo_ws))
    assert code == 0 and "counts only" in out and "latency vs" not in out and uuid in out


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--definition", "no_such_definition"], "no definition named 'no_such_definition'"),
        (["--device", "Z80"], "unknown device 'Z80'"),
        (["--pin", "not-a-workload"], "not a workload of"),
        (["--solution", "x"], "--solution needs --results"),
    ],
)
def test_cli_bad_input_exits_2(capsys, demo_ws: Path, extra, needle) -> None:
    code, out, err = run_cli(capsys, "regimes", "--workspace", str(demo_ws), *extra)
    assert code == 2 and needle in err and "Traceback" not in err and out == ""
    assert not settings_path(demo_ws).exists()  # nothing stored on a refused command


def test_cli_bad_results_files_exit_2(capsys, demo_ws: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    code, _, err = run_cli(
        capsys, "regimes", "--workspace", str(demo_ws), "--results", str(garbage)
    )
    assert code == 2 and str(garbage) in err
    missing = tmp_path / "missing.jsonl"
    assert (
        run_cli(capsys, "regimes", "--workspace", str(demo_ws), "--results", str(missing))[0] == 2
    )
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {"definition": "x", "results": {"x": {"u1": {"status": "PASSED", "latency_ms": 1.0}}}}
        )
    )
    code, _, err = run_cli(capsys, "regimes", "--workspace", str(demo_ws), "--results", str(other))
    assert code == 2 and "none of its 1 result rows names one of the 50 workloads" in err


def test_cli_multi_solution_traces_need_solution(capsys, shared, demo_ws: Path) -> None:
    args = [
        "regimes",
        "--workspace",
        str(demo_ws),
        "--dataset",
        str(shared("datasets", "flashinfer-trace")),
        "--definition",
        GDN,
        "--results",
        str(shared(*TRACES)),
    ]
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "pick one with --solution" in err and "triton_bv16" in err
    code, _, err = run_cli(capsys, *args, "--solution", "nope")
    assert code == 2 and "no rows for solution 'nope'" in err


# ------------------------------------------------------------------ (f) band building on random axis data


def synthetic_set(
    columns: dict[str, list[int]], const: dict[str, int] | None = None
) -> tuple[Definition, WorkloadSet]:
    const = const or {}
    n = len(next(iter(columns.values()))) if columns else 1
    axes = {a: Axis(a, "var") for a in columns} | {a: Axis(a, "const", v) for a, v in const.items()}
    shape = tuple(columns) or tuple(const)
    d = Definition(
        "rand",
        "synthetic",
        axes,
        {"x": TensorSpec("x", shape, "float16")},
        {"y": TensorSpec("y", None, "float32")},
        "def run(x):\n    pass\n",
    )
    frame = pl.DataFrame(
        {"uuid": [f"u{i:05d}" for i in range(n)], "line": list(range(1, n + 1)), **columns},
        schema={"uuid": pl.String, "line": pl.Int64, **{a: pl.Int64 for a in columns}},
    )
    return d, WorkloadSet("rand", frame, list(columns))


@st.composite
def axis_data(draw):
    n = draw(st.integers(1, 80))
    k = draw(st.integers(1, 3))
    names = draw(
        st.lists(
            st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6).filter(
                lambda a: a not in regimes.RESERVED_COLUMNS and not a.startswith("_fib")
            ),
            min_size=k,
            max_size=k,
            unique=True,
        )
    )
    columns = {}
    for a in names:
        pool = draw(
            st.lists(st.integers(0, 1 << draw(st.integers(1, 20))), min_size=1, max_size=30)
        )
        columns[a] = [draw(st.sampled_from(pool)) for _ in range(n)]
    lat = draw(
        st.one_of(
            st.none(), st.lists(st.one_of(st.none(), st.floats(1e-4, 1e3)), min_size=n, max_size=n)
        )
    )
    return columns, lat


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(axis_data())
def test_bands_partition_random_axis_data(data) -> None:
    columns, lat = data
    d, w = synthetic_set(columns)
    rows = None
    if lat is not None:
        rows = [
            ResultRow.of(
                {
                    "uuid": u,
                    "status": "PASSED" if v is not None else "RUNTIME_ERROR",
                    "latency_ms": v,
                }
            )
            for u, v in zip(w.uuids, lat, strict=True)
        ]
    report = regimes.analyze(d, w, rows, device=roofline.get_device("H100"))
    check_partition(report)
    assert len([b for b in report.bands if b.kind != "outlier"]) <= regimes.MAX_BANDS
    lo, hi = report.target_representatives
    shapes = len(set(zip(*columns.values(), strict=True))) if report.varying_axes else 1
    assert min(lo, shapes) <= len(report.representatives) <= hi
    assert len({r.uuid for r in report.representatives}) == len(report.representatives)
    assert (
        report.to_json()
        == regimes.analyze(d, w, rows, device=roofline.get_device("H100")).to_json()
    )  # deterministic


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(-(1 << 40), 1 << 40), min_size=1, max_size=300, unique=True),
    st.integers(1, 12),
    st.data(),
)
def test_axis_bins_cover_sorted_values(values, max_bins, data) -> None:
    values = sorted(values)
    counts = data.draw(st.lists(st.integers(1, 50), min_size=len(values), max_size=len(values)))
    bins, method = regimes.axis_bins(values, counts, max_bins)
    assert 1 <= len(bins) <= max_bins and method.split()[0] in ("values", "log2", "quantile")
    assert all(lo <= hi for lo, hi in bins) and all(
        a[1] < b[0] for a, b in zip(bins, bins[1:], strict=False)
    )
    for v in values:
        assert sum(lo <= v <= hi for lo, hi in bins) == 1


def test_reserved_axis_names_are_refused() -> None:
    d, w = synthetic_set({"band": [1, 2]})
    with pytest.raises(InputError) as exc:
        regimes.analyze(d, w)
    assert exc.value.field == "axes.band"


def test_no_varying_axis_is_one_band() -> None:
    d, w = synthetic_set({"a": [3, 3, 3]})
    report = regimes.analyze(
        d, w, [ResultRow.of({"uuid": u, "status": "PASSED", "latency_ms": 1.0}) for u in w.uuids]
    )
    assert report.varying_axes == [] and report.const_axes == {"a": 3}
    assert [b.name for b in report.bands] == ["all"] and report.bands[
        0
    ].latency_share == pytest.approx(1.0)
    assert any("every workload has a=3" in n for n in report.notes)


def test_speed_of_light_per_workload_and_band() -> None:
    # x is n fp16 values, y one fp32 scalar: 2n + 4 bytes; at 1 TB/s, 500,000 bytes is a 0.5 us floor
    d, w = synthetic_set({"n": [249_998, 249_998, 499_998]})
    device = roofline.Device("T1", bandwidth_tbs=1.0, sms=None, bf16_tflops=None)
    latency_us = [2.0, 1.0, 1.25]
    rows = [
        ResultRow.of({"uuid": u, "status": "PASSED", "latency_ms": lat / 1000})
        for u, lat in zip(w.uuids, latency_us, strict=True)
    ]
    data = regimes.analyze(d, w, rows, device=device).to_json()
    floors = [x["floor_us"] for x in data["workloads"]]
    assert floors == pytest.approx([0.5, 0.5, 1.0])
    # floor 0.5 us, latency 2 us: 25% of the speed of light (the old "% of floor" read 400%)
    assert [x["speed_of_light_pct"] for x in data["workloads"]] == pytest.approx([25.0, 50.0, 80.0])
    bands = {b["name"]: b for b in data["bands"]}
    assert bands["n=249998"]["mean_speed_of_light_pct"] == pytest.approx(37.5)
    assert bands["n=499998"]["mean_speed_of_light_pct"] == pytest.approx(80.0)
    assert data["speed_of_light_convention"] == regimes.SPEED_OF_LIGHT_CONVENTION
    assert "pct_of_floor_convention" not in data


def test_many_distinct_values_are_binned() -> None:
    d, w = synthetic_set({"seq": list(range(1, 2048))})
    report = regimes.analyze(d, w)
    assert report.binning == {"seq": "log2"} and len(report.bands) == 11
    assert [b.filter["seq"] for b in report.bands[:3]] == [1, [2, 3], [4, 7]]
    assert report.bands[-1].name == "seq=1024..2047" and report.bands[-1].workloads == 1024
    check_partition(report)
    narrow = regimes.analyze(*synthetic_set({"seq": [1000 + i % 50 for i in range(200)]}))
    assert narrow.binning == {"seq": "quantile"} and len(narrow.bands) == regimes.QUANTILE_BINS
    check_partition(narrow)


def test_an_axis_the_constraints_fix_is_not_a_band_axis(tmp_path) -> None:
    """GDN prefill: len_cu_seqlens == num_seqs + 1 (a constraint every workload obeys) follows from
    num_seqs; the bands are cut along total_seq_len and num_seqs only. A constraint reading a
    tensor, or one the workloads break, derives nothing."""
    import polars as pl

    from fibtui.core.dataset import parse_definition
    from fibtui.core.regimes import analyze, derived_axes

    raw = {
        "name": "prefill_like",
        "op_type": "gdn",
        "axes": {
            "total_seq_len": {"type": "var"},
            "num_seqs": {"type": "var"},
            "len_cu_seqlens": {"type": "var"},
            "h": {"type": "const", "value": 4},
        },
        "constraints": ["len_cu_seqlens == num_seqs + 1", "total_seq_len == cu_seqlens[-1].item()"],
        "inputs": {
            "cu_seqlens": {"shape": ["len_cu_seqlens"], "dtype": "int64"},
            "q": {"shape": ["total_seq_len", "h"], "dtype": "bfloat16"},
        },
        "outputs": {"o": {"shape": ["total_seq_len", "h"], "dtype": "bfloat16"}},
        "reference": "def run(cu_seqlens, q):\n    return q\n",
    }
    definition = parse_definition(raw)
    combos = [(64, 1), (512, 1), (1024, 2), (1024, 4), (2048, 4), (2048, 8)]
    frame = pl.DataFrame(
        {
            "total_seq_len": [t for t, _ in combos],
            "num_seqs": [n for _, n in combos],
            "len_cu_seqlens": [n + 1 for _, n in combos],
        }
    )
    assert derived_axes(definition, frame, ["total_seq_len", "num_seqs", "len_cu_seqlens"]) == {
        "len_cu_seqlens": "num_seqs + 1"
    }
    broken = frame.with_columns(
        pl.Series("len_cu_seqlens", [2, 2, 3, 5, 5, 7])
    )  # the last breaks it
    assert derived_axes(definition, broken, ["total_seq_len", "num_seqs", "len_cu_seqlens"]) == {}
    lines = [
        {
            "definition": "prefill_like",
            "workload": {
                "uuid": f"w{i}",
                "axes": {"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1},
                "inputs": {},
            },
        }
        for i, (t, n) in enumerate(combos)
    ]
    from fibtui.core.dataset import load_workloads

    path = tmp_path / "w.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    report = analyze(definition, load_workloads(path, definition))
    assert report.varying_axes == ["total_seq_len", "num_seqs"]
    assert (
        report.derived_axes == {"len_cu_seqlens": "num_seqs + 1"}
        and "len_cu_seqlens" not in report.const_axes
    )
    assert all("len_cu_seqlens" not in b.name for b in report.bands)
    assert report.to_json()["derived_axes"] == {"len_cu_seqlens": "num_seqs + 1"}


def test_smallest_workload_of_each_band(demo_ws: Path) -> None:
    ds = Dataset(demo_ws / "dataset")
    d, w = ds.definition(DEMO_DEFINITION), ds.workloads(DEMO_DEFINITION)
    report = regimes.analyze(d, w)
    picked = regimes.smallest_per_band(report)
    bands = {r["uuid"]: r["band"] for r in report.table.iter_rows(named=True)}
    sizes = {r["uuid"]: r["batch_size"] for r in report.table.iter_rows(named=True)}
    assert [bands[u] for u in picked] == [
        b.name for b in report.bands if any(bands[u] == b.name for u in bands)
    ]
    for u in picked:  # nothing in its band is smaller
        assert sizes[u] == min(sizes[v] for v in bands if bands[v] == bands[u])


def test_the_gate_and_fibtui_regimes_name_the_same_representatives(tmp_path: Path, capsys) -> None:
    """One analysis behind a representative gate (core.plan.workspace_regimes): what the TUI's
    Regimes pane shows and gates on, what `fibtui run --workloads rep` and `fibtui parity` gate
    on, and what `fibtui regimes` lists, on the demo with its archived H200 latencies; a pin
    moves all of them."""
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.plan import gate_representatives, workspace_regimes
    from fibtui.core.workspace import open_workspace

    root = tmp_path / "demo"
    create_demo_workspace(root, with_history=True, git_init=False)
    ws = open_workspace(root)
    found = workspace_regimes(ws)
    assert found.report.has_latency and found.hardware  # the archived GPU round's latencies
    gate = gate_representatives(ws)
    assert gate == [r.uuid for r in found.report.representatives] and len(gate) >= 2
    code, out, _ = run_cli(capsys, "regimes", "--workspace", str(root), "--json")
    assert code == 0
    assert [r["uuid"] for r in json.loads(out)["representatives"]] == gate
    extra = next(u for u in found.workloads.uuids if u not in gate)
    regimes.pin(root, extra)
    assert extra in gate_representatives(open_workspace(root))
    code, out, _ = run_cli(capsys, "regimes", "--workspace", str(root), "--json")
    assert extra in [r["uuid"] for r in json.loads(out)["representatives"]]


def test_the_sweep_estimate_counts_jobs_and_paces_them_on_earlier_runs(tmp_path: Path) -> None:
    """core.plan.sweep_estimate, what the TUI asks before a large sweep: the jobs of the whole
    set, and the seconds per job of earlier runs here with the same kind of timing (the demo's
    archived H200 runs for a GPU backend; none for the interpreter)."""
    from fibtui.core.demo import create_demo_workspace
    from fibtui.core.plan import sweep_estimate
    from fibtui.core.runs import history_seconds_per_job
    from fibtui.core.workspace import open_workspace

    root = tmp_path / "demo"
    create_demo_workspace(root, with_history=True, git_init=False)
    ws = open_workspace(root)
    gpu = sweep_estimate(ws, "local", 3, paired=True)
    assert (gpu.workloads, gpu.repeats, gpu.solutions, gpu.jobs) == (50, 3, 2, 300)
    per_job, source = history_seconds_per_job(ws.archive_root, DEMO_DEFINITION, "cupti")
    assert gpu.seconds_per_job == per_job and gpu.history == source
    assert gpu.seconds == pytest.approx(300 * per_job)
    cpu = sweep_estimate(ws, "interpreter", 1, paired=False)
    assert (cpu.jobs, cpu.seconds, cpu.history) == (50, None, None)
