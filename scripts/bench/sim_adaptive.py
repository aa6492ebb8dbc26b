"""Adaptive repeats against the fixed design, on the CPU: simulations from the noise of the
archived demo round (docs/measurement.md, "Adaptive repeats").

    python3 scripts/bench/sim_adaptive.py [--runs N] [--rule-runs N] [--seed S]

1. The rule alone: the repeated intervals of one workload over many simulated A/A pairs (the
   same distribution on both arms). How often it decides "faster" (at tau = 0, where any
   interval wholly below 0 is a false "faster"; and at the demo's tau), against the nominal
   one-sided error (1 - confidence) / 2, and the same count for a naive rule that looks with the
   fixed design's z after every repeat; the two spending functions; then A/A representative
   gates through the real rule and scheduler, with the noise known and with the noise estimated
   from the run's own repeats (the archived round's, which differs from band to band).
2. Replays: fixed-design records (3 and 10 repeats) simulated from the archived round
   (optimize_ops/runs/20261129-103545_demo_local: each workload's paired log ratio, the
   repeat-to-repeat noise of its band) for a real pair (v2_smallb_splitv vs triton, the archived
   changes), the reverse pair and an A/A pair (no change), on the three representatives (a
   sample: the word) and on all 50 workloads (full: the verdict); each record is run through the
   adaptive rule with the same cap (fibtui.core.sequential.replay) and the two verdicts are
   compared; the jobs the adaptive design did not need are counted. The noise floor is the demo's
   own (its A/A history: tau 1%, sigma 0.69%).
3. The archived records themselves (the representative gate and the full sweep, 3 repeats),
   replayed through the rule with a cap of 3.

Everything is seeded: the same arguments print the same numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core import sequential, stats  # noqa: E402
from fibtui.core.runs import JobResult, jobs_of  # noqa: E402

SWEEP_RUN = "20261129-103545_demo_local"
GATE_RUN = "20261129-103529_demo_local"
#: the demo's representatives (fibtui regimes on the demo: batch 64, 1, 48)
REPRESENTATIVES = (
    "200a3ebd-2fb4-5e97-8569-f37d1f3d4443",
    "a8efeb8a-8b7b-5ea6-9f13-0d763ae059b8",
    "17f81457-465f-55f2-806a-efa293ff429b",
)


def archived_record(run_id: str = SWEEP_RUN) -> dict[str, Any]:
    return json.loads((REPO / "optimize_ops" / "runs" / run_id / "run.json").read_text())


def demo_floor() -> stats.NoiseFloor:
    """The demo's noise floor: its A/A history (optimize_ops/benchmarks/aa.jsonl)."""
    sessions = stats.load_aa_file(REPO / "optimize_ops" / stats.AA_FILE)
    return stats.noise_floor(stats.StatsSettings(), sessions, "the demo's A/A history")


