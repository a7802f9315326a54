"""The store: sqlmodel tables, Alembic migrations, and the `Store` API over SQLite or PostgreSQL."""

from workflows.store.store import Store
from workflows.store.store_errors import StoreError
from workflows.store.store_records import ExperimentRecord, ExperimentStatus

__all__ = ["ExperimentRecord", "ExperimentStatus", "Store", "StoreError"]
