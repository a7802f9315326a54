"""Every store test runs twice: on a SQLite file and on the PostgreSQL server the suite starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workflows.store import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'evalbot.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated store on an empty database."""
    with Store(store_url) as migrated:
        migrated.migrate()
        yield migrated
