"""Alembic migration scripts for the store (see docs/store.md for the workflow)."""
