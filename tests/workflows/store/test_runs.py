"""Runs with criterion scores: round trip, idempotent save, replacement, listing and counting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from tests.support.experiments import make_spec as experiment_spec
from tests.support.experiments import scored_run
from tests.workflows.store.builders import make_result, make_spec
from workflows.records import CriterionScore, RunStatus, SandboxUsage
from workflows.store import Store
from workflows.store.store_errors import StoreRefused
from workflows.store.tables import criterion_scores, runs


def _scalar(store_url: str, query: Any) -> Any:
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            return connection.execute(query).scalar_one()
    finally:
        engine.dispose()


@pytest.fixture
def saved(store: Store) -> Store:
    store.save_experiment(make_spec())
    return store


def test_run_round_trip_keeps_every_field_and_criterion_order(saved: Store) -> None:
    result = make_result()
    assert saved.save_run(result) is True
    assert saved.get_run(result.run_id) == result


def test_error_run_without_score_or_criteria_round_trips(saved: Store) -> None:
    result = make_result(
        status=RunStatus.SANDBOX_ERROR,
        error="The sandbox died while the agent ran.",
        score=None,
        criteria=(),
        exit_code=None,
        limits={},
    )
    saved.save_run(result)
    assert saved.get_run(result.run_id) == result


def test_unknown_run_is_none(saved: Store) -> None:
    assert saved.get_run("exp-1/contract-1/main/9") is None


def test_saving_the_same_run_twice_changes_nothing(saved: Store, store_url: str) -> None:
    result = make_result()
    assert saved.save_run(result) is True
    stamp = _scalar(store_url, select(runs.c.updated_at))

    assert saved.save_run(make_result()) is False  # equal content, a distinct object
    assert _scalar(store_url, select(func.count()).select_from(runs)) == 1
    assert _scalar(store_url, select(func.count()).select_from(criterion_scores)) == 3
    assert _scalar(store_url, select(runs.c.updated_at)) == stamp


def test_a_different_result_replaces_the_run_and_its_criteria(saved: Store, store_url: str) -> None:
    saved.save_run(make_result())
    regraded = make_result(
        score=0.25,
        criteria=(
            CriterionScore(name="accuracy", grader="contains_all", weight=2.0, score=0.0),
            CriterionScore(name="brevity", grader="regex", weight=1.0, score=1.0, rationale="ok"),
        ),
    )
    assert saved.save_run(regraded) is True

    assert saved.get_run(regraded.run_id) == regraded
    assert _scalar(store_url, select(func.count()).select_from(runs)) == 1
    names = _scalar(store_url, select(func.count()).select_from(criterion_scores))
    assert names == 2
    assert saved.save_run(regraded) is False


def test_a_change_in_any_field_counts_as_different(saved: Store) -> None:
    saved.save_run(make_result())
    assert saved.save_run(make_result(limits={"cpu": 2.0})) is True
    assert saved.save_run(make_result(limits={"cpu": 2.0}, outputs_ref="elsewhere")) is True
    stored = saved.get_run("exp-1/contract-1/main/0")
    assert stored is not None and stored.outputs_ref == "elsewhere"


def test_list_runs_orders_by_case_arm_trial_with_their_criteria(saved: Store) -> None:
    cells = [
        ("contract-2", "pr", 1),
        ("contract-1", "pr", 0),
        ("contract-2", "main", 0),
        ("contract-1", "main", 1),
        ("contract-1", "main", 0),
    ]
    for case_id, arm, trial in cells:
        saved.save_run(make_result(case_id=case_id, arm=arm, trial=trial, score=trial / 2))
    saved.save_experiment(make_spec("exp-2"))
    saved.save_run(make_result("exp-2"))

    listed = saved.list_runs("exp-1")
    assert [(r.case_id, r.arm, r.trial) for r in listed] == sorted(cells)
    assert listed == [saved.get_run(r.run_id) for r in listed]
    assert [r.score for r in listed] == [t / 2 for _, _, t in sorted(cells)]
    assert saved.list_runs("unknown") == []


def test_count_runs_by_status(saved: Store) -> None:
    saved.save_run(make_result(trial=0))
    saved.save_run(make_result(trial=1))
    saved.save_run(make_result(trial=0, arm="pr", status=RunStatus.TIMEOUT, score=None))
    assert saved.count_runs("exp-1") == {"scored": 2, "timeout": 1}
    assert saved.count_runs("unknown") == {}


def test_a_run_of_an_unsaved_experiment_is_refused(store: Store) -> None:
    with pytest.raises(StoreRefused, match="not saved; call save_experiment first"):
        store.save_run(make_result("ghost"))
    assert store.get_run("ghost/contract-1/main/0") is None


def test_a_run_id_that_does_not_match_its_cell_is_refused(saved: Store) -> None:
    with pytest.raises(StoreRefused, match="does not match its cell"):
        saved.save_run(make_result(run_id="exp-1/contract-1/main/7"))


def test_a_criterion_scored_twice_is_refused(saved: Store) -> None:
    twice = (
        CriterionScore(name="accuracy", grader="regex", weight=1.0, score=1.0),
        CriterionScore(name="accuracy", grader="regex", weight=1.0, score=0.0),
    )
    with pytest.raises(StoreRefused, match="'accuracy' more than once"):
        saved.save_run(make_result(criteria=twice))
    assert saved.get_run("exp-1/contract-1/main/0") is None


def test_spend_sums_agent_and_sandbox_cost_of_the_repos_experiments_in_the_window(
    store: Store,
) -> None:
    mine = experiment_spec(n_cases=2, trials=1)  # repo "/repo"
    other = experiment_spec(n_cases=1, trials=1).model_copy(
        update={"experiment_id": "exp-other", "repo": "/other"}
    )
    for spec in (mine, other):
        store.save_experiment(spec)
    for i in range(2):
        run = scored_run(mine, i, "main", 0, {"x": 1.0}, cost=0.25)
        store.save_run(run.model_copy(update={"sandbox": SandboxUsage(cost_usd=0.05)}))
    store.save_run(scored_run(other, 0, "main", 0, {"x": 1.0}, cost=9.0))
    now = datetime.now(UTC)
    day = timedelta(days=1)
    assert store.spend("/repo", now - day, now + day) == pytest.approx(0.6)
    assert store.spend("/repo", now + day, now + 2 * day) == 0
    assert store.spend("/nobody", now - day, now + day) == 0


def test_runs_version_moves_when_a_run_is_added_or_its_content_changes(saved: Store) -> None:
    """The dashboard caches an experiment's runs on this version (bot/dashboard/view_cache.py)."""
    assert saved.runs_version("exp-1") == (0, "")
    result = make_result()
    saved.save_run(result)
    first = saved.runs_version("exp-1")
    saved.save_run(result)  # the same content: nothing written, the same version
    assert first[0] == 1 and saved.runs_version("exp-1") == first
    saved.save_run(result.model_copy(update={"score": 0.125}))  # a regrade
    regraded = saved.runs_version("exp-1")
    assert regraded[0] == 1 and regraded != first
    assert saved.runs_version("nope") == (0, "")
