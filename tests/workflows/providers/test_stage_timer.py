"""The benchmarks' per-stage timer of the local provider (stage_timer.py)."""

from __future__ import annotations

import pytest

from workflows.providers.local.stage_timer import StageTimer, summarize, timed


def test_summary_gives_mean_and_the_95th_percentile_in_ms() -> None:
    row = summarize("mount", [n / 1000 for n in range(1, 101)])  # 1 ms … 100 ms
    assert (row.count, row.mean_ms, row.p95_ms) == (100, pytest.approx(50.5), pytest.approx(95))


def test_a_stage_is_recorded_even_when_it_fails_and_nothing_without_a_timer() -> None:
    timer = StageTimer()
    with pytest.raises(OSError), timed(timer, "mkfs"):
        raise OSError("no space")
    with timed(None, "mkfs"):
        pass
    assert [(r.stage, r.count) for r in timer.summary()] == [("mkfs", 1)]
