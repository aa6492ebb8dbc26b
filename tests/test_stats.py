"""fibtui.core.stats: pairing, intervals, noise floor, verdicts, guard, bands, leaderboard, and
``fibtui compare``."""

from __future__ import annotations

import json
import math
import random
import uuid as uuidlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fibtui.core import stats
from fibtui.core.errors import InputError
from fibtui.core.results import ResultRow, load_results
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
GATE_RUN = "20261129-103529_demo_local"
SWEEP_RUN = "20261129-103545_demo_local"


def rows(
    latencies: dict[str, list[float]],
    axes: dict[str, dict[str, int]] | None = None,
    statuses: dict[str, str] | None = None,
) -> list[ResultRow]:
    out = []
    for uuid, values in latencies.items():
        for j, lat in enumerate(values):
            status = (statuses or {}).get(uuid, "PASSED")
            out.append(
                {
                    "uuid": uuid,
                    "status": status,
                    "latency_ms": lat if status == "PASSED" else None,
                    "repeat": j,
                    "axes": (axes or {}).get(uuid, {}),
                }
            )
    return [ResultRow.of(r) for r in out]


# --------------------------------------------------------------------------------------------
# Distributions and corrections
# --------------------------------------------------------------------------------------------


def test_t_quantiles_match_the_tables() -> None:
    assert stats.t_quantile(0.975, 1.0) == pytest.approx(12.706, abs=1e-3)
    assert stats.t_quantile(0.975, 8.0) == pytest.approx(2.306, abs=1e-3)
    assert stats.t_quantile(0.975, 30.0) == pytest.approx(2.042, abs=1e-3)
    assert stats.t_quantile(0.975, None) == pytest.approx(1.95996, abs=1e-4)
    assert stats.t_quantile(0.05, 4.0) == pytest.approx(-2.132, abs=1e-3)
    for df in (1.0, 3.0, 17.0):
        for t in (-3.0, -0.5, 0.0, 1.2, 4.0):
            assert stats.t_cdf(t, df) + stats.t_cdf(-t, df) == pytest.approx(1.0, abs=1e-12)


def test_holm_steps_down_and_stops_at_the_first_failure() -> None:
    assert stats.holm([0.001, 0.04, 0.2], alpha=0.05) == [True, False, False]
    assert stats.holm([0.01, 0.02, 0.03], alpha=0.1) == [True, True, True]
    assert stats.holm([0.3, 0.001], alpha=0.05) == [False, True]
    assert stats.holm([], alpha=0.05) == []


# --------------------------------------------------------------------------------------------
# Pairing and summaries
# --------------------------------------------------------------------------------------------


def test_pairs_repeat_j_with_repeat_j_else_log_of_means() -> None:
    base = rows({"a": [1.0, 2.0], "b": [1.0]})
    cand = rows({"a": [0.5, 2.0], "b": [2.0]})
    cand[2].repeat = None  # workload b: no shared repeat numbers -> log of means
    pairs, unpaired = stats.pair_workloads(base, cand)
    by = {p.uuid: p for p in pairs}
    assert by["a"].paired_by_repeat and by["a"].log_ratio == pytest.approx(
        (math.log(0.5) + 0.0) / 2
    )
    assert not by["b"].paired_by_repeat and by["b"].log_ratio == pytest.approx(math.log(2.0))
    assert unpaired == []


def test_arm_summary_means_across_repeats_and_run_to_run_variance() -> None:
    base = rows({"a": [1.0, 3.0], "b": [3.0, 5.0]})
    arm = stats.summarize_arm("base", base)
    assert arm.repeat_means_ms == [2.0, 4.0]
    assert arm.mean_latency_ms == pytest.approx(3.0)
    assert arm.best_repeat_mean_ms == pytest.approx(2.0)  # context only, never the threshold
    assert arm.run_to_run_cv == pytest.approx(math.sqrt(2.0) / 3.0)
    assert arm.p95_latency_ms == pytest.approx(((1 + 0.95 * 2) + (3 + 0.95 * 2)) / 2)
    comp = stats.paired_verdict(base, base)
    assert comp.to_json()["threshold"]["baseline_mean_ms"] == pytest.approx(3.0)


