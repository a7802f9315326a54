"""The exceptions the store raises: `str()` is a single sentence, without secrets."""

from __future__ import annotations


class StoreError(Exception):
    """The database could not be reached, is not migrated, or refused the data.

    Every public `Store` method raises this (never a raw SQLAlchemy or driver error). The message
    never contains a password: URLs in it are rendered with the password masked.
    """


class StoreRefused(StoreError):
    """The database answered, and will not take this data as it is: a run of an experiment that
    is not saved, a run id that does not match its cell, a criterion scored twice. Retrying the
    same write cannot help, where a StoreError of an outage may pass (workflows/engine/activities.py
    waits those out)."""
