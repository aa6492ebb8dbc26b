from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fibtui.core import numbers


def test_p95_is_linear_interpolation_between_closest_ranks() -> None:
    values = list(range(1, 21))  # 1..20: rank 0.95 * 19 = 18.05 -> 19 + 0.05 * (20 - 19)
    assert numbers.p95(values) == pytest.approx(19.05)
    assert numbers.median([3, 1, 2]) == 2
    assert numbers.median([1, 2, 3, 4]) == 2.5
    assert numbers.percentile([5.0], 0.95) == 5.0
    assert numbers.p95([]) is None


@given(st.lists(st.floats(min_value=1e-6, max_value=1e3), min_size=1, max_size=200))
def test_percentile_is_bounded_and_monotone(values: list[float]) -> None:
    p50, p95 = numbers.median(values), numbers.p95(values)
    assert min(values) <= p50 <= p95 <= max(values) or math.isclose(p50, p95)


def test_geomean_and_stdev() -> None:
    assert numbers.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert numbers.stdev([1.0]) is None
    assert numbers.stdev([1.0, 3.0]) == pytest.approx(math.sqrt(2.0))


def test_count_words() -> None:
    from fibtui.core.numbers import count

    assert (
        count(1, "run") == "1 run"
        and count(0, "run") == "0 runs"
        and count(3, "warning") == "3 warnings"
    )
    assert count(1, "round summary", "round summaries") == "1 round summary"
    assert count(2, "round summary", "round summaries") == "2 round summaries"
