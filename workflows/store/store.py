"""The store: experiments, arms, runs with their criterion scores, and webhook deliveries.

One `Store` per process: it owns a pooled, thread-safe engine, and every method runs in its own
short transaction. Writes are idempotent and safe under concurrent callers (threads or processes):
they are single `INSERT ... ON CONFLICT` statements plus dependent rows, in one transaction.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import Connection, Engine, case, delete, func, select, update
from sqlalchemy import exc as sa_exc

from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.settings import Settings
from workflows.store import convert, schema
from workflows.store.engine import (
    WRITE_OPTION,
    is_memory_sqlite,
    make_engine,
    parse_url,
    safe_url,
    translated_errors,
)
from workflows.store.rate_buckets import take_slot
from workflows.store.store_errors import StoreError, StoreRefused
from workflows.store.store_records import ExperimentRecord, ExperimentStatus
from workflows.store.tables import (
    arms,
    criterion_scores,
    experiments,
    runs,
    webhook_deliveries,
)
from workflows.store.upsert import insert


class Store:
    """Sync access to the evalbot database at `url` (SQLite or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self._url = parse_url(url)
        self._engine = make_engine(self._url)
        self._writer = self._engine.execution_options(**{WRITE_OPTION: True})
        # An in-memory SQLite database is one shared connection: serialize its transactions.
        self._lock: Any = threading.RLock() if is_memory_sqlite(self._url) else nullcontext()

    @classmethod
    def from_settings(cls, settings: Settings) -> Store:
        """The configured database; for SQLite, its folder is created first."""
        url = parse_url(settings.resolved_database_url)
        if url.get_backend_name() == "sqlite" and not is_memory_sqlite(url) and url.database:
            _make_parent_dir(url.database)
        return cls(settings.resolved_database_url)

    @property
    def url(self) -> str:
        """The database URL with any password masked."""
        return safe_url(self._url)

    @property
    def engine(self) -> Engine:
        """The store's engine, for read-only queries elsewhere (bot/metrics.py): the masked `url`
        cannot be used to connect."""
        return self._engine

    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql"."""
        return self._engine.dialect.name

    # -- lifecycle -------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Upgrade the schema to the newest migration (a no-op when already there)."""
        with self._lock, translated_errors(self._url):
            schema.upgrade(self._engine)

    def schema_revision(self) -> str | None:
        """The migration the database is at; None before the first `migrate()`."""
        with self._lock, translated_errors(self._url):
            return schema.current_revision(self._engine)

    def close(self) -> None:
        """Close every pooled connection. The Store can still be used; it reconnects."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._lock, translated_errors(self._url), self._writer.begin() as connection:
            yield connection

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._lock, translated_errors(self._url), self._engine.begin() as connection:
            yield connection

    # -- experiments -----------------------------------------------------------------------------

    def save_experiment(self, spec: ExperimentSpec, status: str = "running") -> bool:
        """Insert or update the experiment and its arms; saving the same spec again is a no-op.
        True when the experiment was not in the store before."""
        state = _experiment_status(status)
        now = convert.utc_now()
        values = convert.experiment_values(spec, state)
        with self._write() as connection:
            new = not _experiment_exists(connection, spec.experiment_id)
            stmt = insert(connection.dialect.name, experiments).values(
                **values, created_at=now, finished_at=now if state.is_terminal else None
            )
            kept = stmt.excluded
            connection.execute(
                stmt.on_conflict_do_update(
                    index_elements=[experiments.c.id],
                    set_={name: kept[name] for name in values if name != "id"}
                    | {"finished_at": _finished_at_on_change(kept)},
                )
            )
            self._save_arms(connection, spec)
        return new

    def _save_arms(self, connection: Connection, spec: ExperimentSpec) -> None:
        names = [arm.name for arm in spec.arms]
        connection.execute(
            delete(arms).where(
                arms.c.experiment_id == spec.experiment_id, arms.c.name.not_in(names)
            )
        )
        for values in convert.arm_values(spec):
            stmt = insert(connection.dialect.name, arms).values(**values)
            connection.execute(
                stmt.on_conflict_do_update(
                    index_elements=[arms.c.experiment_id, arms.c.name],
                    set_={k: stmt.excluded[k] for k in ("ref", "commit", "config")},
                )
            )

    def set_experiment_status(self, experiment_id: str, status: str) -> bool:
        """Move the experiment to `status`; a terminal status stamps `finished_at` (once). True
        when the status changed (False: it already had this status)."""
        state = _experiment_status(status)
        finished = convert.utc_now() if state.is_terminal else None
        with self._write() as connection:
            changed = connection.execute(
                update(experiments)
                .where(experiments.c.id == experiment_id, experiments.c.status != state.value)
                .values(status=state.value, finished_at=finished)
            ).rowcount
            if not changed and not _experiment_exists(connection, experiment_id):
                raise StoreError(f"Experiment {experiment_id!r} is not in the store.")
        return bool(changed)

    def get_experiment(self, experiment_id: str) -> ExperimentRecord | None:
        with self._read() as connection:
            row = connection.execute(
                select(experiments).where(experiments.c.id == experiment_id)
            ).first()
        return _experiment_record(row) if row is not None else None

    def list_experiments(
        self,
        *,
        dataset: str | None = None,
        repo: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[ExperimentRecord]:
        """Newest first, filtered by whichever of dataset, repo and status are given."""
        if limit < 1:
            raise StoreError(f"The experiment list limit must be at least 1, not {limit}.")
        query = select(experiments)
        if dataset is not None:
            query = query.where(experiments.c.dataset == dataset)
        if repo is not None:
            query = query.where(experiments.c.repo == repo)
        if status is not None:
            query = query.where(experiments.c.status == _experiment_status(status).value)
        query = query.order_by(experiments.c.created_at.desc(), experiments.c.id.desc()).limit(
            limit
        )
        with self._read() as connection:
            rows = connection.execute(query).all()
        return [_experiment_record(row) for row in rows]

    # -- runs ------------------------------------------------------------------------------------

    def save_run(self, result: RunResult) -> bool:
        """Store one run with its criterion scores.

        Returns False when the stored run already has this exact content (nothing is written), and
        True when the run was inserted or a different result replaced it, criteria included.
        """
        _check_run(result)
        values = convert.run_values(result)
        now = convert.utc_now()
        try:
            with self._write() as connection:
                changed = self._upsert_run(connection, values, now)
                if changed:
                    self._replace_criteria(connection, result)
        except StoreError as exc:
            if isinstance(exc.__cause__, sa_exc.IntegrityError):
                raise self._integrity_error(result) from exc
            raise
        return changed

    def _upsert_run(self, connection: Connection, values: dict[str, Any], now: datetime) -> bool:
        upsert = _run_upsert(connection.dialect.name, tuple(values))
        row = connection.execute(upsert, {**values, "created_at": now, "updated_at": now})
        return row.first() is not None

    def _replace_criteria(self, connection: Connection, result: RunResult) -> None:
        connection.execute(
            delete(criterion_scores).where(criterion_scores.c.run_id == result.run_id)
        )
        rows = convert.criterion_values(result)
        if rows:
            connection.execute(criterion_scores.insert(), rows)

    def _integrity_error(self, result: RunResult) -> StoreRefused:
        with self._read() as connection:
            known = _experiment_exists(connection, result.experiment_id)
        if not known:
            return StoreRefused(
                f"Run {result.run_id!r} belongs to experiment {result.experiment_id!r}, "
                "which is not saved; call save_experiment first."
            )
        return StoreRefused(f"The database refused run {result.run_id!r}.")

    def get_run(self, run_id: str) -> RunResult | None:
        with self._read() as connection:
            row = connection.execute(select(runs).where(runs.c.run_id == run_id)).first()
            if row is None:
                return None
            criteria = connection.execute(
                select(criterion_scores)
                .where(criterion_scores.c.run_id == run_id)
                .order_by(criterion_scores.c.position)
            ).all()
        return convert.run_result(row, list(criteria))

    def list_runs(self, experiment_id: str) -> list[RunResult]:
        """Every run of the experiment, ordered by case id, arm name, then trial."""
        with self._read() as connection:
            rows = connection.execute(
                select(runs)
                .where(runs.c.experiment_id == experiment_id)
                .order_by(runs.c.case_id, runs.c.arm, runs.c.trial)
            ).all()
            criteria = connection.execute(
                select(criterion_scores)
                .join(runs, runs.c.run_id == criterion_scores.c.run_id)
                .where(runs.c.experiment_id == experiment_id)
                .order_by(criterion_scores.c.run_id, criterion_scores.c.position)
            ).all()
        by_run: dict[str, list[Any]] = {}
        for criterion in criteria:
            by_run.setdefault(criterion.run_id, []).append(criterion)
        return [convert.run_result(row, by_run.get(row.run_id, [])) for row in rows]

    def runs_version(self, experiment_id: str) -> tuple[int, str]:
        """How many runs the experiment has stored and when one last changed (one query): equal
        versions mean equal `list_runs` results, so readers can cache on it (the dashboard)."""
        with self._read() as connection:
            count, newest = connection.execute(
                select(func.count(), func.max(runs.c.updated_at)).where(
                    runs.c.experiment_id == experiment_id
                )
            ).one()
        return int(count), str(newest or "")

    def spend(self, repo: str, since: datetime, until: datetime) -> float:
        """What the runs of `repo`'s experiments created in [since, until) cost, agent and
        sandbox (one query: the bot asks on every /eval when a daily cap is set)."""
        query = (
            select(runs.c.cost_usd, runs.c.sandbox_usage)
            .join(experiments, experiments.c.id == runs.c.experiment_id)
            .where(experiments.c.repo == repo)
            .where(experiments.c.created_at >= since, experiments.c.created_at < until)
        )
        with self._read() as connection:
            rows = connection.execute(query).all()
        return sum(convert.run_cost(cost, sandbox) for cost, sandbox in rows)

    def count_runs(self, experiment_id: str) -> dict[str, int]:
        """How many runs the experiment has stored, by status (statuses with none are absent)."""
        with self._read() as connection:
            rows = connection.execute(
                select(runs.c.status, func.count())
                .where(runs.c.experiment_id == experiment_id)
                .group_by(runs.c.status)
            ).all()
        return {status: count for status, count in rows}

    # -- webhook deliveries ----------------------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str) -> bool:
        """Remember a webhook delivery; True only the first time this id is seen."""
        if not delivery_id:
            raise StoreError("A webhook delivery needs a non-empty delivery id.")
        with self._write() as connection:
            stmt = insert(connection.dialect.name, webhook_deliveries).values(
                delivery_id=delivery_id, event=event, received_at=convert.utc_now()
            )
            inserted = connection.execute(
                stmt.on_conflict_do_nothing(
                    index_elements=[webhook_deliveries.c.delivery_id]
                ).returning(webhook_deliveries.c.delivery_id)
            ).first()
        return inserted is not None

    def claim_delivery(self, delivery_id: str, event: str, lease_s: float) -> bool:
        """Claim a webhook delivery for handling, for `lease_s` seconds unless finished or
        released first. True when it is this caller's: the id is new, was released after a
        failure, or its claim's lease expired (the claiming process died). One statement, so two
        processes or hosts claiming at once get one True."""
        if not delivery_id:
            raise StoreError("A webhook delivery needs a non-empty delivery id.")
        now = convert.utc_now()
        with self._write() as connection:
            stmt = insert(connection.dialect.name, webhook_deliveries).values(
                delivery_id=delivery_id,
                event=event,
                received_at=now,
                lease_expires_at=now + timedelta(seconds=lease_s),
            )
            column = webhook_deliveries.c.lease_expires_at
            claimed = connection.execute(
                stmt.on_conflict_do_update(
                    index_elements=[webhook_deliveries.c.delivery_id],
                    set_={
                        "event": stmt.excluded.event,
                        "received_at": stmt.excluded.received_at,
                        "lease_expires_at": stmt.excluded.lease_expires_at,
                    },
                    where=column.is_not(None) & (column < now),
                ).returning(webhook_deliveries.c.delivery_id)
            ).first()
        return claimed is not None

    def finish_delivery(self, delivery_id: str) -> None:
        """The claimed delivery was handled: a redelivery of it is a duplicate from now on."""
        with self._write() as connection:
            connection.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == delivery_id)
                .values(lease_expires_at=None)
            )

    def release_delivery(self, delivery_id: str) -> None:
        """The claimed delivery failed: forget it, so that a redelivery (at any process) runs.
        A handled delivery is kept."""
        with self._write() as connection:
            connection.execute(
                delete(webhook_deliveries).where(
                    (webhook_deliveries.c.delivery_id == delivery_id)
                    & webhook_deliveries.c.lease_expires_at.is_not(None)
                )
            )

    # -- shared rate limits ----------------------------------------------------------------------

    def take_rate_slot(self, name: str, interval_s: float, tolerance_s: float = 0.0) -> float:
        """Take the next slot of the rate limit `name`, shared by every process using this
        database; return the seconds to wait before using it (workflows/store/rate_limits.py)."""
        with self._write() as connection:
            return take_slot(connection, name, interval_s, tolerance_s)


def _experiment_status(status: str) -> ExperimentStatus:
    try:
        return ExperimentStatus(status)
    except ValueError:
        allowed = ", ".join(s.value for s in ExperimentStatus)
        raise StoreError(f"Unknown experiment status {status!r}; use one of: {allowed}.") from None


def _finished_at_on_change(new: Any) -> Any:
    """Keep the stored finished_at while the status stays the same; else take the new one."""
    return case(
        (experiments.c.status == new.status, experiments.c.finished_at),
        else_=new.finished_at,
    )


def _experiment_exists(connection: Connection, experiment_id: str) -> bool:
    found = connection.execute(select(experiments.c.id).where(experiments.c.id == experiment_id))
    return found.first() is not None


def _experiment_record(row: Any) -> ExperimentRecord:
    try:
        return convert.experiment_record(row)
    except ValueError as exc:
        raise StoreError(
            f"Experiment {row.id!r} has a stored spec this version cannot read."
        ) from exc


def _check_run(result: RunResult) -> None:
    expected = f"{result.experiment_id}/{result.case_id}/{result.arm}/{result.trial}"
    if result.run_id != expected:
        raise StoreRefused(
            f"Run id {result.run_id!r} does not match its cell; expected {expected!r}."
        )
    names = [c.name for c in result.criteria]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise StoreRefused(
            f"Run {result.run_id!r} scores criterion {repeated[0]!r} more than once."
        )


def _make_parent_dir(database: str) -> None:
    try:
        Path(database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"Cannot create the folder for the SQLite database: {exc}.") from None


@functools.cache
def _run_upsert(dialect_name: str, columns: tuple[str, ...]) -> Any:
    """Insert a run, or replace the stored one unless it has the same content hash; returns the
    run id when it wrote. Built once per dialect and column set (values are bound at execute):
    building it per run was most of save_run's CPU."""
    stmt = insert(dialect_name, runs)
    new = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[runs.c.run_id],
        set_={name: new[name] for name in columns if name != "run_id"}
        | {"updated_at": new.updated_at},
        where=runs.c.content_hash != new.content_hash,
    ).returning(runs.c.run_id)
