"""The store: sqlmodel tables, Alembic migrations, and the `Store` API over SQLite or PostgreSQL."""

from workflows.store.errors import StoreError
from workflows.store.records import ExperimentRecord, ExperimentStatus
from workflows.store.store import Store

__all__ = ["ExperimentRecord", "ExperimentStatus", "Store", "StoreError"]
