"""sql_query: a query over the world's SQLite database as the run left it returns `expected`.

The database is opened read-only (`mode=ro`, `query_only`), from `world_changes` when the run
changed it, else from the original world; a run that left a write-ahead log is read from a
private temporary copy of database + log, so the original world is never touched. A progress
handler interrupts queries that run longer than `timeout_s`.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from workflows.catalog.models import GraderKind, World
from workflows.scoring.graders.grader_base import (
    CannotGrade,
    Grade,
    GradeContext,
    Grader,
    Params,
    passed,
)
from workflows.scoring.outputs_layout import WorldView, safe_relative
from workflows.scoring.text_helpers import loosely_equal, one_line

PROGRESS_STEPS = 1000  # SQLite VM instructions between time-limit checks


class SqlParams(Params):
    query: str = Field(min_length=1)
    expected: Any
    database: str | None = Field(None, description="World-relative; default: the world's.")
    ordered: bool = Field(True, description="Compare rows in order (false: as a multiset).")
    timeout_s: float = Field(5.0, gt=0, le=60)

    @field_validator("database")
    @classmethod
    def _inside_world(cls, value: str | None) -> str | None:
        return None if value is None else safe_relative(value)


Row = list[Any]


@contextmanager
def open_read_only(path: Path, wal: Path | None = None) -> Iterator[sqlite3.Connection]:
    """A read-only connection; with a write-ahead log, over a private copy of both files."""
    if wal is None:
        with closing(_connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1")) as connection:
            yield connection
        return
    with tempfile.TemporaryDirectory(prefix="evalbot-sql-") as scratch:
        copy = Path(scratch) / "db.sqlite"
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, Path(scratch) / "db.sqlite-wal")
        with closing(_connect(f"{copy.resolve().as_uri()}?mode=ro")) as connection:
            yield connection


def _connect(uri: str) -> sqlite3.Connection:
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False)
    connection.execute("PRAGMA query_only = ON")
    return connection


def run_query(connection: sqlite3.Connection, query: str, timeout_s: float) -> list[Row]:
    """All rows of `query`; sqlite3.OperationalError('interrupted') past the time limit."""
    deadline = time.monotonic() + timeout_s
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
    try:
        return [list(row) for row in connection.execute(query).fetchall()]
    finally:
        connection.set_progress_handler(None, 0)


def matches(rows: list[Row], expected: Any, *, ordered: bool) -> bool:
    """Scalar: exactly one cell equal to it. List of lists: the rows. List of scalars: the values
    of a one-column result, or else the single row."""
    if not isinstance(expected, list):
        return len(rows) == 1 and len(rows[0]) == 1 and loosely_equal(rows[0][0], expected)
    if all(isinstance(item, list) for item in expected) and expected:
        return _same_rows(rows, expected, ordered)
    if all(len(row) == 1 for row in rows):
        return _same_rows(rows, [[item] for item in expected], ordered)
    return _same_rows(rows, [expected], ordered)


def _same_rows(rows: list[Row], expected: list[Row], ordered: bool) -> bool:
    if len(rows) != len(expected):
        return False
    if ordered:
        return all(loosely_equal(a, e) for a, e in zip(rows, expected, strict=True))
    remaining = list(rows)
    for wanted in expected:
        hit = next((i for i, row in enumerate(remaining) if loosely_equal(row, wanted)), None)
        if hit is None:
            return False
        remaining.pop(hit)
    return True


def _database(params: SqlParams, world: WorldView) -> str:
    relative = params.database or world.database
    if relative is None:
        raise CannotGrade("no database: set `database` in params or in world.toml")
    return relative


def grade_sql(params: SqlParams, ctx: GradeContext) -> Grade:
    relative = _database(params, ctx.world)
    if ctx.world.was_deleted(relative):
        return passed(False, f"the run deleted the database {relative}")
    path = ctx.world.after(relative)
    if path is None:
        raise CannotGrade(f"database {relative} does not exist in the world")
    rows = _query(params, path, ctx.world.after(relative + "-wal"))
    if matches(rows, params.expected, ordered=params.ordered):
        return passed(True, f"query returned the expected {_shape(rows)}")
    shown = one_line(repr(rows[:3]), 120)
    return passed(False, f"query returned {_shape(rows)} {shown}, expected {params.expected!r}")


def _query(params: SqlParams, path: Path, wal: Path | None) -> list[Row]:
    try:
        with open_read_only(path, wal) as connection:
            return run_query(connection, params.query, params.timeout_s)
    except sqlite3.OperationalError as error:
        if "interrupted" in str(error):
            raise CannotGrade(f"query ran longer than {params.timeout_s:g}s") from None
        raise CannotGrade(f"SQL error: {error}") from None
    except sqlite3.Error as error:
        raise CannotGrade(f"SQL error: {error}") from None


def _shape(rows: list[Row]) -> str:
    return f"{len(rows)} row(s)"


def _query_prepares(params: SqlParams, world: World) -> list[str]:
    relative = params.database or world.database
    if relative is None:
        return ["no database: set `database` in params or in world.toml"]
    path = world.path / relative
    if not path.is_file():
        return [f"database {relative} is not a file in world '{world.name}'"]
    try:
        with open_read_only(path) as connection:
            connection.execute(f"EXPLAIN {params.query}").fetchall()
    except sqlite3.Error as error:
        return [f"query does not prepare on world '{world.name}': {error}"]
    return []


SQL_QUERY = Grader(GraderKind.SQL_QUERY, SqlParams, grade_sql, check_world=_query_prepares)
