"""Experiments and arms: round trip, idempotent upsert, status lifecycle, listing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from tests.workflows.store.builders import PR_SHA, make_spec
from workflows.catalog.models import ArmSpec
from workflows.store import ExperimentStatus, Store, StoreError
from workflows.store.tables import arms, experiments


def _rows(store_url: str, query: Any) -> list[tuple[Any, ...]]:
    """Read the tables directly, beside the Store API, to see what it really wrote."""
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(query)]
    finally:
        engine.dispose()


def test_experiment_round_trip(store: Store, store_url: str) -> None:
    before = datetime.now(UTC)
    spec = make_spec()
    store.save_experiment(spec)

    record = store.get_experiment("exp-1")
    assert record is not None
    assert record.spec == spec
    assert record.status is ExperimentStatus.RUNNING
    assert record.finished_at is None
    assert record.created_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= record.created_at <= datetime.now(UTC)
    stored_arms = _rows(
        store_url,
        select(arms.c.name, arms.c.ref, arms.c.commit, arms.c.config).order_by(arms.c.name),
    )
    assert stored_arms == [
        ("main", "main", "a" * 40, {"model": "m1"}),
        ("pr", "pull/7/head", PR_SHA, {"model": "m1"}),
    ]


def test_unknown_experiment_is_none(store: Store) -> None:
    assert store.get_experiment("nope") is None


def test_saving_the_same_spec_twice_keeps_one_row_and_its_created_at(
    store: Store, store_url: str
) -> None:
    assert store.save_experiment(make_spec()) is True  # new
    first = store.get_experiment("exp-1")
    assert store.save_experiment(make_spec()) is False  # already stored

    assert _rows(store_url, select(experiments.c.id)) == [("exp-1",)]
    assert len(_rows(store_url, select(arms.c.name))) == 2
    assert store.get_experiment("exp-1") == first


def test_resaving_a_changed_spec_replaces_spec_and_arms(store: Store, store_url: str) -> None:
    store.save_experiment(make_spec())
    arm = ArmSpec(name="pr-v2", ref="pull/7/head", commit="c" * 40, config={"model": "m2"})
    changed = make_spec(arms=(make_spec().arms[0], arm), trials=5)
    store.save_experiment(changed)

    record = store.get_experiment("exp-1")
    assert record is not None and record.spec == changed
    stored = _rows(store_url, select(arms.c.name, arms.c.commit).order_by(arms.c.name))
    assert stored == [("main", "a" * 40), ("pr-v2", "c" * 40)]


def test_terminal_status_stamps_finished_at_once(store: Store) -> None:
    store.save_experiment(make_spec())
    assert store.set_experiment_status("exp-1", "completed") is True  # changed
    done = store.get_experiment("exp-1")
    assert done is not None and done.status is ExperimentStatus.COMPLETED
    assert done.finished_at is not None and done.finished_at >= done.created_at

    assert store.set_experiment_status("exp-1", ExperimentStatus.COMPLETED) is False  # as it was
    store.save_experiment(make_spec(), status="completed")
    again = store.get_experiment("exp-1")
    assert again is not None and again.finished_at == done.finished_at

    store.set_experiment_status("exp-1", "running")  # e.g. rerunning failed cells
    rerun = store.get_experiment("exp-1")
    assert rerun is not None and rerun.status is ExperimentStatus.RUNNING
    assert rerun.finished_at is None


def test_saving_with_a_terminal_status_stamps_finished_at(store: Store) -> None:
    store.save_experiment(make_spec(), status="cancelled")
    record = store.get_experiment("exp-1")
    assert record is not None and record.finished_at is not None


def test_status_of_an_unknown_experiment_is_an_error(store: Store) -> None:
    with pytest.raises(StoreError, match="'ghost' is not in the store"):
        store.set_experiment_status("ghost", "failed")


def test_unknown_status_is_refused_with_the_allowed_ones(store: Store) -> None:
    with pytest.raises(StoreError, match="use one of: pending, running, completed"):
        store.save_experiment(make_spec(), status="done")
    assert store.get_experiment("exp-1") is None


def test_list_experiments_filters_and_orders_newest_first(store: Store) -> None:
    store.save_experiment(make_spec("e1"))
    store.save_experiment(make_spec("e2", dataset="other"))
    store.save_experiment(make_spec("e3", repo="acme/another"))
    store.set_experiment_status("e1", "failed")

    assert [r.experiment_id for r in store.list_experiments()] == ["e3", "e2", "e1"]
    assert [r.experiment_id for r in store.list_experiments(dataset="bar")] == ["e3", "e1"]
    assert [r.experiment_id for r in store.list_experiments(repo="acme/another")] == ["e3"]
    assert [r.experiment_id for r in store.list_experiments(status="failed")] == ["e1"]
    assert [r.experiment_id for r in store.list_experiments(dataset="bar", limit=1)] == ["e3"]
    assert store.list_experiments(dataset="missing") == []


def test_list_experiments_rejects_a_bad_limit(store: Store) -> None:
    with pytest.raises(StoreError, match="at least 1"):
        store.list_experiments(limit=0)