def noise_model(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per workload of a paired record: axes, baseline latency, the mean paired log ratio, and
    the repeat-to-repeat standard deviation pooled over the workloads of its batch size."""
    jobs: dict[tuple[str, int], dict[str, Any]] = {}
    for j in record["jobs"]:
        jobs.setdefault((j["uuid"], j["repeat"]), {})[j["role"]] = j
    per: dict[str, dict[str, Any]] = {}
    for (uuid, _rep), pair in sorted(jobs.items()):
        b, c = pair["baseline"], pair["candidate"]
        w = per.setdefault(uuid, {"axes": b["axes"], "base": [], "logs": []})
        w["base"].append(b["latency_ms"])
        w["logs"].append(math.log(c["latency_ms"] / b["latency_ms"]))
    band_ss: dict[str, list[float]] = {}
    for w in per.values():
        band = json.dumps(w["axes"], sort_keys=True)
        m = sum(w["logs"]) / len(w["logs"])
        band_ss.setdefault(band, [0.0, 0.0])
        band_ss[band][0] += sum((x - m) ** 2 for x in w["logs"])
        band_ss[band][1] += len(w["logs"]) - 1
    out = {}
    for uuid, w in per.items():
        ss, dof = band_ss[json.dumps(w["axes"], sort_keys=True)]
        out[uuid] = {
            "axes": w["axes"],
            "base_ms": sum(w["base"]) / len(w["base"]),
            "delta": sum(w["logs"]) / len(w["logs"]),
            "sigma": math.sqrt(ss / dof),
        }
    return out


def simulate_record(
    model: dict[str, dict[str, Any]],
    uuids: list[str],
    repeats: int,
    rng: random.Random,
    change: float = 1.0,
) -> list[JobResult]:
    """A fixed-design paired record: every workload ``repeats`` times; the candidate's paired log
    ratio is ``change x`` the archived one plus the band's noise (change 0: an A/A pair)."""
    rows = []
    for r in range(repeats):
        for uuid in uuids:
            w = model[uuid]
            base = w["base_ms"] * math.exp(rng.gauss(0.0, w["sigma"] / math.sqrt(2.0)))
            cand = base * math.exp(change * w["delta"] + rng.gauss(0.0, w["sigma"]))
            for role, lat in (("baseline", base), ("candidate", cand)):
                rows.append(
                    JobResult(
                        uuid=uuid,
                        axes=w["axes"],
                        solution=role,
                        role=role,
                        repeat=r,
                        status=stats.PASSED,
                        latency_ms=lat,
                    )
                )
    return rows


def rule_for(cap: int, scope: str, floor: stats.NoiseFloor) -> sequential.AdaptiveRule:
    return sequential.AdaptiveRule(
        sequential.SequentialPlan(cap), scope, floor_for=lambda _key: floor
    )


def word_of(c: stats.Comparison) -> str:
    """A sample's word, the full set's verdict."""
    if c.scope == "sample":
        return c.measured.word if c.measured is not None else "not judged"
    return c.verdict


# --------------------------------------------------------------------------------------------
# 1. The rule alone
# --------------------------------------------------------------------------------------------


def rule_alone(
    plan: sequential.SequentialPlan,
    sigma: float,
    tau: float,
    runs: int,
    rng: random.Random,
    delta: float = 0.0,
    naive: bool = False,
) -> dict[str, Any]:
    """One workload's repeated intervals over ``runs`` simulated pairs: how often each word, and
    the mean looks. ``naive``: the fixed design's z at every look (no spending)."""
    z = statistics_z(plan.confidence)
    words: dict[str, int] = {}
    looks = 0
    for _ in range(runs):
        total = 0.0
        word = stats.UNDECIDED
        k = 0
        for k in range(1, plan.cap + 1):
            total += rng.gauss(delta, sigma)
            mean = total / k
            half = (z if naive else plan.critical(k)) * sigma / math.sqrt(k)
            word = stats.classify(mean - half, mean + half, tau)
            if word != stats.UNDECIDED:
                break
        looks += k
        words[word] = words.get(word, 0) + 1
    return {"words": {w: n / runs for w, n in sorted(words.items())}, "mean_looks": looks / runs}


def statistics_z(confidence: float) -> float:
    import statistics

    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)


# --------------------------------------------------------------------------------------------
# 2. Replays of simulated fixed-design records
# --------------------------------------------------------------------------------------------


def replay_many(
    model: dict[str, dict[str, Any]],
    uuids: list[str],
    cap: int,
    scope: str,
    change: float,
    runs: int,
    rng: random.Random,
    floor: stats.NoiseFloor,
) -> dict[str, Any]:
    rule = rule_for(cap, scope, floor)
    agree = 0
    saved = 0.0
    fixed_words: dict[str, int] = {}
    adaptive_words: dict[str, int] = {}
    for _ in range(runs):
        rows = simulate_record(model, uuids, cap, rng, change)
        result = sequential.replay(rule, rows)
        f = word_of(result.fixed["candidate"])
        a = word_of(result.adaptive["candidate"])
        agree += f == a
        saved += result.saved
        fixed_words[f] = fixed_words.get(f, 0) + 1
        adaptive_words[a] = adaptive_words.get(a, 0) + 1
    return {
        "runs": runs,
        "agreement": agree / runs,
        "jobs_saved": saved / runs,
        "fixed": dict(sorted(fixed_words.items())),
        "adaptive": dict(sorted(adaptive_words.items())),
    }


