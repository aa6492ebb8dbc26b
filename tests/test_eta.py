"""fibtui.core.eta: an ETA weighed by job size, fitted on the session's own wall times."""

from __future__ import annotations

import random
from pathlib import Path

from fibtui.core.eta import EtaModel, fit_cost, workload_size

REPO = Path(__file__).resolve().parent.parent


def test_workload_size_is_the_product_of_positive_integer_axes() -> None:
    assert workload_size({"batch_size": 64}) == 64
    assert (
        workload_size({"total_seq_len": 4096, "num_seqs": 16, "len_cu_seqlens": 17})
        == 4096 * 16 * 17
    )
    assert workload_size({}) == 1
    assert workload_size({"x": 0, "y": -3, "z": True, "w": "8", "v": 5}) == 5


def test_fit_recovers_a_line_and_falls_back_to_the_mean() -> None:
    a, b = fit_cost([(s, 0.5 + 0.01 * s) for s in (1, 4, 16, 64, 128)])
    assert abs(a - 0.5) < 1e-9 and abs(b - 0.01) < 1e-12
    assert fit_cost([(8, 1.0), (8, 3.0)]) == (2.0, 0.0)  # one size: the mean
    assert fit_cost([(1, 5.0), (100, 1.0)]) == (3.0, 0.0)  # larger is faster: no slope, the mean
    a, b = fit_cost([(10, 0.5), (20, 2.0), (30, 3.0)])  # the line would cross below zero
    assert a == 0.0 and b > 0
    assert fit_cost([]) == (1.0, 0.0)
    assert fit_cost([(float("nan"), 1.0), (2, float("inf"))]) == (1.0, 0.0)


def _sweep(
    axes: list[dict[str, int]], wall
) -> tuple[list[tuple[float, float]], list[tuple[float, float]], EtaModel]:
    """One worker runs the jobs in order: (fitted ETA, truth) and (average-paced ETA, truth)
    after each result but the first and the last."""
    walls = [wall(i, a) for i, a in enumerate(axes)]
    model = EtaModel()
    fitted, plain = [], []
    t = first = 0.0
    for i, (a, w) in enumerate(zip(axes, walls, strict=True)):
        t += w
        if i == 0:
            first = t
        model.add(a, w, first=i == 0)
        truth = sum(walls[i + 1 :])
        if 0 < i < len(axes) - 1:
            fitted.append((model.seconds_left(axes[i + 1 :], t - first), truth))
            plain.append(((t - first) / i * (len(axes) - 1 - i), truth))
    return fitted, plain, model


def test_a_sweep_from_small_to_large_workloads_is_estimated_within_a_fifth() -> None:
    """The demo's shape: batch 1 ... 128, 3 repeats each, a job's time 0.3 s + 4 ms per batch
    row (5% noise). The average-paced ETA is 36-50% short all the way; the fitted one is within
    20% from the third result of the second size on."""
    rng = random.Random(7)
    axes = [{"batch_size": b} for b in (1, 4, 8, 16, 32, 48, 64, 128) for _ in range(3)]
    fitted, plain, model = _sweep(
        axes, lambda i, a: (0.3 + 0.004 * a["batch_size"]) * rng.uniform(0.95, 1.05)
    )
    errors = [abs(e - truth) / truth for e, truth in fitted[4:]]  # fitted[k]: after result k + 1
    assert max(errors) < 0.20, errors
    assert all((truth - e) / truth > 0.3 for e, truth in plain)  # the average-paced rule's miss
    assert model.measure() == "batch_size"


def test_the_axis_that_sets_the_cost_is_found_among_derived_ones() -> None:
    """GDN prefill: the time follows total_seq_len, not num_seqs or their product (the CPU
    run of the tiny contest workspace, where the product's ETA jumped from 20 s to 34 s)."""
    rng = random.Random(3)
    pairs = [(1, 8), (1, 12), (2, 8), (2, 16), (3, 12), (4, 16), (1, 16), (4, 8)] * 2
    axes = [{"total_seq_len": t, "num_seqs": n, "len_cu_seqlens": n + 1} for n, t in pairs]
    fitted, _, model = _sweep(
        axes, lambda i, a: (0.2 + 0.1 * a["total_seq_len"]) * rng.uniform(0.97, 1.03)
    )
    assert model.measure() == "total_seq_len"
    errors = [abs(e - truth) / truth for e, truth in fitted[4:]]
    assert max(errors) < 0.15, errors


