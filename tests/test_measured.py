"""A representative gate says what it knows: per band, the change and its noise-based interval
against tau, and one word (faster / slower / unchanged / mixed / undecided); a sample never says
PROMOTE (docs/measurement.md, "What a sample measured")."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from fibtui.core import stats
from tests.conftest import run_cli
from tests.typed_rows import typed

REPO = Path(__file__).resolve().parents[1]
SWEEP_RUN = "20261129-103545_demo_local"
GATE_RUN = "20261129-103529_demo_local"
#: the demo's representatives today (fibtui regimes on the demo: batch 64, 1, 48)
REPRESENTATIVES = (
    "200a3ebd-2fb4-5e97-8569-f37d1f3d4443",
    "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8",
    "17f81457-465f-55f2-806a-efa293ff429b",
)


def _record(run_id: str) -> dict:
    path = REPO / "optimize_ops" / "runs" / run_id / "run.json"
    assert path.is_file(), (
        "the archived demo round (optimize_ops/runs/) is committed with the repository and is missing"
    )
    return json.loads(path.read_text())


def _demo_floor() -> stats.NoiseFloor:
    sessions = stats.load_aa_file(REPO / "optimize_ops" / stats.AA_FILE)
    return stats.noise_floor(stats.StatsSettings(), sessions, "demo")


def _arms(jobs, uuids=None):
    rows = typed(j for j in jobs if uuids is None or j["uuid"] in uuids)
    return (
        [j for j in rows if j.role == "baseline"],
        [j for j in rows if j.role == "candidate"],
    )


def _bands(rows) -> dict[str, str]:
    return {r.uuid: f"batch_size={r.axes['batch_size']}" for r in rows}


def test_the_archived_representatives_read_mixed() -> None:
    """The three representatives' rows of the archived full run (3 repeats each), as a sample,
    with the demo's noise floor: batch 1 faster by 24%, batch 48 and 64 unchanged; no PROMOTE,
    though the interval across the three workloads says nothing (a t-interval over 2 df)."""
    base, cand = _arms(_record(SWEEP_RUN)["jobs"], REPRESENTATIVES)
    c = stats.paired_verdict(
        base,
        cand,
        scope="sample",
        band_of=_bands(base),
        floor=_demo_floor(),
        band_shares={"batch_size=1": 0.049, "batch_size=48": 0.196, "batch_size=64": 0.2453},
    )
    assert c.verdict == stats.INCONCLUSIVE and c.interval is not None
    assert c.interval.low < 0.7 and c.interval.high > 1.3  # what the gate used to lead with
    m = c.measured
    assert m is not None and m.word == stats.MIXED
    words = {b.band: b.word for b in m.bands}
    assert words == {
        "batch_size=1": "faster",
        "batch_size=48": "unchanged",
        "batch_size=64": "unchanged",
    }
    assert m.text == (
        "mixed: faster at batch_size=1 by 24% (4.9% of latency); unchanged at batch_size=48 "
        "(20% of latency) and batch_size=64 (25% of latency)"
    )
    small = next(b for b in m.bands if b.band == "batch_size=1")
    assert small.ci_high - small.ci_low < 0.02  # measured within a fraction of its change
    assert m.share == pytest.approx(0.4903)


def test_the_archived_representatives_without_aa_history() -> None:
    """With no A/A history the noise comes from the run itself (its repeats and its jobs' paired
    blocks): the same word."""
    base, cand = _arms(_record(SWEEP_RUN)["jobs"], REPRESENTATIVES)
    c = stats.paired_verdict(base, cand, scope="sample", band_of=_bands(base))
    assert c.noise is not None and c.noise.estimated and c.noise.sigma < 0.006
    assert c.measured is not None and c.measured.word == stats.MIXED
    assert [b.word for b in c.measured.bands] == ["faster", "unchanged", "unchanged"]


def test_compare_on_a_representative_record_in_the_demo(capsys, tmp_path) -> None:
    """``fibtui compare`` on a record of the three representatives (taken from the archived
    full run) in a demo workspace with its history: the headline is the word, with the latency
    share of each band from the demo's regime analysis; the JSON carries it as ``measured``."""
    from fibtui.core.demo import create_demo_workspace

    record = _record(SWEEP_RUN)
    demo_ws = create_demo_workspace(tmp_path / "ws", git_init=False)
    record["jobs"] = [j for j in record["jobs"] if j["uuid"] in REPRESENTATIVES]
    record["workload_selection"] = "rep"
    path = tmp_path / "reps.json"
    path.write_text(json.dumps(record))
    code, out, _ = run_cli(capsys, "compare", str(path), "--json", "--workspace", str(demo_ws))
    data = json.loads(out)
    assert code == 0 and data["scope"] == "sample" and data["verdict"] != stats.PROMOTE
    assert data["measured"]["word"] == "mixed"
    assert data["measured"]["text"].startswith("mixed: faster at batch_size=1 by 24% (4.9% of")
    assert (
        "unchanged at batch_size=48 (20% of latency) and batch_size=64 (25% of latency)"
        in (data["measured"]["text"])
    )
    assert "regime analysis of run 20261129-103545_demo_local" in data["measured"]["share_source"]
    code, out, _ = run_cli(capsys, "compare", str(path), "--workspace", str(demo_ws))
    first = out.splitlines()[1]
    assert code == 0 and first.startswith("MIXED  faster at batch_size=1 by 24%")
    # what `fibtui run` prints after a paired run (the same comparison)
    from rich.console import Console

    from fibtui.core.workspace import open_workspace
    from fibtui.services import decide
    from fibtui.verbs.compare import print_verdict

    con = Console(record=True, width=200)
    print_verdict(con, decide.compare(open_workspace(demo_ws), str(path)))
    text = con.export_text()
    assert "MIXED  faster at batch_size=1 by 24% (4.9% of latency); unchanged at" in text
    assert "batch_size=48: ratio 1.0004" in text and "unchanged, 19.6% of latency" in text
    assert "across the 3 workloads: INCONCLUSIVE" in text and "PROMOTE is the full sweep's" in text