# --------------------------------------------------------------------------------------------
# A/A: never PROMOTE
# --------------------------------------------------------------------------------------------


def _aa_trial(
    rng: random.Random, n: int, repeats: int, noise: float
) -> tuple[list[ResultRow], list[ResultRow]]:
    base, cand = [], []
    for w in range(n):
        true = rng.uniform(0.002, 0.02)
        axes = {"batch_size": 2 ** (w % 6)}
        for j in range(repeats):
            base.append(
                {
                    "uuid": f"w{w}",
                    "status": "PASSED",
                    "latency_ms": true * math.exp(rng.gauss(0, noise)),
                    "repeat": j,
                    "axes": axes,
                }
            )
            cand.append(
                {
                    "uuid": f"w{w}",
                    "status": "PASSED",
                    "latency_ms": true * math.exp(rng.gauss(0, noise)),
                    "repeat": j,
                    "axes": axes,
                }
            )
    return [ResultRow.of(r) for r in base], [ResultRow.of(r) for r in cand]


@pytest.mark.parametrize("path", ["t", "z"])
def test_aa_noise_never_promotes(path: str) -> None:
    """1,000 simulated A/A sessions at 1-3% noise per measurement: PROMOTE at most at the stated
    error rate, and with tau = 0 (the interval alone) still within that rate plus sampling slack."""
    rng = random.Random(20261129 if path == "t" else 7)
    trials = 1000
    promoted = promoted_no_tau = 0
    error_rate = None
    no_tau = stats.StatsSettings(min_gain=0.0)
    for i in range(trials):
        noise = (0.01, 0.02, 0.03)[i % 3]
        if path == "t":
            base, cand = _aa_trial(rng, 12, 3, noise)
            floor = floor0 = None
        else:
            base, cand = _aa_trial(rng, 54, 3, noise)
            sigma = noise * math.sqrt(2.0)  # one paired log ratio: two noisy measurements
            floor = stats.NoiseFloor(0.01, "test", 0.01, aa_sessions=5, aa_sigma=sigma)
            floor0 = stats.NoiseFloor(0.0, "test", 0.0, aa_sessions=5, aa_sigma=sigma)
        comp = stats.paired_verdict(base, cand, floor=floor)
        error_rate = comp.error_rate
        promoted += comp.verdict == stats.PROMOTE
        promoted_no_tau += (
            stats.paired_verdict(base, cand, settings=no_tau, floor=floor0).verdict == stats.PROMOTE
        )
        if path == "z":
            assert comp.interval is not None and comp.interval.method.startswith("z")
        else:
            assert comp.interval is not None and comp.interval.method.startswith("t across 12")
    assert error_rate == pytest.approx(0.025)
    assert promoted / trials <= error_rate
    assert promoted_no_tau / trials <= error_rate + 3 * math.sqrt(
        error_rate * (1 - error_rate) / trials
    )


def test_aa_bootstrap_path_never_promotes() -> None:
    rng = random.Random(11)
    verdicts = []
    for i in range(120):
        base, cand = _aa_trial(rng, 54, 1, (0.01, 0.02, 0.03)[i % 3])
        comp = stats.paired_verdict(base, cand)
        assert comp.interval is not None and comp.interval.method.startswith("bootstrap over 54")
        verdicts.append(comp.verdict)
    assert stats.PROMOTE not in verdicts


def test_a_file_compared_with_itself_is_not_promoted() -> None:
    base = rows({f"w{i}": [0.001 * (i + 1)] for i in range(10)})
    comp = stats.paired_verdict(base, base)
    assert comp.verdict == stats.REJECT and comp.geomean_ratio == pytest.approx(1.0)