def test_equal_sizes_or_no_wall_times_give_the_average_paced_eta() -> None:
    model = EtaModel()
    for i in range(4):
        model.add({"n": 16}, None, first=i == 0)
    assert model.seconds_left([{"n": 16}] * 6, 3.0) == 3.0 / 3 * 6
    model = EtaModel()
    model.add({"n": 8}, 1.0, first=True)
    assert model.seconds_left([{"n": 8}], 0.0) is None  # no result after the first yet
    model.add({"n": 8}, 1.0, first=False)
    assert model.seconds_left([], 1.0) == 0.0
    assert model.seconds_left([{"n": 8}, {"n": 8}], 1.0) == 2.0
    assert model.measure() is None  # fewer than three wall times: every job the same


# --------------------------------------------------------------------------------------------
# Recorded runs replayed (issue 38 item 8): the ETA each result prints, against what was left
# --------------------------------------------------------------------------------------------

ETA_FIXTURES = Path(__file__).parent / "fixtures" / "eta"
#: the GDN demo's representative gate on the CPU interpreter (this repository's 2-core machine,
#: 2026-12-03): pairs of batch 64 (148 s), 1 (7.5 s), 48 (109 s); the ETA printed after the
#: batch-1 pair was 0:00:10 before, for 109 s left
GDN_REP = ETA_FIXTURES / "gdn_demo_rep_interpreter.journal.jsonl"
#: the DSA demo's full sweep on the CPU interpreter, paired (12 workloads, about 1.5 s of jobs)
DSA_ALL = ETA_FIXTURES / "dsa_demo_all_interpreter.journal.jsonl"
#: the GDN demo's full sweep on the H200 (50 workloads x 3 repeats, paired: 300 jobs)
GDN_H200_SWEEP = REPO / "optimize_ops" / "runs" / "20261129-103545_demo_local" / "journal.jsonl"


def replay(
    journal: Path, tmp_path: Path, monkeypatch
) -> list[tuple[int, float | None, float, float]]:
    """Feed a recorded run's results to a JobRecorder in their order, its clock the recorded
    wall times (one worker: a group's results land together when its wall time has passed);
    each result's (groups finished, ETA printed, seconds truly left, the clock)."""
    from fibtui.core.runs import Journal, read_journal
    from fibtui.runners import journaling
    from fibtui.runners.events import JobFinished

    contents = read_journal(journal)
    header = contents.header
    results = sorted(contents.results.values(), key=lambda r: r.finished or "")
    order = [r for r in _journal_order(journal, results)]
    wall: dict[tuple[str, int], float] = {}
    for r in order:
        g = (r.uuid, r.repeat)
        wall[g] = max(wall.get(g, 0.0), float(r.wall_s or 0.0))
    groups = list(dict.fromkeys((r.uuid, r.repeat) for r in order))
    folder = tmp_path / journal.stem
    folder.mkdir()
    Journal(folder).write_header(header)
    clock = [0.0]
    monkeypatch.setattr(journaling.time, "monotonic", lambda: clock[0])
    sid = {(s.role, s.name): f"s{i}" for i, s in enumerate(header.solutions)}
    recorder = journaling.JobRecorder(folder, header, {v: k for k, v in sid.items()})
    seen: set[tuple[str, int]] = set()
    out: list[tuple[int, float | None, float, float]] = []
    for r in order:
        g = (r.uuid, r.repeat)
        if g not in seen:
            seen.add(g)
            clock[0] += wall[g]
        etas: list[float | None] = []
        recorder.record(
            sid[(r.role, r.solution)],
            r.uuid,
            r.repeat,
            1,
            {"status": r.status, "latency_ms": r.latency_ms, "wall_s": r.wall_s},
            lambda e, etas=etas: etas.append(e.eta_s) if isinstance(e, JobFinished) else None,
        )
        left = sum(wall[h] for h in groups[groups.index(g) + 1 :])
        out.append((len(seen), etas[0], left, clock[0]))
    return out


