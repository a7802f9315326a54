"""The outcome policy (workflows/outcomes.py): the agent's failures count at the floor, the
infrastructure's are excluded — and every surface that reports a score agrees on the same cells."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.commands.compare import compare_experiments
from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.catalog.models import ExperimentSpec
from workflows.outcomes import (
    AGENT_FAILURES,
    INFRASTRUCTURE,
    InfrastructureLoss,
    Outcome,
    counted,
    outcome_of,
)
from workflows.records import CriterionScore, RunResult, RunStatus
from workflows.report import build_report
from workflows.score_history import history_point
from workflows.stats import Verdict
from workflows.store import ExperimentRecord, Store


def test_every_status_has_exactly_one_outcome() -> None:
    assert AGENT_FAILURES.isdisjoint(INFRASTRUCTURE)
    assert AGENT_FAILURES | INFRASTRUCTURE | {RunStatus.SCORED} == set(RunStatus)
    assert {outcome_of(s) for s in AGENT_FAILURES} == {Outcome.FAILED}
    assert {outcome_of(s) for s in INFRASTRUCTURE} == {Outcome.EXCLUDED}


def test_a_failed_run_counts_at_its_recorded_floors_and_infrastructure_not_at_all() -> None:
    spec = make_spec(n_cases=1, trials=1)
    floors = (
        CriterionScore(name="accuracy", grader="regex", weight=3.0, score=0.0),
        CriterionScore(name="tone", grader="regex", weight=1.0, score=0.4),  # floor 0.4
    )
    failed = errored_run(spec, 0, "pr", 0, RunStatus.TIMEOUT, "slow").model_copy(
        update={"criteria": floors, "score": 0.1}
    )
    result = counted(failed)
    assert result is not None
    assert (result.score, result.criteria, result.failed) == (
        0.1,
        {"accuracy": 0.0, "tone": 0.4},
        True,
    )
    legacy = counted(errored_run(spec, 0, "pr", 0, RunStatus.AGENT_ERROR, "crash"))
    assert legacy is not None and legacy.score == 0.0  # stored before floors were recorded
    assert counted(errored_run(spec, 0, "pr", 0, RunStatus.SANDBOX_ERROR, "died")) is None


@pytest.mark.parametrize(
    ("lost", "incomplete"),
    [
        ((10, 100, 10, 100), False),  # 10% in each arm: at the threshold
        ((10, 100, 11, 100), True),  # over it
        ((0, 100, 5, 100), False),  # 5 points apart: at the balance threshold
        ((0, 100, 6, 100), True),  # 6 points apart: lost on one side only can bias Δ
        ((0, 0, 0, 0), False),
    ],
)
def test_incomplete_when_too_many_or_uneven_cells_are_lost(
    lost: tuple[int, int, int, int], incomplete: bool
) -> None:
    assert InfrastructureLoss(*lost).incomplete is incomplete


def runs_with_every_kind(spec: ExperimentSpec) -> list[RunResult]:
    """Scores that differ by case and arm, two failures the agent caused and two cells lost."""
    runs = [
        scored_run(spec, i, arm, t, {"accuracy": (i % 3) / 2, "cites": float(arm == "pr")})
        for i in range(len(spec.case_ids))
        for arm in ("main", "pr")
        for t in range(spec.trials)
    ]
    zeros = (
        CriterionScore(name="accuracy", grader="regex", weight=1.0, score=0.0),
        CriterionScore(name="cites", grader="regex", weight=1.0, score=0.0),
    )
    for index, status in ((1, RunStatus.AGENT_ERROR), (7, RunStatus.OUT_OF_MEMORY)):
        failed = errored_run(spec, index // 2, "pr", 0, status, "the agent's doing")
        runs[runs.index(next(r for r in runs if r.run_id == failed.run_id))] = failed.model_copy(
            update={"criteria": zeros, "score": 0.0}
        )
    for case in (3, 5):
        lost = errored_run(spec, case, "pr", 1, RunStatus.SANDBOX_ERROR, "died")
        runs[runs.index(next(r for r in runs if r.run_id == lost.run_id))] = lost
    return runs


def test_report_history_and_compare_agree_on_the_same_cells(tmp_path: Path) -> None:
    spec = make_spec(n_cases=12, trials=2)
    runs = runs_with_every_kind(spec)
    report = build_report(spec, runs)
    overall = report.comparisons[0].rows[0]

    # by hand: per case, the mean of the counted trials (failures at 0, lost cells left out)
    def case_mean(case: str, arm: str) -> float:
        kept = [counted(r) for r in runs if (r.case_id, r.arm) == (case, arm)]
        scores = [c.score for c in kept if c is not None and c.score is not None]
        return sum(scores) / len(scores)

    expected_head = sum(case_mean(c, "pr") for c in spec.case_ids) / len(spec.case_ids)
    assert overall.head_mean == pytest.approx(expected_head)
    assert overall.n_cases == 12  # failures and partly lost cases are still paired
    assert report.comparisons[0].failure_rate is not None
    # per case, the share of counted trials failed: case-00 1 of 2, case-03 1 of 1 (one lost)
    assert report.comparisons[0].failure_rate.head_mean == pytest.approx((0.5 + 1.0) / 12)
    assert report.summaries[1].failed == 2 and report.summaries[1].excluded == 2
    lost = report.comparisons[0].infrastructure
    assert (lost.base_lost, lost.base_cells, lost.head_lost, lost.head_cells) == (0, 24, 2, 24)
    assert lost.incomplete  # 8 points more lost on one side than the other: more than 5
    assert report.comparisons[0].verdict is Verdict.INCOMPLETE

    record = ExperimentRecord(spec=spec, status="completed", created_at=datetime.now(UTC))
    point = history_point(record, runs)  # main's history describes the last arm: pr here
    assert point.overall.mean == pytest.approx(overall.head_mean)
    assert point.overall.n_cases == overall.n_cases
    assert point.criteria["cites"].mean == pytest.approx(report.comparisons[0].rows[2].head_mean)

    store = Store(f"sqlite:///{tmp_path}/evalbot.db")
    store.migrate()
    store.save_experiment(spec)
    for run in runs:
        store.save_run(run)
    compared = compare_experiments(store, f"{spec.experiment_id}:main", spec.experiment_id)
    row = compared.comparisons[0].rows[0]
    assert (row.base_mean, row.head_mean, row.delta) == pytest.approx(
        (overall.base_mean, overall.head_mean, overall.delta)
    )