def test_aa_representative_gates_read_unchanged() -> None:
    """A/A: the archived gate's baseline against itself, and simulated A/A gates from the archived
    round's noise with 10 repeats: unchanged in every band."""
    base, _ = _arms(_record(GATE_RUN)["jobs"])
    c = stats.paired_verdict(base, base, scope="sample", band_of=_bands(base), floor=_demo_floor())
    assert c.measured is not None and c.measured.word == stats.UNCHANGED
    assert c.verdict != stats.PROMOTE
    rng = random.Random(5)
    full = _record(SWEEP_RUN)["jobs"]
    latency = {j["uuid"]: j["latency_ms"] for j in full if j["role"] == "baseline"}
    axes = {j["uuid"]: j["axes"] for j in full}
    unchanged = 0
    for _ in range(20):
        rows = []
        for r in range(10):
            for u in REPRESENTATIVES:
                b = latency[u] * math.exp(rng.gauss(0, 0.004))
                for role, lat in (
                    ("baseline", b),
                    ("candidate", b * math.exp(rng.gauss(0, 0.005))),
                ):
                    rows.append(
                        {"uuid": u, "axes": axes[u], "role": role, "solution": role,
                         "repeat": r, "status": "PASSED", "latency_ms": lat}
                    )  # fmt: skip
        base, cand = _arms(rows)
        c = stats.paired_verdict(
            base, cand, scope="sample", band_of=_bands(base), floor=_demo_floor()
        )
        assert c.measured is not None and "faster" not in c.measured.text
        unchanged += c.measured.word == stats.UNCHANGED
    assert unchanged >= 19


