"""One statement that takes the next slot of a shared rate limit (the `rate_buckets` table).

GCRA (the generic cell rate algorithm, a token bucket kept as one timestamp): the row holds
`next_at`, when the bucket's next slot is free. Taking a slot moves it to
`max(next_at, now) + interval` in one `INSERT ... ON CONFLICT DO UPDATE ... RETURNING`, so
callers in any process or host serialize on the row and each gets its own slot; the caller then
waits until its slot, less the burst tolerance. The clock is the database's on PostgreSQL
(`statement_timestamp()`, the same for the whole statement), so hosts whose clocks differ still
space their calls right; SQLite is one host's file, so its clock is that host's.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Connection, Float, cast, func, literal

from workflows.store.tables import rate_buckets
from workflows.store.upsert import insert


def take_slot(connection: Connection, name: str, interval_s: float, tolerance_s: float) -> float:
    """Take bucket `name`'s next slot; return how long the caller must wait before using it."""
    dialect = connection.dialect.name
    now = _now(dialect)
    new = insert(dialect, rate_buckets).values(name=name, next_at=now + interval_s)
    later = func.greatest if dialect == "postgresql" else func.max
    stmt = new.on_conflict_do_update(
        index_elements=[rate_buckets.c.name],
        set_={"next_at": later(rate_buckets.c.next_at, now) + interval_s},
    ).returning(rate_buckets.c.next_at, now.label("now"))
    next_at, at = connection.execute(stmt).one()
    slot = float(next_at) - interval_s
    return max(0.0, slot - tolerance_s - float(at))


def _now(dialect: str) -> Any:
    if dialect == "postgresql":
        return cast(func.extract("epoch", func.statement_timestamp()), Float)
    return literal(time.time(), Float)
