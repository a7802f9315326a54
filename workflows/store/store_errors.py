"""The one exception the store raises: `str()` is a single sentence, without secrets."""

from __future__ import annotations


class StoreError(Exception):
    """The database could not be reached, is not migrated, or refused the data.

    Every public `Store` method raises this (never a raw SQLAlchemy or driver error). The message
    never contains a password: URLs in it are rendered with the password masked.
    """