def test_bootstrap_is_deterministic() -> None:
    rng = random.Random(3)
    base, cand = _aa_trial(rng, 30, 1, 0.05)
    a = stats.paired_verdict(base, cand)
    b = stats.paired_verdict(base, cand)
    assert (a.interval.log_low, a.interval.log_high) == (b.interval.log_low, b.interval.log_high)


# --------------------------------------------------------------------------------------------
# The 54-workload acceptance cases (shared file and a synthetic one)
# --------------------------------------------------------------------------------------------


def _synthetic_results(path: Path) -> Path:
    rng = random.Random(54)
    definition = "synthetic_gdn_decode"
    results = {}
    for i in range(54):
        batch = (1, 4, 8, 16, 32, 48, 64)[i % 7]
        results[str(uuidlib.UUID(int=rng.getrandbits(128)))] = {
            "status": "PASSED",
            "latency_ms": round(0.002 + 0.0002 * batch * rng.uniform(0.9, 1.1), 6),
            "reference_latency_ms": 1.0,
            "speedup_factor": 300.0,
        }
    path.write_text(json.dumps({"definition": definition, "results": {definition: results}}))
    return path


def _scaled(src: Path, dest: Path, factor: float, slow: str | None = None) -> Path:
    data = json.loads(src.read_text())
    definition = data.get("definition") or next(iter(data["results"]))
    for uuid, entry in data["results"][definition].items():
        if entry.get("status") == "PASSED":
            entry["latency_ms"] = entry["latency_ms"] * factor * (3.0 if uuid == slow else 1.0)
    dest.write_text(json.dumps(data))
    return dest


def _jittered(src: Path, dest: Path, spread: float) -> Path:
    """The same results measured again: every latency off by up to +-spread (seeded)."""
    rng = random.Random(7)
    data = json.loads(src.read_text())
    definition = data.get("definition") or next(iter(data["results"]))
    for entry in data["results"][definition].values():
        if entry.get("status") == "PASSED":
            entry["latency_ms"] = entry["latency_ms"] * (1.0 + rng.uniform(-spread, spread))
    dest.write_text(json.dumps(data))
    return dest


def _acceptance(capsys, base_file: Path, tmp_path: Path) -> None:
    table = load_results(base_file)
    assert len(table.rows) == 54
    uuids = [r.uuid for r in table.rows]
    # one latency per workload and no A/A history: no noise estimate, so no guard and no promotion
    cand = _scaled(base_file, tmp_path / "cand_nohistory.json", 0.95)
    code, out, _ = run_cli(capsys, "compare", str(base_file), str(cand), "--json")
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "INCONCLUSIVE" and data["interval_verdict"] == "PROMOTE"
    assert data["guard_judged"] is False and data["guard"] == [] and data["per_band"] == []
    assert any("cannot be judged" in n for n in data["notes"])
    slow = uuids[17]
    cand = _scaled(base_file, tmp_path / "cand_slow_nohistory.json", 0.95, slow=slow)
    code, out, _ = run_cli(capsys, "compare", str(base_file), str(cand), "--json")
    data = json.loads(out)
    assert (
        data["verdict"] == "INCONCLUSIVE"
        and data["blocked_by"] == []
        and data["guard_judged"] is False
    )
    # an A/A session of the same key (definition, device, timing kind) gives the noise estimate
    ws = tmp_path / "ws"
    (ws / "optimize_ops").mkdir(parents=True)
    again = _jittered(base_file, tmp_path / "again.json", 0.005)
    code, out, err = run_cli(
        capsys, "compare", str(base_file), str(again), "--aa", "--workspace", str(ws)
    )
    assert code == 0, err
    session = json.loads((ws / "optimize_ops" / "benchmarks" / "aa.jsonl").read_text())
    assert (
        session["timing_kind"] == "flashinfer-bench" and session["definition"] == table.definition
    )
    for factor, expect in ((0.95, "PROMOTE"), (1.00, "REJECT")):
        cand = _scaled(base_file, tmp_path / f"cand_{factor}.json", factor)
        code, out, _ = run_cli(
            capsys, "compare", str(base_file), str(cand), "--json", "--workspace", str(ws)
        )
        data = json.loads(out)
        assert code == 0 and data["verdict"] == expect, data["recommendation"]
        assert data["workloads"] == 54 and data["complete"] and data["blocked_by"] == []
        for key in ("geomean_ratio", "ci_low", "ci_high", "tau", "tau_source", "per_band"):
            assert key in data
        assert data["geomean_ratio"] == pytest.approx(factor)
        assert data["tau"] == pytest.approx(0.01) and data["tau_source"].startswith(
            "default 1%; A/A history ("
        )
        assert "1 session" in data["tau_source"] and data["guard_judged"] is True
    cand = _scaled(base_file, tmp_path / "cand_slow.json", 0.95, slow=slow)
    code, out, _ = run_cli(
        capsys, "compare", str(base_file), str(cand), "--json", "--workspace", str(ws)
    )
    data = json.loads(out)
    assert data["verdict"] != "PROMOTE"
    assert data["verdict"] == "BLOCKED"
    assert len(data["blocked_by"]) >= 1 and any(slow in b for b in data["blocked_by"])
    assert [g["name"].split()[0] for g in data["guard"] if g["kind"] == "workload"] == [slow]


