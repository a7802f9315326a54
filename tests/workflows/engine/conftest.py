"""Engine test fixtures: settings pointed at the session's Temporal server, with task queues of
their own per test so workers of different tests never take each other's tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from tests.support.temporal import engine_settings_for
from workflows.engine.devserver import DevServer
from workflows.settings import Settings


@pytest.fixture
def engine_settings(tmp_path: Path, temporal_server: DevServer) -> Settings:
    return engine_settings_for(tmp_path / "evalbot", temporal_server, TINY_CATALOG)


@pytest.fixture
def agent_repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")
