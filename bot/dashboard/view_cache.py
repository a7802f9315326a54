"""A small cache of what the experiment page computes from an experiment's runs (the runs, the
report), keyed by the store's `runs_version` — the count of runs and when one last changed — so a
large experiment's page is computed once per change, not once per view (docs/dashboard.md, "Scale").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from workflows.records import RunResult
from workflows.report import ExperimentReport, build_report_and_table
from workflows.report.table import Table
from workflows.store import ExperimentRecord, Store

T = TypeVar("T")
SIZE = 16


class ViewCache:
    """A least-recently-used map, safe across the threads routes run blocking work in."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                found: T = self._items[key]
                return found
        value = build()  # outside the lock: two builders of one key both build, either is right
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


CACHE = ViewCache()


def version_key(store: Store, record: ExperimentRecord) -> tuple[Hashable, ...]:
    """What the experiment's runs and report depend on: spec, state, and the runs' version."""
    spec = record.spec
    return (spec.experiment_id, hash(spec.model_dump_json()), record.status.value,
            store.runs_version(spec.experiment_id))  # fmt: skip


def cached_runs(store: Store, record: ExperimentRecord) -> list[RunResult]:
    """`store.list_runs`, read again only when the runs changed (blocking)."""
    key = ("runs", *version_key(store, record))
    return CACHE.get_or_build(key, lambda: store.list_runs(record.spec.experiment_id))


def cached_report_and_table(
    store: Store, record: ExperimentRecord
) -> tuple[ExperimentReport, Table]:
    """The report and the score table it was built from, again only when the runs changed
    (blocking): what the chart URLs draw, without rebuilding the report per chart."""
    key = ("report", *version_key(store, record))
    runs = cached_runs(store, record)
    return CACHE.get_or_build(key, lambda: build_report_and_table(record.spec, runs))