def test_54_workloads_synthetic(capsys, tmp_path: Path) -> None:
    _acceptance(capsys, _synthetic_results(tmp_path / "base.json"), tmp_path)


@pytest.mark.shared
def test_54_workloads_shared_retained_run(capsys, shared, tmp_path: Path) -> None:
    _acceptance(
        capsys,
        shared("fixtures", "artifacts", "gdn_decode_qk4_v8_d128_k_last__retained_run.json"),
        tmp_path,
    )


def test_baseline_with_one_failed_workload_is_incomplete(capsys, tmp_path: Path) -> None:
    base_file = _synthetic_results(tmp_path / "base.json")
    data = json.loads(base_file.read_text())
    definition = data["definition"]
    bad = next(iter(data["results"][definition]))
    data["results"][definition][bad] = {"status": "RUNTIME_ERROR", "error": "illegal memory access"}
    broken = tmp_path / "base_failed.json"
    broken.write_text(json.dumps(data))
    cand = _scaled(base_file, tmp_path / "cand.json", 0.9)
    code, out, _ = run_cli(capsys, "compare", str(broken), str(cand), "--json")
    result = json.loads(out)
    assert code == 1  # as fibtui run exits for the same rows (a job failed)
    # the row ran and is wrong: INCORRECT (INCOMPLETE is for jobs that never ran)
    assert result["verdict"] == "INCORRECT" and result["complete"] is False
    assert any(bad in f and "RUNTIME_ERROR" in f for f in result["failures"])
    assert result["interval_verdict"] == "PROMOTE"  # the statistics alone would, the rule does not


# --------------------------------------------------------------------------------------------
# Bands, guard, dispatch candidates, leaderboard
# --------------------------------------------------------------------------------------------


def _banded(
    effects: dict[int, float],
    per_band: int = 6,
    repeats: int = 3,
    noise: float = 0.005,
    seed: int = 5,
):
    rng = random.Random(seed)
    base, cand = [], []
    for batch, effect in effects.items():
        for i in range(per_band):
            true = 0.001 * batch + 0.002
            for j in range(repeats):
                common = {
                    "uuid": f"b{batch}-{i}",
                    "status": "PASSED",
                    "repeat": j,
                    "axes": {"batch_size": batch},
                }
                base.append({**common, "latency_ms": true * math.exp(rng.gauss(0, noise))})
                cand.append({**common, "latency_ms": true * effect * math.exp(rng.gauss(0, noise))})
    return [ResultRow.of(r) for r in base], [ResultRow.of(r) for r in cand]


