"""Alembic, driven programmatically: upgrade to head, report the revision, diff against the tables.

The migration scripts ship inside this package (`workflows/store/migrations/`), located through
`__file__`, so an installed evalbot can migrate without an alembic.ini or a source checkout.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from workflows.store.engine import WRITE_OPTION
from workflows.store.tables import metadata

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_MIGRATION_LOCK = 7_265_118_020  # pg_advisory_xact_lock key: one migrator at a time
_ALEMBIC_LOCK = threading.Lock()  # alembic's `op`/`context` proxies are process-global


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged scripts; `connection` is what env.py uses."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    config.attributes["connection"] = connection
    return config


def head_revision() -> str | None:
    """The newest revision the package ships."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def upgrade(engine: Engine) -> None:
    """Upgrade the database to head in one transaction, one migrator at a time."""
    writer = engine.execution_options(**{WRITE_OPTION: True})
    with _ALEMBIC_LOCK, writer.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        command.upgrade(alembic_config(connection), "head")


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None for an empty database)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def schema_diff(engine: Engine) -> list[Any]:
    """Alembic autogenerate's differences between the database and the sqlmodel tables."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))
