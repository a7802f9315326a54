"""Engine test fixtures: settings pointed at the session's Temporal server, with task queues of
their own per test so workers of different tests never take each other's tasks."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from workflows.engine.devserver import DevServer
from workflows.settings import Settings


@pytest.fixture
def engine_settings(tmp_path: Path, temporal_server: DevServer) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return Settings(
        data_dir=tmp_path / "evalbot",
        catalog_root=TINY_CATALOG,
        temporal_address=temporal_server.address,
        run_task_queue=f"runs-{suffix}",
        collect_task_queue=f"collect-{suffix}",
        score_task_queue=f"score-{suffix}",
        poll_interval_s=0.2,
    )


@pytest.fixture
def agent_repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")
