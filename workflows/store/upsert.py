"""`INSERT ... ON CONFLICT` for the two dialects the store supports (same API in SQLAlchemy)."""

from __future__ import annotations

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite

Upsert = postgresql.Insert | sqlite.Insert


def insert(dialect_name: str, table: Table) -> Upsert:
    """The dialect's insert construct, which has on_conflict_do_nothing/_do_update."""
    if dialect_name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
