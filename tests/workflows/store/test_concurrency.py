"""Several writers at once: threads sharing one Store, and (SQLite) separate worker processes."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, func, select

from tests.workflows.store.builders import make_result, make_spec
from workflows.records import CriterionScore
from workflows.store import Store
from workflows.store.tables import criterion_scores, runs

T = TypeVar("T")
WRITERS = 8


def _all_at_once(count: int, task: Callable[[int], T]) -> list[T]:
    """Run task(0..count-1) on as many threads, released together by a barrier."""
    barrier = threading.Barrier(count)

    def start(index: int) -> T:
        barrier.wait(timeout=10)
        return task(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(start, range(count)))


def _count(store_url: str, table: Any) -> int:
    engine = create_engine(store_url)
    try:
        with engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(table)).scalar_one())
    finally:
        engine.dispose()


def test_concurrent_saves_of_the_same_run_write_it_once(store: Store, store_url: str) -> None:
    store.save_experiment(make_spec())
    outcomes = _all_at_once(WRITERS, lambda _i: store.save_run(make_result()))

    assert sorted(outcomes) == [False] * (WRITERS - 1) + [True]
    assert _count(store_url, runs) == 1
    assert _count(store_url, criterion_scores) == 3
    assert store.get_run(make_result().run_id) == make_result()


def test_concurrent_different_results_leave_exactly_one_of_them(store: Store) -> None:
    store.save_experiment(make_spec())
    variants = [
        make_result(
            score=i / WRITERS,
            criteria=tuple(
                CriterionScore(name=f"c{j}", grader="regex", weight=1.0, score=i / WRITERS)
                for j in range(i + 1)
            ),
        )
        for i in range(WRITERS)
    ]
    outcomes = _all_at_once(WRITERS, lambda i: store.save_run(variants[i]))

    assert all(outcomes)
    stored = store.get_run(variants[0].run_id)
    assert stored in variants  # criteria and row from the same save, never a mix


def test_concurrent_deliveries_are_recorded_once(store: Store) -> None:
    outcomes = _all_at_once(WRITERS, lambda _i: store.record_delivery("d-1", "issue_comment"))
    assert sorted(outcomes) == [False] * (WRITERS - 1) + [True]


def test_concurrent_migrations_of_an_empty_database_all_succeed(store_url: str) -> None:
    stores = [Store(store_url) for _ in range(3)]
    try:
        _all_at_once(3, lambda i: stores[i].migrate())
        stores[0].save_experiment(make_spec())
        assert stores[2].get_experiment("exp-1") is not None
    finally:
        for each in stores:
            each.close()


def _worker_saves(args: tuple[str, int]) -> list[bool]:
    """In a worker process: its own Store, 20 runs of its own plus one run every worker saves."""
    url, worker = args
    with Store(url) as store:
        mine = [make_result(case_id=f"case-{worker}", trial=t) for t in range(20)]
        return [store.save_run(result) for result in [*mine, make_result()]]


def test_worker_processes_write_one_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with Store(url) as store:
        store.migrate()
        store.save_experiment(make_spec())
    with multiprocessing.get_context("fork").Pool(3) as pool:
        saved = pool.map(_worker_saves, [(url, w) for w in range(3)])

    assert all(all(outcome[:20]) for outcome in saved)
    assert sorted(outcome[20] for outcome in saved) == [False, False, True]
    assert _count(url, runs) == 61
    with Store(url) as store:
        assert store.count_runs("exp-1") == {"scored": 61}
