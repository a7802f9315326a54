"""The store: sqlmodel tables, Alembic migrations, and the `Store` API over SQLite or PostgreSQL."""

from workflows.store.store import Store
from workflows.store.store_errors import StoreError, StoreRefused
from workflows.store.store_records import ExperimentRecord, ExperimentStatus

__all__ = ["ExperimentRecord", "ExperimentStatus", "Store", "StoreError", "StoreRefused"]