def test_per_band_breakdown_like_a_hand_summary() -> None:
    base, cand = _banded({1: 0.75, 8: 0.90, 64: 1.0})
    comp = stats.paired_verdict(base, cand)
    bands = {b.band: b for b in comp.per_band}
    assert set(bands) == {"batch_size=1", "batch_size=8", "batch_size=64"}
    assert bands["batch_size=1"].wins == 6 and bands["batch_size=1"].change_pct == pytest.approx(
        -25, abs=1.5
    )
    assert (
        bands["batch_size=64"].ties + bands["batch_size=64"].wins + bands["batch_size=64"].losses
        == 6
    )
    assert bands["batch_size=64"].ci_low < 1.0 < bands["batch_size=64"].ci_high
    assert comp.verdict == stats.PROMOTE and comp.dispatch_bands == []


def test_local_win_with_global_non_win_is_a_dispatch_candidate() -> None:
    base, cand = _banded({1: 0.80, 8: 1.02, 16: 1.03, 32: 1.03, 64: 1.02})
    comp = stats.paired_verdict(base, cand)
    assert comp.verdict != stats.PROMOTE
    assert comp.dispatch_bands == ["batch_size=1"]
    assert "archive as a dispatch candidate for band batch_size=1" in comp.recommendation()


def test_guard_names_a_regressing_band() -> None:
    """The mean latency faster beyond tau, one small band 10% slower: BLOCKED, the band named."""
    base, cand = _banded({1: 1.10, 8: 0.70, 16: 0.70, 32: 0.70, 64: 0.70})
    comp = stats.paired_verdict(base, cand)
    assert comp.mean_latency_verdict == stats.PROMOTE
    assert comp.verdict == stats.BLOCKED
    assert any(b.startswith("band batch_size=1") for b in comp.blocked_by)


def test_a_regressing_band_that_holds_the_time_rejects() -> None:
    """G says faster (four small bands 30% faster) but batch 64, most of the time, is 10% slower:
    the mean latency is not faster, so REJECT (not BLOCKED), the guard still names the band, and
    the disagreement line says why."""
    base, cand = _banded({1: 0.70, 2: 0.70, 4: 0.70, 8: 0.70, 64: 1.10})
    comp = stats.paired_verdict(base, cand)
    assert comp.interval_verdict == stats.PROMOTE  # G's interval alone would promote
    assert comp.mean_latency_verdict == stats.REJECT
    assert comp.verdict == stats.REJECT
    assert any(b.startswith("band batch_size=64") for b in comp.blocked_by)
    assert comp.disagreement is not None
    assert comp.disagreement.startswith("G faster, mean latency ")
    assert "batch_size=64 holds 74% of the time and is 10% slower" in comp.disagreement


def test_leaderboard_ranks_by_mean_then_p95_then_variance() -> None:
    base = rows({"a": [1.0, 1.0], "b": [2.0, 2.0], "c": [3.0, 3.0]})
    fast = rows({"a": [0.8, 0.8], "b": [1.6, 1.6], "c": [2.4, 2.4]})
    same_mean_lower_p95 = rows({"a": [0.9, 0.9], "b": [1.8, 1.8], "c": [2.7, 2.7]})
    same_mean_higher_p95 = rows({"a": [1.2, 1.2], "b": [1.2, 1.2], "c": [3.0, 3.0]})
    steady = rows({"a": [0.9, 0.9], "b": [1.8, 1.8], "c": [2.7, 2.7]})
    jittery = rows({"a": [0.8, 1.0], "b": [1.7, 1.9], "c": [2.6, 2.8]})
    broken = rows(
        {"a": [0.1, 0.1], "b": [0.1, 0.1], "c": [0.1, 0.1]}, statuses={"c": "INCORRECT_NUMERICAL"}
    )
    board = stats.leaderboard(
        base,
        {
            "jittery": jittery,
            "higher_p95": same_mean_higher_p95,
            "broken": broken,
            "fast": fast,
            "lower_p95": same_mean_lower_p95,
            "steady": steady,
        },
    )
    names = [e.name for e in board]
    assert names[0] == "fast"
    assert names.index("lower_p95") < names.index("higher_p95")
    assert names.index("steady") < names.index("jittery")
    assert names[-1] == "broken" and board[-1].comparison.verdict == stats.INCORRECT
    assert [e.rank for e in board] == list(range(1, len(board) + 1))
    assert all(e.comparison.verdict for e in board)