def archived_replay(run_id: str, scope: str, floor: stats.NoiseFloor) -> dict[str, Any]:
    """The archived record itself through the rule (cap: its repeats)."""
    record = archived_record(run_id)
    rule = rule_for(int(record["repeats"]), scope, floor)
    result = sequential.replay(rule, jobs_of(record))
    key = next(iter(result.fixed))
    return {
        "run": run_id,
        "scope": scope,
        "fixed": word_of(result.fixed[key]),
        "adaptive": word_of(result.adaptive[key]),
        "jobs": f"{len(result.rows)} of {result.planned}",
        "jobs_saved": result.saved,
        "stops": sorted({s.reason for s in result.stops}),
    }


def aa_gates(
    model: dict[str, dict[str, Any]], runs: int, rng: random.Random, aa_sigma: float | None
) -> dict[str, Any]:
    """A/A representative gates (cap 5) through the real rule and scheduler at tau 0, where any
    band or workload called faster is a false decision: how often a workload stops as "faster",
    and how often a gate's word has a faster band. ``aa_sigma``: the noise treated as known
    (None: the rule estimates it from the run's own repeats)."""
    floor = stats.NoiseFloor(0.0, "tau 0", 0.0, aa_sigma=aa_sigma)
    rule = rule_for(5, "sample", floor)
    faster = decisions = gates = 0
    for _ in range(runs):
        rows = simulate_record(model, list(REPRESENTATIVES), 5, rng, change=0.0)
        result = sequential.replay(rule, rows)
        faster += sum(s.word == stats.FASTER for s in result.stops)
        decisions += len(result.stops)
        m = result.adaptive["candidate"].measured
        gates += m is not None and any(b.word == stats.FASTER for b in m.bands)
    return {
        "gates": runs,
        "workload_faster": faster / decisions,
        "workloads": decisions,
        "gates_with_a_faster_band": gates / runs,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200, help="simulated records per case")
    ap.add_argument("--rule-runs", type=int, default=20000, help="simulated pairs for the rule")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    floor = demo_floor()
    print(f"noise floor: tau {floor.tau:.4f}, A/A sigma {floor.aa_sigma:.4f} ({floor.source})")
    print("\n1. the rule alone, A/A (one workload, sigma 0.69%), error allowed 2.5% one-sided")
    for cap in (3, 10):
        plan = sequential.SequentialPlan(cap)
        for tau in (0.0, floor.tau):
            for naive in (False, True):
                out = rule_alone(plan, 0.0069, tau, args.rule_runs, rng, naive=naive)
                name = "naive z at every look" if naive else "repeated intervals"
                print(f"   cap {cap:2d} tau {tau:.2%} {name:22s} {out}")
    print("\n   spending functions, cap 10, tau 1%: A/A (no change) and a 2% change")
    for spending in sequential.SPENDINGS:
        plan = sequential.SequentialPlan(10, spending=spending)
        for delta in (0.0, -0.02):
            out = rule_alone(plan, 0.0069, floor.tau, args.rule_runs, rng, delta=delta)
            print(f"   {spending:15s} change {delta:+.0%}: {out}")
    model = noise_model(archived_record())
    everything = list(model)
    known = {u: {**w, "sigma": 0.0069} for u, w in model.items()}
    print(f"\n   through the scheduler: {args.runs * 10} A/A representative gates, cap 5, tau 0")
    print(f"   noise 0.69%, known:          {aa_gates(known, args.runs * 10, rng, 0.0069)}")
    print(f"   archived noise, from the run: {aa_gates(model, args.runs * 10, rng, None)}")
    print(f"\n2. replays ({args.runs} simulated fixed-design records per line)")
    for scope, uuids in (("sample", list(REPRESENTATIVES)), ("full", everything)):
        for name, change in (("real", 1.0), ("reverse", -1.0), ("A/A", 0.0)):
            for cap in (3, 10):
                out = replay_many(model, uuids, cap, scope, change, args.runs, rng, floor)
                print(f"   {scope:6s} {name:7s} repeats {cap:2d}: {out}")
    print("\n3. the archived records, replayed (cap 3)")
    for run_id, scope in ((GATE_RUN, "sample"), (SWEEP_RUN, "full")):
        print(f"   {archived_replay(run_id, scope, floor)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
