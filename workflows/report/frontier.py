"""The cost/quality frontier across arms (BAR-style; docs/statistics.md, "Frontier").

Per arm: its overall score — the mean over cases of each case's mean over counted trials (as the
comparisons pair them), with a 95% t interval over the cases (cut to [0, 1]) — against its cost
per run — the agent's usage plus the sandbox, the mean over counted runs, with a 95% t interval
over the runs.
An arm is on the frontier when no other arm scores at least as well for at most the cost and is
strictly better in one of the two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as scipy_stats

from workflows.outcomes import counted
from workflows.records import RunResult
from workflows.report.report_models import FrontierPoint
from workflows.report.table import OVERALL_KEY, Table
from workflows.stats import ALPHA
from workflows.stats.paired import case_means


def frontier_points(
    arms: Sequence[str], runs: list[RunResult], table: Table
) -> list[FrontierPoint]:
    """One point per arm, in the arms' order, each marked on or off the frontier."""
    points = [_point(arm, runs, table) for arm in arms]
    return [p.model_copy(update={"on_frontier": _undominated(p, points)}) for p in points]


def _point(arm: str, runs: list[RunResult], table: Table) -> FrontierPoint:
    means = list(case_means(table.scores[arm][OVERALL_KEY]).values())
    costs = [
        r.usage.cost_usd + r.sandbox.cost_usd
        for r in runs
        if r.arm == arm and counted(r) is not None
    ]
    score, score_low, score_high = mean_interval(means)
    if score_low is not None and score_high is not None:  # scores live in [0, 1]
        score_low, score_high = max(0.0, score_low), min(1.0, score_high)
    cost, cost_low, cost_high = mean_interval(costs)
    return FrontierPoint(
        arm=arm,
        score=score,
        score_low=score_low,
        score_high=score_high,
        cost_usd=cost,
        cost_low=cost_low,
        cost_high=cost_high,
        n_cases=len(means),
        n_runs=len(costs),
    )


def mean_interval(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """The mean and its 95% t interval (None where there are too few values for one)."""
    if not values:
        return None, None, None
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, None, None
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = float(scipy_stats.t.ppf(1 - ALPHA / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def _undominated(point: FrontierPoint, points: list[FrontierPoint]) -> bool:
    if point.score is None or point.cost_usd is None:
        return False
    for other in points:
        if other is point or other.score is None or other.cost_usd is None:
            continue
        at_least = other.score >= point.score and other.cost_usd <= point.cost_usd
        if at_least and (other.score > point.score or other.cost_usd < point.cost_usd):
            return False
    return True
