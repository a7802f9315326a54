"""SQLite is set up for several writers: WAL journal, busy timeout, enforced foreign keys."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from workflows.store import Store


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 'evalbot.db'}") as store:
        store.migrate()
        with store._engine.connect() as connection:
            pragmas = {
                name: connection.execute(text(f"PRAGMA {name}")).scalar_one()
                for name in ("journal_mode", "busy_timeout", "foreign_keys")
            }
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 30000, "foreign_keys": 1}


def test_a_bare_postgresql_url_uses_the_shipped_driver() -> None:
    store = Store("postgresql://evalbot@db.internal/evalbot")
    assert store.dialect == "postgresql"
    assert store._engine.dialect.driver == "psycopg2"