# --------------------------------------------------------------------------------------------
# Noise floor and settings
# --------------------------------------------------------------------------------------------


def test_tau_states_its_source() -> None:
    assert stats.noise_floor().source == "default 1%"
    assert (
        stats.noise_floor(stats.StatsSettings(min_gain=0.02, min_gain_source="fibtui.toml")).source
        == "fibtui.toml [stats] min_gain 2%"
    )
    quiet = [stats.AASession("s", "paired-run", 0.001, 0.005, 50, 1)]
    floor = stats.noise_floor(sessions=quiet)
    assert floor.tau == pytest.approx(0.01) and floor.source.startswith(
        "default 1%; A/A history: 1 session"
    )
    loud = [
        stats.AASession(f"s{i}", "compare --aa", (-1) ** i * 0.001 * i, 0.01, 50, 3)
        for i in range(40)
    ]
    floor = stats.noise_floor(sessions=loud)
    assert floor.tau > 0.03 and floor.source.startswith("A/A history: 40 sessions")
    assert floor.aa_sigma == pytest.approx(0.01)


def test_settings_from_fibtui_toml(tmp_path: Path) -> None:
    (tmp_path / "fibtui.toml").write_text(
        "[stats]\nmin_gain = 0.02  # two percent\ntie_band = 0.01\n"
    )
    s = stats.StatsSettings.from_workspace(tmp_path)
    assert s.min_gain == 0.02 and s.tie_band == 0.01 and s.min_gain_source == "fibtui.toml"
    (tmp_path / "fibtui.toml").write_text("[stats]\nmin_gain = 'lots'\n")
    with pytest.raises(InputError, match="stats.min_gain"):
        stats.StatsSettings.from_workspace(tmp_path)


def test_aa_file_round_trip(tmp_path: Path) -> None:
    session = stats.AASession(
        "a vs b", "compare --aa", 0.002, 0.006, 50, 1, "d", "NVIDIA H200", "REJECT", "cupti"
    )
    cpu = stats.AASession(
        "c vs d", "compare --aa", 0.3, 0.2, 50, 1, "d", None, "REJECT", "cpu-interpreter"
    )
    other = stats.AASession(
        "e vs f", "compare --aa", 0.001, 0.004, 50, 1, "other_def", "NVIDIA H200", "REJECT", "cupti"
    )
    for s in (session, cpu, other):
        stats.record_aa_session(tmp_path, s)
    assert stats.load_aa_file(tmp_path / stats.AA_FILE) == [session, cpu, other]
    # keyed by (definition, device, timing kind); CPU-interpreter sessions never count
    assert stats.aa_sessions(tmp_path, "NVIDIA H200", definition="d", timing_kind="cupti") == [
        session
    ]
    assert stats.aa_sessions(tmp_path, "NVIDIA B200", definition="d", timing_kind="cupti") == []
    assert stats.aa_sessions(tmp_path, None, definition="d", timing_kind="cpu-interpreter") == []
    assert stats.aa_sessions(tmp_path, "NVIDIA H200") == [session, other]
    # a line written before the timing kind was recorded: a GPU session (it names a GPU)
    (tmp_path / stats.AA_FILE).write_text(
        '{"log_g": 0.001, "gpu": "NVIDIA H200", "definition": "d", "workloads": 5}\n'
        '{"log_g": 0.002, "definition": "d", "workloads": 5}\n'
    )
    legacy = stats.load_aa_file(tmp_path / stats.AA_FILE)
    assert [s.timing_kind for s in legacy] == ["cupti", None]
    assert len(stats.aa_sessions(tmp_path, "NVIDIA H200", definition="d", timing_kind="cupti")) == 1


