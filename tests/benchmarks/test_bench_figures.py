"""The figures the Modal benchmarks compute (benchmarks/bench_figures.py)."""

from __future__ import annotations

import math

import pytest

from benchmarks.bench_figures import disagreements, paired_ratios, percentile


def test_percentile_is_nearest_rank_and_nan_for_nothing() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # unsorted on purpose
    assert percentile(values, 50) == 51.0  # rank round(0.5 * 99) = round(49.5) = 50 (0-based)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 100.0
    assert percentile(values, 95) == 95.0
    assert math.isnan(percentile([], 50))


def test_server_and_client_counts_agree_or_each_difference_is_named() -> None:
    server = {"created": 500, "refused": 51, "max_per_1s": 5, "peak_starting": 14}
    client = {"created": 500, "rate_limited": 51, "peak_starting": 100, "gave_up": 0}
    assert disagreements(server, client) == []
    assert disagreements({**server, "refused": 52}, client) == ["refused: server 52, client 51"]
    both = disagreements({**server, "created": 499, "refused": 50}, client)
    assert both == ["created: server 499, client 500", "refused: server 50, client 51"]


def test_paired_ratios_take_the_median_of_each_pairs_ratio() -> None:
    # Pairwise 10x, 20x, 40x: the median of the pairs (20), not median(slow) / median(fast) (10).
    assert paired_ratios([10.0, 20.0, 40.0], [1.0, 1.0, 1.0]) == (20.0, 10.0, 40.0)
    assert paired_ratios([10.0, 30.0], [1.0, 10.0]) == (6.5, 3.0, 10.0)


@pytest.mark.parametrize(
    ("slow", "fast", "problem"),
    [([1.0], [], "as many"), ([], [], "as many"), ([1.0], [0.0], "positive")],
)
def test_paired_ratios_refuse_what_they_cannot_divide(
    slow: list[float], fast: list[float], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        paired_ratios(slow, fast)