def test_a_sample_never_says_promote() -> None:
    """Three workloads all 10% faster: the interval across them is below -tau, but a sample says
    "faster" and leaves PROMOTE to the full sweep; the same rows as a full set promote."""
    rows = []
    for r in range(3):
        for i, n in enumerate((1, 8, 64)):
            b = 0.01 * n * (1 + 0.001 * r)
            for role, lat in (("baseline", b), ("candidate", b * 0.9 * (1 + 0.002 * (i - r)))):
                rows.append(
                    {"uuid": f"w{n}", "axes": {"n": n}, "role": role, "repeat": r,
                     "status": "PASSED", "latency_ms": lat}
                )  # fmt: skip
    base, cand = _arms(rows)
    floor = stats.NoiseFloor(0.01, "test", 0.01, aa_sigma=0.005)
    sample = stats.paired_verdict(base, cand, scope="sample", floor=floor)
    assert sample.interval_verdict == stats.PROMOTE and sample.verdict == stats.INCONCLUSIVE
    assert sample.measured is not None and sample.measured.word == stats.FASTER
    assert sample.measured.text.startswith("faster at n=1 by 10%")
    assert any("a sample never promotes" in n for n in sample.notes)
    full = stats.paired_verdict(base, cand, scope="full", floor=floor)
    assert full.verdict == stats.PROMOTE


def _band(name: str, ratio: float, half: float, n: int = 1) -> stats.BandResult:
    return stats.BandResult(
        name, n, 1.0, ratio, 100 * (ratio - 1), ratio, ratio * math.exp(-half),
        ratio * math.exp(half), 0, n, 0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("bands", "word", "text"),
    [
        ([("b=1", 0.76, 0.005), ("b=64", 1.001, 0.004)], "mixed",
         "mixed: faster at b=1 by 24%; unchanged at b=64"),
        ([("b=1", 0.9, 0.005), ("b=2", 0.95, 0.004)], "faster",
         "faster at b=1 by 10% and b=2 by 5.0%"),
        ([("b=2", 1.0, 0.002), ("b=10", 1.001, 0.002), ("b=1", 0.999, 0.002)], "unchanged",
         "unchanged at b=1, b=2 and b=10"),
        ([("b=1", 1.2, 0.01)], "slower", "slower at b=1 by 20%"),
        ([("b=1", 1.008, 0.01)], "undecided", "undecided at b=1 (+0.8%, interval -0.2% to +1.8%)"),
        ([("b=1", 0.8, 0.01), ("b=2", 1.008, 0.01), ("b=3", 1.3, 0.01)], "mixed",
         "mixed: faster at b=1 by 20%; slower at b=3 by 30%; "
         "undecided at b=2 (+0.8%, interval -0.2% to +1.8%)"),
        # an A/A gate on the H200 (2026-12-02, triton_aa, 3 repeats): two bands unchanged and
        # one still open is undecided, never "mixed"
        ([("b=48", 1.0008, 0.0078), ("b=64", 0.9981, 0.0040), ("b=1", 0.9972, 0.0079)],
         "undecided", "undecided: unchanged at b=48 and b=64; undecided at b=1 (-0.3%, interval "
         "-1.1% to +0.5%)"),
        ([("b=1", 0.76, 0.005), ("b=64", 1.0, 0.012)], "undecided",
         "undecided: faster at b=1 by 24%; undecided at b=64 (+0.0%, interval -1.2% to +1.2%)"),
    ],
)  # fmt: skip
def test_words_table(bands, word, text) -> None:
    m = stats.measure([_band(*b) for b in bands], 0.01)
    assert m is not None and m.word == word and m.text == text


def test_block_noise_predicts_the_repeat_spread_of_the_archived_round() -> None:
    """The archived full run's jobs: the noise of one paired log ratio from their blocks (one
    job's own 6 paired blocks, pooled) against the spread of the same ratio from repeat to repeat
    (3 repeats per workload): the blocks err on the wide side, within 40%."""
    base, cand = _arms(_record(SWEEP_RUN)["jobs"])
    blocks = stats.block_noise(base, cand)
    assert blocks is not None and blocks.df == 300 * 5 / 2
    pairs, _ = stats.pair_workloads(base, cand)
    repeats = stats.pair_noise(pairs)  # without A/A history: the repeat-to-repeat spread
    assert repeats.df == 100
    assert 1.0 <= blocks.sigma / repeats.sigma <= 1.4, (blocks.sigma, repeats.sigma)
    # a row without blocks (another harness's file) gives no block estimate
    assert stats.block_noise([replace(r, timing={}) for r in base], cand) is None


