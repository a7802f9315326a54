"""Alembic environment: runs on the connection `workflows.store.schema` passes in.

There is no offline (SQL script) mode and no alembic.ini: migrations always run through
`Store.migrate()` or `python -m workflows.store`, which open the connection and the transaction.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from workflows.store.tables import metadata


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError("evalbot migrations run through workflows.store.schema, not the CLI")
    run_migrations(connection)


main()
