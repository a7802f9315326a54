"""Score history of main: one point per completed main evaluation of a dataset.

An experiment counts as a main evaluation when its trigger is "main" or it carries the label
`eval=main` (what .github/workflows/main-eval.yml sets). The point describes its last arm — main's
head at the time — with the case-clustered mean and 95% t interval of the overall score and of each
criterion over the counted runs (workflows/outcomes.py: the agent's failures count at the floor,
infrastructure is excluded), and what the whole experiment cost.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field
from scipy import stats as scipy_stats

from workflows.outcomes import counted
from workflows.records import RunResult
from workflows.store import ExperimentRecord, Store

MAIN_TRIGGER = "main"


class MeanInterval(BaseModel):
    model_config = ConfigDict(frozen=True)

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n_cases: int


class HistoryPoint(BaseModel):
    model_config = ConfigDict(frozen=True)

    experiment_id: str
    commit: str
    short_sha: str
    ref: str
    date: datetime
    overall: MeanInterval
    criteria: dict[str, MeanInterval] = Field(default_factory=dict)
    cost_usd: float = 0.0
    labels: dict[str, str] = Field(default_factory=dict)


def is_main_evaluation(record: ExperimentRecord) -> bool:
    spec = record.spec
    return spec.trigger == MAIN_TRIGGER or spec.labels.get("eval") == MAIN_TRIGGER


def mean_interval(by_case: dict[str, list[float]], confidence: float = 0.95) -> MeanInterval:
    """Mean over cases of each case's trial mean, with a t interval over cases, clipped to the
    scores' range [0, 1] (a t interval on few cases near 0 or 1 otherwise leaves it)."""
    means = [sum(v) / len(v) for v in by_case.values() if v]
    n = len(means)
    if n == 0:
        return MeanInterval(mean=None, ci_low=None, ci_high=None, n_cases=0)
    mean = sum(means) / n
    if n < 2:
        return MeanInterval(mean=mean, ci_low=None, ci_high=None, n_cases=n)
    variance = sum((m - mean) ** 2 for m in means) / (n - 1)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(variance / n)
    low, high = max(0.0, mean - half), min(1.0, mean + half)
    return MeanInterval(mean=mean, ci_low=low, ci_high=high, n_cases=n)


def history_point(record: ExperimentRecord, runs: list[RunResult]) -> HistoryPoint:
    arm = record.spec.arms[-1]
    overall: dict[str, list[float]] = defaultdict(list)
    criteria: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        result = counted(run) if run.arm == arm.name else None
        if result is None:  # another arm, or excluded as infrastructure
            continue
        if result.score is not None:
            overall[run.case_id].append(result.score)
        for name, score in result.criteria.items():
            if score is not None:
                criteria[name][run.case_id].append(score)
    return HistoryPoint(
        experiment_id=record.spec.experiment_id,
        commit=arm.commit,
        short_sha=arm.commit[:7],
        ref=arm.ref,
        date=record.finished_at or record.created_at,
        overall=mean_interval(overall),
        criteria={name: mean_interval(cases) for name, cases in criteria.items()},
        cost_usd=round(sum(r.usage.cost_usd + r.sandbox.cost_usd for r in runs), 6),
        labels=dict(record.spec.labels),
    )


def score_history(store: Store, dataset: str, *, limit: int = 100) -> list[HistoryPoint]:
    """Completed main evaluations of `dataset`, oldest first."""
    records = [
        r
        for r in store.list_experiments(dataset=dataset, status="completed", limit=1000)
        if is_main_evaluation(r)
    ][:limit]
    points = [history_point(r, store.list_runs(r.spec.experiment_id)) for r in records]
    return sorted(points, key=lambda p: p.date)