def test_aa_lines_with_infinite_or_wrong_counts_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "aa.jsonl"
    for line, field in (
        ('{"log_g": 0.1, "workloads": Infinity}', "workloads"),
        ('{"log_g": 0.1, "repeats": 1e400}', "repeats"),
        ('{"log_g": 0.1, "workloads": 2.5}', "workloads"),
        ('{"log_g": 0.1, "sigma": -1}', "sigma"),
        ('{"log_g": 0.1, "gpu": 5}', "gpu"),
    ):
        path.write_text('{"log_g": 0.0}\n' + line + "\n")
        with pytest.raises(InputError) as err:
            stats.load_aa_file(path)
        assert str(err.value).startswith(f"{path}:2: field '{field}':"), str(err.value)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.just('{"log_g": 0.1}'),
            st.just('{"log_g": "x"}'),
            st.just("[1, 2]"),
            st.just('{"sigma": 1}'),
        ),
        max_size=5,
    )
)
def test_aa_file_parser_never_crashes(tmp_path: Path, lines: list[str]) -> None:
    path = tmp_path / "aa.jsonl"
    path.write_text(
        "\n".join(line.replace("\n", " ").replace("\r", " ") for line in lines), encoding="utf-8"
    )
    try:
        out = stats.load_aa_file(path)
    except InputError as exc:
        assert str(path) in str(exc)
    else:
        assert all(isinstance(s, stats.AASession) for s in out)


# --------------------------------------------------------------------------------------------
# fibtui compare on fibtui's own runs (the demo's archived round)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def demo_history(tmp_path: Path) -> Path:
    from fibtui.core.demo import create_demo_workspace

    assert (REPO / "optimize_ops" / "runs" / SWEEP_RUN).is_dir(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )
    return create_demo_workspace(tmp_path / "ws", git_init=False)


def test_compare_a_paired_run_id(capsys, demo_history: Path) -> None:
    code, out, _ = run_cli(capsys, "compare", SWEEP_RUN, "--json", "--workspace", str(demo_history))
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "PROMOTE" and data["scope"] == "full"
    assert data["baseline"] == "triton" and data["candidate"] == "v2_smallb_splitv"
    assert data["workloads"] == 50 and data["complete"]
    assert data["ci_high"] < math.exp(-data["tau"])
    assert (
        "A/A history (demo_gdn_decode_qk4_v8_d128_k_last, NVIDIA H200, cupti): 2 sessions"
        in data["tau_source"]
    )
    assert {b["band"] for b in data["per_band"]} >= {"batch_size=1", "batch_size=64"}
    code, out, _ = run_cli(capsys, "compare", GATE_RUN, "--json", "--workspace", str(demo_history))
    gate = json.loads(out)
    assert (
        gate["scope"] == "sample" and gate["workloads"] == 3
    )  # the regime representatives (2-3 above 40 workloads)
    code, out, _ = run_cli(capsys, "compare", SWEEP_RUN, "--workspace", str(demo_history))
    assert code == 0 and "PROMOTE" in out and "batch_size=1" in out


def test_compare_aa_records_a_session(capsys, demo_history: Path) -> None:
    runs = demo_history / "optimize_ops" / "runs"
    code, out, _ = run_cli(
        capsys,
        "compare",
        str(runs / SWEEP_RUN),
        str(runs / SWEEP_RUN),
        "--solution-base",
        "triton",
        "--solution-cand",
        "triton",
        "--aa",
        "--json",
        "--workspace",
        str(demo_history),
    )
    data = json.loads(out)
    assert code == 0 and data["verdict"] == "REJECT"
    sessions = stats.load_aa_file(demo_history / "optimize_ops" / stats.AA_FILE)
    assert len(sessions) == 3 and sessions[-1].log_g == 0.0


