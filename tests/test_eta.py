"""fibtui.core.eta: an ETA weighed by job size, fitted on the session's own wall times."""

from __future__ import annotations

import random

from fibtui.core.eta import EtaModel, fit_cost, workload_size


def test_workload_size_is_the_product_of_positive_integer_axes() -> None:
    assert workload_size({"batch_size": 64}) == 64
    assert workload_size({"total_seq_len": 4096, "num_seqs": 16, "len_cu_seqlens": 17}) == 4096 * 16 * 17
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


def test_a_sweep_from_small_to_large_workloads_is_estimated_within_a_fifth() -> None:
    """The demo's shape: batch 1 ... 128, 3 repeats each, one job after another, a job's time
    0.3 s + 4 ms per batch row (with 5% noise). The average-paced ETA is 36-50% short all the
    way; the fitted one is within 20% from the second job of the second size on (14% at most)."""
    rng = random.Random(7)
    sizes = [b for b in (1, 4, 8, 16, 32, 48, 64, 128) for _ in range(3)]
    noise = {i: rng.uniform(0.95, 1.05) for i in range(len(sizes))}
    walls = [(0.3 + 0.004 * s) * noise[i] for i, s in enumerate(sizes)]
    model = EtaModel()
    fitted: list[tuple[float, float]] = []
    plain: list[tuple[float, float]] = []
    t = first = 0.0
    for i, (s, w) in enumerate(zip(sizes, walls, strict=True)):
        t += w
        if i == 0:
            first = t
        model.add(s, w, first=i == 0)
        truth = sum(walls[i + 1:])
        if 0 < i < len(sizes) - 1:
            fitted.append((model.seconds_left(sizes[i + 1:], t - first), truth))
            plain.append(((t - first) / i * (len(sizes) - 1 - i), truth))
    second = sizes.index(4)  # fitted[k] is after result k + 1: from the second job of size 4 on
    errors = [abs(e - truth) / truth for e, truth in fitted[second:]]
    assert max(errors) < 0.20, errors
    assert all((truth - e) / truth > 0.3 for e, truth in plain)  # the average-paced rule's miss


def test_equal_sizes_or_no_wall_times_give_the_average_paced_eta() -> None:
    model = EtaModel()
    for i in range(4):
        model.add(16, None, first=i == 0)
    assert model.seconds_left([16] * 6, 3.0) == 3.0 / 3 * 6
    model = EtaModel()
    model.add(8, 1.0, first=True)
    assert model.seconds_left([8], 0.0) is None  # no result after the first yet
    model.add(8, 1.0, first=False)
    assert model.seconds_left([], 1.0) == 0.0
    assert model.seconds_left([8, 8], 1.0) == 2.0
