"""The engine factory (`make_engine`) for SQLite and PostgreSQL; database errors, translated.

SQLite is tuned for several writers (threads or worker processes) on one file: WAL journal, a busy
timeout, and SQLAlchemy-emitted `BEGIN` so that write transactions take the write lock up front
(`BEGIN IMMEDIATE`) instead of failing when a read lock cannot be upgraded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import StaticPool

from workflows.store.store_errors import StoreError

SUPPORTED_BACKENDS = ("sqlite", "postgresql")
BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "evalbot_write"
"""Execution option that marks a transaction as a writer (SQLite: BEGIN IMMEDIATE)."""

_URL_HINT = "use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
_DEFAULT_DRIVERS = {"postgresql": "postgresql+psycopg2", "postgres": "postgresql+psycopg2"}
"""SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; evalbot ships psycopg2."""


def parse_url(raw: str | URL) -> URL:
    """The URL (bare postgresql:// gets psycopg2), or a StoreError that does not repeat it."""
    try:
        url = make_url(raw)
    except (sa_exc.ArgumentError, ValueError, TypeError):
        raise StoreError(f"The database URL is not a valid SQLAlchemy URL; {_URL_HINT}.") from None
    if url.drivername in _DEFAULT_DRIVERS:
        url = url.set(drivername=_DEFAULT_DRIVERS[url.drivername])
    if url.get_backend_name() not in SUPPORTED_BACKENDS:
        raise StoreError(f"The database backend {url.drivername!r} is not supported; {_URL_HINT}.")
    return url


def safe_url(url: URL) -> str:
    """The URL with any password masked, fit for messages and logs."""
    return url.render_as_string(hide_password=True)


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(url: str | URL) -> Engine:
    """The one place evalbot builds a database engine: pooled and thread-safe, PostgreSQL with
    pre-ping, SQLite tuned for several writers (module docstring). StoreError on a bad URL."""
    url = parse_url(url)
    try:
        engine = create_engine(url, **_engine_options(url))
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        raise StoreError(
            f"Cannot use the database URL {safe_url(url)}: {_first_line(exc)}."
        ) from None
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect(wal=not is_memory_sqlite(url)))
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _engine_options(url: URL) -> dict[str, Any]:
    if url.get_backend_name() != "sqlite":
        return {"pool_pre_ping": True}
    options: dict[str, Any] = {
        "connect_args": {"timeout": BUSY_TIMEOUT_S, "check_same_thread": False}
    }
    if is_memory_sqlite(url):
        options["poolclass"] = StaticPool  # one shared connection: the database lives in it
    return options


def _sqlite_on_connect(*, wal: bool) -> Any:
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (see _sqlite_begin)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        if wal:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    return on_connect


def _sqlite_begin(connection: Connection) -> None:
    writer = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")


@contextmanager
def translated_errors(url: URL) -> Iterator[None]:
    """Turn SQLAlchemy and driver errors into a one-sentence StoreError."""
    try:
        yield
    except sa_exc.DBAPIError as exc:
        raise StoreError(describe_database_error(exc, url)) from exc
    except sa_exc.SQLAlchemyError as exc:
        raise StoreError(f"Database error at {safe_url(url)}: {_first_line(exc)}.") from exc


def describe_database_error(exc: sa_exc.DBAPIError, url: URL) -> str:
    """One sentence naming what failed, where (password masked), and what to do if obvious."""
    where = safe_url(url)
    detail = _first_line(exc.orig if exc.orig is not None else exc)
    if exc.statement is None or exc.connection_invalidated:
        hint = " (does its folder exist?)" if url.get_backend_name() == "sqlite" else ""
        return f"Cannot connect to the database at {where}{hint}: {detail}."
    if _is_missing_table(exc):
        return f"The database at {where} has no evalbot schema; run Store.migrate() ({detail})."
    return f"Database error at {where}: {detail}."


def _is_missing_table(exc: sa_exc.DBAPIError) -> bool:
    code = getattr(exc.orig, "pgcode", None)
    return code == "42P01" or "no such table" in str(exc.orig)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__).rstrip(".")
