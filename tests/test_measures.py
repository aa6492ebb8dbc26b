"""The three measures of a verdict (docs/measurement.md, "Three measures"): the mean latency's change
with its interval (which decides), the projected contest score against the reference and against a
named baseline solution, and G; the worst workloads; the line that says why the measures disagree.
Every expected number below is worked out by hand from the rows the test builds."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from fibtui.core import measures, stats
from fibtui.services import decide
from tests.conftest import run_cli
from tests.typed_rows import typed

REPO = Path(__file__).resolve().parents[1]
Z = 1.959963984540054  # the normal's 97.5% quantile


def _rows(latencies: dict[str, tuple[int, float]], repeats: int = 3, wobble: float = 0.0005):
    """uuid -> (batch size, latency ms): rows of ``repeats`` repeats, each off by a little."""
    out = []
    for uuid, (batch, lat) in latencies.items():
        for j in range(repeats):
            out.append(
                {
                    "uuid": uuid,
                    "status": "PASSED",
                    "repeat": j,
                    "axes": {"batch_size": batch},
                    "latency_ms": lat * (1.0 + wobble * (j - 1) * (1 if hash(uuid) % 2 else -1)),
                    "reference_latency_ms": 1.0,
                }
            )
    return typed(out)


def _floor(sigma: float) -> stats.NoiseFloor:
    """A noise floor of tau 1% whose A/A history says one paired ratio has noise ``sigma``."""
    session = stats.AASession("aa", "compare --aa", 0.0, sigma, 50, 3)
    return stats.noise_floor(stats.StatsSettings(), [session], "test")


def test_g_faster_while_the_mean_latency_is_slower_is_not_promote_and_says_why() -> None:
    """Ten small workloads 20% faster and one that holds 91% of the time 10% slower: G reads
    faster beyond the noise (its interval alone would promote), the mean latency +7.3% slower:
    REJECT, with the disagreement line naming the band that holds the time."""
    small = {f"s{i}": (1, 0.001) for i in range(10)}
    base = _rows({**small, "big": (64, 0.1)})
    cand = _rows({**{k: (1, 0.0008) for k in small}, "big": (64, 0.11)})
    c = stats.paired_verdict(base, cand)
    assert c.geomean_ratio is not None and c.geomean_ratio < 1.0
    assert c.interval_verdict == stats.PROMOTE  # G's interval: wholly below -tau
    assert c.g_word == stats.FASTER
    assert c.mean_latency is not None
    # (10 x 0.8 + 110) / (10 x 1 + 100) - 1 = 118 / 110 - 1
    assert c.mean_latency.change == pytest.approx(118 / 110 - 1, rel=1e-3)
    assert c.mean_latency.word == stats.SLOWER
    assert c.verdict != stats.PROMOTE and c.verdict == stats.REJECT
    assert c.disagreement is not None
    head, score = c.disagreement.split("; ")
    assert head == (
        "G faster, mean latency slower: batch_size=64 holds 91% of the time and is 10% slower"
    )
    # the score (the mean of the speedups) is the small workloads' (1000x each against 10x)
    assert score == (
        "score against the reference higher: batch_size=1 gives 100% of the score and its "
        "speedup is 25% higher"
    )
    assert any(line.startswith("the measures disagree: G faster") for line in c.verdict_lines())
    # the mean's part explains by time, not by count: the ten faster workloads are not named
    assert "batch_size=1" not in head


def test_the_mean_latency_interval_from_the_paired_noise_by_hand() -> None:
    """Two workloads, 2 repeats each, A/A sigma 1% (treated as known: the normal's quantile):
    l = log(M_c / M_b) +- z sigma sqrt(sum c_w^2 / r_w) / sum c_w."""
    base = _rows({"a": (1, 1.0), "b": (8, 3.0)}, repeats=2, wobble=0.0)
    cand = _rows({"a": (1, 0.9), "b": (8, 2.7)}, repeats=2, wobble=0.0)
    c = stats.paired_verdict(base, cand, floor=_floor(0.01))
    assert c.noise is not None and c.noise.sigma == pytest.approx(0.01)
    m = c.mean_latency
    assert m is not None
    log_c = math.log(3.6 / 4.0)
    se = 0.01 * math.sqrt((0.9**2 + 2.7**2) / 2) / 3.6
    assert m.log_change == pytest.approx(log_c)
    assert (m.log_low, m.log_high) == pytest.approx((log_c - Z * se, log_c + Z * se))
    assert c.to_json()["mean_latency_interval"] == pytest.approx(
        [math.exp(log_c - Z * se) - 1, math.exp(log_c + Z * se) - 1]
    )
    assert c.mean_latency_verdict == stats.PROMOTE and m.word == stats.FASTER


def test_the_score_against_the_reference_and_a_named_baseline_by_hand() -> None:
    """Three workloads; the reference takes 2, 4 and 8 ms; a named baseline (a FlashInfer
    wrapper, say) 0.08, 0.25 and 0.45 ms. The score is the mean of the per-workload speedups."""
    refs = {"a": 2.0, "b": 4.0, "c": 8.0}
    lat_b = {"a": 0.1, "b": 0.2, "c": 0.4}
    lat_c = {"a": 0.05, "b": 0.2, "c": 0.5}
    wrapper = {"a": 0.08, "b": 0.25, "c": 0.45}

    def rows(lat):
        return typed(
            [
                {
                    "uuid": u,
                    "status": "PASSED",
                    "repeat": j,
                    "axes": {"batch_size": i + 1},
                    "latency_ms": lat[u],
                    "reference_latency_ms": refs[u],
                }
                for i, u in enumerate(lat)
                for j in range(2)
            ]
        )

    named = measures.Numerators("solution flashinfer_wrapper", wrapper)
    c = stats.paired_verdict(rows(lat_b), rows(lat_c), floor=_floor(0.01), score_numerators=[named])
    ref, wrap = c.scores
    # against the reference: (40 + 20 + 16) / 3 and (20 + 20 + 20) / 3
    assert ref.denominator == "reference"
    assert ref.score == pytest.approx(76 / 3) and ref.score_baseline == pytest.approx(20.0)
    assert ref.delta == pytest.approx(76 / 3 - 20)
    se = 0.01 * math.sqrt((40**2 + 20**2 + 16**2) / 2) / 3
    assert (ref.low, ref.high) == pytest.approx((76 / 3 - Z * se, 76 / 3 + Z * se))
    # against the wrapper: (1.6 + 1.25 + 0.9) / 3 and (0.8 + 1.25 + 1.125) / 3
    assert wrap.score == pytest.approx(3.75 / 3) and wrap.score_baseline == pytest.approx(3.175 / 3)
    se = 0.01 * math.sqrt((1.6**2 + 1.25**2 + 0.9**2) / 2) / 3
    assert (wrap.low, wrap.high) == pytest.approx((1.25 - Z * se, 1.25 + Z * se))
    out = c.to_json()
    assert out["score"] == pytest.approx(76 / 3) and out["score_denominator"] == "reference"
    assert out["score_delta"] == pytest.approx(76 / 3 - 20)
    assert out["score_interval"] == pytest.approx([ref.low, ref.high])
    assert [s["denominator"] for s in out["scores"]] == ["reference", "solution flashinfer_wrapper"]
    # the mean latency is slower (0.75 vs 0.7 ms) while the score is higher: they disagree
    assert c.mean_latency is not None and c.mean_latency.change == pytest.approx(0.75 / 0.7 - 1)
    assert c.disagreement is not None and "score against the reference higher" in c.disagreement


def test_the_worst_workloads_are_named_when_the_guard_cannot_be_judged() -> None:
    """One value per workload, no A/A history, no blocks: no noise estimate, the guard is not
    judged; a workload 3x slower is still named, with its ratio and band."""
    base = [
        {"uuid": f"w{i:02d}", "status": "PASSED", "latency_ms": 0.01, "axes": {"batch_size": i}}
        for i in range(20)
    ]
    cand = [dict(r) for r in base]
    cand[7]["latency_ms"] = 0.03
    cand[3]["latency_ms"] = 0.0102
    c = stats.paired_verdict(typed(base), typed(cand))
    assert c.noise is not None and not c.noise.estimated  # the guard cannot be judged
    assert c.to_json()["guard_judged"] is False
    assert c.verdict != stats.PROMOTE
    assert [w.uuid for w in c.worst] == ["w07", "w03"]  # only slowdowns, the largest first
    assert c.worst[0].ratio == pytest.approx(3.0)
    line = c.worst_line()
    assert line is not None and line.startswith("worst: w07 (batch_size=7) +200.0%")
    assert c.to_json()["worst_workloads"][0]["band"] == c.worst[0].band
    assert len(c.worst) <= measures.WORST_COUNT


def test_at_most_three_worst_and_none_when_nothing_is_slower() -> None:
    base = _rows({f"w{i}": (i, 0.01) for i in range(6)})
    cand = _rows({f"w{i}": (i, 0.01 * (1.01 + 0.01 * i)) for i in range(6)})
    c = stats.paired_verdict(base, cand)
    assert [w.uuid for w in c.worst] == ["w5", "w4", "w3"]
    faster = stats.paired_verdict(base, _rows({f"w{i}": (i, 0.008) for i in range(6)}))
    assert faster.worst == [] and faster.worst_line() == "worst: no workload slower"


def test_the_verdict_json_names_the_three_measures() -> None:
    base = _rows({f"w{i}": (i, 0.01) for i in range(6)})
    cand = _rows({f"w{i}": (i, 0.009) for i in range(6)})
    out = stats.paired_verdict(base, cand).to_json()
    for key in (
        "mean_latency_change",
        "mean_latency_interval",
        "mean_latency_verdict",
        "score",
        "score_delta",
        "score_interval",
        "geomean_ratio",
        "worst_workloads",
        "disagreement",
        "verdict_lines",
    ):
        assert key in out, key
    assert out["words"] == {"g": "faster", "mean_latency": "faster", "score": "faster"}
    assert out["disagreement"] is None
    assert out["verdict_lines"][0].startswith("avg latency ")


def test_a_named_baseline_comes_from_the_workspace_setting(tmp_path: Path) -> None:
    """``[score] baseline = NAME``: that solution's latencies from the compared run."""
    (tmp_path / "fibtui.toml").write_text('[score]\nbaseline = "wrapper"\n')
    ws = SimpleNamespace(root=tmp_path, archive_root=tmp_path / "optimize_ops")
    table = SimpleNamespace(
        rows=[
            SimpleNamespace(uuid="a", solution="wrapper", status="PASSED", latency_ms=0.5),
            SimpleNamespace(uuid="a", solution="wrapper", status="PASSED", latency_ms=0.7),
            SimpleNamespace(uuid="b", solution="other", status="PASSED", latency_ms=0.1),
        ],
        definition="d",
    )
    nums = decide.score_numerators(ws, [SimpleNamespace(table=table)], stats.TimingKey("cupti"))
    assert [(n.denominator, dict(n.latencies)) for n in nums] == [
        ("solution wrapper", {"a": pytest.approx(0.6)})
    ]
    (tmp_path / "fibtui.toml").write_text("[score]\nbaseline = 3\n")
    from fibtui.core.errors import InputError

    with pytest.raises(InputError, match="score.baseline"):
        decide.score_numerators(ws, [], stats.TimingKey("cupti"))


def test_the_archived_round_still_promotes_under_the_mean_latency_rule() -> None:
    """The demo round measured on the H200 (50 workloads x 3 repeats) was promoted on G; the mean
    latency, -5.15% with its interval wholly below -tau, promotes it as well."""
    record = json.loads(
        (REPO / "optimize_ops" / "runs" / "20261129-103545_demo_local" / "run.json").read_text()
    )
    sessions = stats.load_aa_file(REPO / "optimize_ops" / stats.AA_FILE)
    floor = stats.noise_floor(stats.StatsSettings(), sessions, "demo")
    base = typed(j for j in record["jobs"] if j["role"] == "baseline")
    cand = typed(j for j in record["jobs"] if j["role"] == "candidate")
    c = stats.paired_verdict(base, cand, floor=floor)
    assert c.verdict == stats.PROMOTE and c.mean_latency_verdict == stats.PROMOTE
    assert c.mean_latency is not None and c.mean_latency.change == pytest.approx(-0.0515, abs=5e-4)
    assert c.mean_latency.high < -0.01
    assert c.disagreement is None  # G and the mean agree: faster


def test_compare_shows_avg_and_p95_latency_before_g(capsys, tmp_path: Path) -> None:
    from fibtui.core.demo import create_demo_workspace

    ws = create_demo_workspace(tmp_path / "demo", git_init=False)
    code, out, _ = run_cli(capsys, "compare", "20261129-103545_demo_local", "--workspace", str(ws))
    assert code == 0
    lines = out.splitlines()
    avg = next(i for i, x in enumerate(lines) if x.startswith("avg latency 7.207 -> 6.836 us"))
    g = next(i for i, x in enumerate(lines) if x.startswith("G 0.8974"))
    assert avg < g and "p95 16.771 -> 16.763 us" in lines[avg]
    assert "against the reference (host-timed)" in lines[g]
    assert lines[g + 1].startswith("worst: ")


def test_a_promote_whose_score_drops_says_so() -> None:
    """The other way round: the workload that holds the time 10% faster, ten small ones 4% slower
    (inside the guard's 5%): the mean latency promotes, while G points slower and the projected
    score (the small workloads' speedups dominate it) says slower; the line names both."""
    small = {f"s{i}": (1, 0.001) for i in range(10)}
    base = _rows({**small, "big": (64, 0.1)})
    cand = _rows({**{k: (1, 0.00104) for k in small}, "big": (64, 0.09)})
    c = stats.paired_verdict(base, cand)
    assert c.verdict == stats.PROMOTE and not c.guard
    # G is +2.6% but undecided across workloads this different (a t-interval over 10 df)
    assert c.geomean_ratio is not None and c.geomean_ratio > 1.02 and c.g_word == stats.UNDECIDED
    assert c.score is not None and c.score.word == stats.SLOWER
    assert c.disagreement == (
        "G undecided, mean latency faster: batch_size=64 holds 91% of the time and is 10% faster; "
        "score against the reference lower: batch_size=1 gives 100% of the score and its speedup "
        "is 3.8% lower"
    )