def _journal_order(journal: Path, results):
    """The results in the order the journal holds them."""
    import json as _json

    keys = []
    for line in journal.read_text().splitlines():
        d = _json.loads(line)
        if d.get("kind") == "result":
            keys.append((d["uuid"], d["solution"], d["role"], d["repeat"]))
    by_key = {(r.uuid, r.solution, r.role, r.repeat): r for r in results}
    return [by_key[k] for k in keys]


def _misses(points, floor_s: float = 0.0) -> list[tuple[int, float | None, float]]:
    """From the second finished group on, the groups whose ETA (the one printed with the
    group's last result: a pair's two lines land at one instant) is off by more than 25% of
    what was left (or by more than ``floor_s``, for sweeps whose jobs take milliseconds); the
    last group, with nothing left, is left out. No ETA is a miss only once ETA_SETTLE_S have
    passed since the first result (before, none is shown by design)."""
    from fibtui.runners.journaling import ETA_SETTLE_S

    closing = {n: (n, eta, left, t) for n, eta, left, t in points}  # each group's last result
    start = closing[1][3]
    return [
        (n, eta, left)
        for n, eta, left, t in list(closing.values())[:-1]
        if n >= 2
        and (
            (eta is None and t - start >= ETA_SETTLE_S)
            or (eta is not None and abs(eta - left) > max(0.25 * left, floor_s))
        )
    ]


def test_the_gdn_demo_gate_on_the_interpreter_is_estimated_within_a_quarter(
    tmp_path: Path, monkeypatch
) -> None:
    points = replay(GDN_REP, tmp_path, monkeypatch)
    assert [n for n, *_ in points] == [1, 1, 2, 2, 3, 3]
    assert not _misses(points), points
    n, eta, left, _ = points[3]  # after the batch-1 pair: about 109 s left (it said 10 s before)
    assert left > 100 and abs(eta - left) < 0.25 * left


def test_the_demo_sweeps_are_estimated_within_a_quarter(tmp_path: Path, monkeypatch) -> None:
    dsa = replay(DSA_ALL, tmp_path, monkeypatch)
    assert not _misses(dsa, floor_s=0.5), dsa  # 1.8 s of jobs in all: half a second is noise
    assert any(eta is not None for _, eta, _, _ in dsa[:-2])
    assert GDN_H200_SWEEP.is_file(), "the archived H200 sweep is part of the repository"
    h200 = replay(GDN_H200_SWEEP, tmp_path, monkeypatch)
    assert len(h200) == 150 * 2
    # 150 pairs of 0.05-0.2 s: within a quarter but where batch 64 of one repeat meets batch 1
    # of the next (up to 28% over, 2 s on 7 s left) and in the last second (what is left is
    # less than a second: ETA 0:00:00 or 0:00:01)
    misses = _misses(h200, floor_s=0.5)
    assert all(abs(eta - left) <= 0.3 * left for _, eta, left in misses if eta), misses
    assert len(misses) <= 12, misses


def test_on_the_interpreter_two_sizes_set_the_line_and_one_size_is_priced_by_size() -> None:
    """The recorded GDN gate: after the batch-64 and batch-1 pairs, the batch-48 pair is priced
    on the line through them (it took 109 s); with one size seen so far, a job is priced by its
    size (not as one more of the same), and without the prior (GPU timings) as before."""
    model = EtaModel(prior="size")
    model.add({"batch_size": 64}, 147.86, first=True)
    model.add({"batch_size": 1}, 7.46, first=False)
    assert model.measure() == "*"
    left = model.seconds_left([{"batch_size": 48}], 7.46)
    assert left is not None and abs(left - 109.38) < 0.25 * 109.38
    model = EtaModel(prior="size")
    model.add({"batch_size": 1}, 2.0, first=True)
    model.add({"batch_size": 1}, 2.0, first=False)
    assert model.seconds_left([{"batch_size": 8}], 2.0) == 16.0
    plain = EtaModel()
    plain.add({"batch_size": 1}, 2.0, first=True)
    plain.add({"batch_size": 1}, 2.0, first=False)
    assert plain.seconds_left([{"batch_size": 8}], 2.0) == 2.0
    try:
        EtaModel(prior="nonsense")
    except ValueError:
        pass
    else:
        raise AssertionError("an unknown prior was taken")
