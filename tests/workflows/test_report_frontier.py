"""The cost/quality frontier across arms (workflows/report/frontier.py) as build_report computes it:
counted runs only, scores per case first, an arm dominated by another is off the frontier."""

from __future__ import annotations

import pytest

from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import RunResult, RunStatus
from workflows.report import build_report
from workflows.report.frontier import mean_interval

SPEC = make_spec(n_cases=4, trials=2, arms=("main", "pr", "alt"))
# arm -> (score of case i is base + 0.1 * (i % 2), cost per run)
ARMS = {"main": (0.4, 0.01), "pr": (0.7, 0.02), "alt": (0.5, 0.03)}


def runs() -> list[RunResult]:
    made = []
    for arm, (base, cost) in ARMS.items():
        for case in range(4):
            for trial in range(2):
                value = base + 0.1 * (case % 2)
                made.append(scored_run(SPEC, case, arm, trial, {"a": value}, cost=cost))
    return made


def test_each_arm_is_a_point_and_a_dominated_arm_is_off_the_frontier() -> None:
    points = build_report(SPEC, runs()).frontier
    assert [p.arm for p in points] == ["main", "pr", "alt"]  # the arms' order
    assert [p.on_frontier for p in points] == [True, True, False]  # pr beats alt on both
    main = points[0]
    assert main.score == pytest.approx(0.45) and main.cost_usd == pytest.approx(0.01)
    assert main.n_cases == 4 and main.n_runs == 8
    assert main.score_low is not None and main.score_high is not None
    assert main.score_low < 0.45 < main.score_high
    assert main.cost_low == pytest.approx(0.01) and main.cost_high == pytest.approx(0.01)


def test_infrastructure_losses_are_left_out_and_agent_failures_count() -> None:
    made = runs()
    lost = errored_run(SPEC, 0, "alt", 0, RunStatus.SANDBOX_ERROR, "sandbox died")
    lost = lost.model_copy(update={"usage": lost.usage.model_copy(update={"cost_usd": 9.0})})
    crashed = errored_run(SPEC, 1, "main", 0, RunStatus.AGENT_ERROR, "crashed")
    made = [r for r in made if r.run_id not in (lost.run_id, crashed.run_id)] + [lost, crashed]
    points = {p.arm: p for p in build_report(SPEC, made).frontier}
    assert points["alt"].n_runs == 7 and points["alt"].cost_usd == pytest.approx(0.03)
    # the crash scores 0 on case 1 (trial 0) and costs its 0.02
    assert points["main"].score == pytest.approx((0.4 + 0.25 + 0.4 + 0.5) / 4)
    assert points["main"].cost_usd == pytest.approx((7 * 0.01 + 0.02) / 8)


def test_two_arms_with_equal_points_are_both_on_the_frontier() -> None:
    spec = make_spec(n_cases=2, trials=1, arms=("main", "pr"))
    same = [scored_run(spec, c, a, 0, {"a": 0.5}) for c in range(2) for a in ("main", "pr")]
    assert [p.on_frontier for p in build_report(spec, same).frontier] == [True, True]


def test_mean_interval_is_the_t_interval_and_needs_two_values() -> None:
    assert mean_interval([]) == (None, None, None)
    assert mean_interval([0.3]) == (0.3, None, None)
    mean, low, high = mean_interval([0.0, 1.0])  # sd/sqrt(n) = 0.5; t(0.975, 1) = 12.706
    assert mean == 0.5
    assert low == pytest.approx(0.5 - 6.3531, abs=1e-4)
    assert high == pytest.approx(0.5 + 6.3531, abs=1e-4)