def test_compare_bad_input_is_one_line(capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(
        capsys, "compare", str(tmp_path / "nope.json"), str(tmp_path / "nope2.json")
    )
    assert code == 2 and "not a result file" in err and "Traceback" not in err


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(["min_gain", "confidence", "guard_margin", "tie_band", "other"]),
    st.one_of(
        st.floats(allow_nan=False, allow_infinity=False, width=32),
        st.integers(-5, 5),
        st.booleans(),
        st.text(alphabet="abc", max_size=3),
    ),
)
def test_stats_settings_parser(tmp_path: Path, key: str, value) -> None:
    import tomlkit

    (tmp_path / "fibtui.toml").write_text(tomlkit.dumps({"stats": {key: value}}))
    try:
        s = stats.StatsSettings.from_workspace(tmp_path)
    except InputError as exc:
        assert f"stats.{key}" in str(exc)
    else:
        assert 0.0 <= s.min_gain <= 0.5 and 0.5 <= s.confidence < 1.0


def test_compare_several_candidates_prints_a_leaderboard(capsys, tmp_path: Path) -> None:
    rng = random.Random(9)
    jobs = []
    for w in range(8):
        axes = {"batch_size": 2**w}
        true = 0.001 * (w + 1)
        for j in range(2):
            for name, role, factor in (
                ("base", "baseline", 1.0),
                ("fast", "candidate", 0.8),
                ("slow", "candidate", 1.2),
            ):
                jobs.append(
                    {
                        "uuid": f"w{w}",
                        "axes": axes,
                        "solution": name,
                        "role": role,
                        "repeat": j,
                        "status": "PASSED",
                        "latency_ms": true * factor * math.exp(rng.gauss(0, 0.003)),
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
    code, out, _ = run_cli(capsys, "compare", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and [e["name"] for e in data["leaderboard"]] == ["fast", "slow"]
    assert [e["verdict"] for e in data["leaderboard"]] == ["PROMOTE", "REJECT"]
    code, out, _ = run_cli(capsys, "compare", str(path))
    assert code == 0 and "leaderboard" in out and out.index("fast") < out.index("slow")
    code, out, _ = run_cli(capsys, "compare", str(path), "--solution-cand", "slow", "--json")
    assert json.loads(out)["candidate"] == "slow"


def _run_file(path: Path, definition: str, solution: str, factor: float) -> Path:
    jobs = [
        {
            "uuid": f"w{w}",
            "axes": {"batch_size": 2**w},
            "solution": solution,
            "repeat": 0,
            "status": "PASSED",
            "latency_ms": 0.001 * (w + 1) * factor,
        }
        for w in range(4)
    ]
    path.write_text(
        json.dumps(
            {"format": "fibtui-run", "definition": definition, "run_id": path.stem, "jobs": jobs}
        )
    )
    return path


def test_compare_refuses_files_of_different_definitions(capsys, tmp_path: Path) -> None:
    base = _run_file(tmp_path / "a.json", "gemm_n128", "base", 1.0)
    cand = _run_file(tmp_path / "b.json", "rmsnorm_h4096", "cand", 1.2)
    code, out, err = run_cli(capsys, "compare", str(base), str(cand), "--json")
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "gemm_n128" in err and "rmsnorm_h4096" in err and "--allow-definitions" in err
    code, out, _ = run_cli(capsys, "compare", str(base), str(cand), "--json", "--allow-definitions")
    assert code == 0 and json.loads(out)["workloads"] == 4
    # one definition on both sides: compared as before
    same = _run_file(tmp_path / "c.json", "gemm_n128", "cand", 1.2)
    code, out, _ = run_cli(capsys, "compare", str(base), str(same), "--json")
    assert code == 0 and json.loads(out)["workloads"] == 4
