"""fibtui.core.eta: an ETA weighed by job size, fitted on the session's own wall times."""

from __future__ import annotations

import random

from fibtui.core.eta import EtaModel, fit_cost, workload_size


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
