"""SQLite is set up for several writers: WAL journal, busy timeout, enforced foreign keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.pool import StaticPool

from workflows.store import Store, StoreError
from workflows.store.engine import make_engine, parse_url

PRAGMAS = ("journal_mode", "busy_timeout", "foreign_keys")


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'evalbot.db'}") as store:
        store.migrate()
        with store._engine.connect() as connection:
            pragmas = {
                name: connection.execute(text(f"PRAGMA {name}")).scalar_one() for name in PRAGMAS
            }
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 30000, "foreign_keys": 1}


def test_a_bare_postgresql_url_uses_the_shipped_driver() -> None:
    store = Store("postgresql://evalbot@db.internal/evalbot")
    assert store.dialect == "postgresql"
    assert store._engine.dialect.driver == "psycopg2"


def test_make_engine_is_the_one_factory_for_strings_and_urls(tmp_path: Path) -> None:
    """The metrics endpoint, the prewarm and secret-sync records and `revise` all call it."""
    raw = f"sqlite:///{tmp_path / 'evalbot.db'}"
    for url in (raw, parse_url(raw)):
        engine = make_engine(url)
        try:
            with engine.connect() as connection:
                modes = [connection.execute(text(f"PRAGMA {p}")).scalar_one() for p in PRAGMAS]
        finally:
            engine.dispose()
        assert modes == ["wal", 30000, 1]
    assert isinstance(make_engine("sqlite://").pool, StaticPool)
    assert make_engine("postgres://evalbot@db.internal/evalbot").dialect.driver == "psycopg2"
    with pytest.raises(StoreError, match="not supported"):
        make_engine("mysql://evalbot@db.internal/evalbot")