def test_an_interval_past_the_float_range_is_infinite_and_its_json_is_null() -> None:
    """Found on the H200: an adaptive gate of torch_eager against the Triton baseline stopped
    after one repeat, and the critical value of that look as Student's t with one degree of
    freedom (about 1e9) gave an interval end exp() could not hold: `fibtui run --json` died with
    OverflowError. The end is infinite now, and JSON says null."""
    iv = stats.Interval(-0.5, 1e9 * 0.9, "t, 1 df")
    assert iv.high == math.inf and iv.low == pytest.approx(math.exp(-0.5))
    band = stats.BandResult("b=1", 1, 1.0, 20.0, 1900.0, 20.0, 0.5, math.inf, 0, 0, 1)
    assert band.to_json()["ci_high"] is None and band.to_json()["ci_low"] == 0.5
    m = stats.measure([band], 0.01)
    assert m is not None and m.word == stats.UNDECIDED and "inf" in m.text
    json.dumps(m.to_json(), allow_nan=False)  # strict JSON: no Infinity
    rows = [
        {"uuid": "w", "axes": {"n": 1}, "role": role, "repeat": 0, "status": "PASSED",
         "latency_ms": lat}
        for role, lat in (("baseline", 0.01), ("candidate", 0.2))
    ]  # fmt: skip
    base, cand = _arms(rows)
    c = stats.paired_verdict(base, cand, scope="sample", floor=_demo_floor())
    c.interval = iv
    out = c.to_json()
    assert out["ci_high"] is None and out["log_ci"][1] == 1e9 * 0.9  # the log end is finite
    json.dumps(out, allow_nan=False)


def test_an_adaptive_stop_is_final_for_its_band() -> None:
    """The H200's v2 A/A gate (2026-12-02, adaptive, cap 10): batch 64 and 48 stopped at look 5
    as unchanged ([0.9914, 1.0089], [0.9904, 1.0078]); at the run's end the pooled noise had grown
    and their intervals reached past 1%. The stops stand: the bands read unchanged."""
    bands = [_band("b=64", 1.0001, 0.0101), _band("b=48", 0.999, 0.0101), _band("b=1", 1.0, 0.0093)]
    assert stats.measure(bands, 0.01).word == "undecided"
    settled = stats.measure(bands, 0.01, settled={"b=64": "unchanged", "b=48": "unchanged"})
    assert settled.word == "unchanged" and settled.text == "unchanged at b=1, b=48 and b=64"
    pairs = [
        SimpleNamespace(band="b=1", uuid="u1"),
        SimpleNamespace(band="b=1", uuid="u2"),
        SimpleNamespace(band="b=2", uuid="u3"),
        SimpleNamespace(band="b=3", uuid="u4"),
    ]
    decided = {"u1": "unchanged", "u2": "faster", "u3": "slower", "u4": "mixed"}
    # a band settles only when every workload of it stopped decided with one word
    assert stats.settled_bands(pairs, decided) == {"b=2": "slower"}
    assert stats.settled_bands(pairs, None) == {}
    record = {
        "adaptive": {
            "workloads": {
                "u1": {"reason": "decided", "word": "unchanged"},
                "u2": {"reason": "cap", "word": "undecided"},
                "u3": {"reason": "gate decided", "word": "faster"},
            }
        }
    }
    # only the rule's own decisions count: a cap or the whole gate's stop leaves a band open
    assert stats.decided_stops(record) == {"u1": "unchanged"}
    assert stats.decided_stops({"adaptive": {"workloads": []}}) == {}
