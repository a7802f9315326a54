"""Fault-test fixtures: a generated 200-cell experiment, a fake GitHub to report to, settings for a
worker subprocess. Each test gets its own task queues and data folder."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import ChaosAgent, write_agent, write_catalog
from tests.fakes.github_server import FakeGitHub
from workflows.engine.devserver import DevServer
from workflows.settings import Settings

REPO = "octo/agent"
PR = 7


@functools.cache
def _key() -> tuple[str, Any]:
    fake = FakeGitHub()
    return fake.app_private_key, fake._app_public_key


def new_github(fake: FakeGitHub | None = None) -> FakeGitHub:
    fake = fake or FakeGitHub()
    fake.app_private_key, fake._app_public_key = _key()
    fake.start()
    fake.add_repo(REPO)
    return fake


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = new_github()
    yield fake
    fake.stop()


def chaos_settings(
    root: Path, temporal_address: str, github: FakeGitHub, **changes: Any
) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    base = Settings(
        data_dir=root / "state",
        catalog_root=root / "catalog",
        temporal={
            "address": temporal_address,
            "run_task_queue": f"chaos-runs-{suffix}",
            "collect_task_queue": f"chaos-collect-{suffix}",
            "score_task_queue": f"chaos-score-{suffix}",
            "heartbeat_timeout_s": 4,
        },
        sandbox={"poll_interval_s": 0.2, "max_concurrent_runs": 8, "max_concurrent_collect": 4},
        github={
            "api_url": github.base_url,
            "app_id": str(github.app_id),
            "private_key": github.app_private_key,
            "timeout_s": 3,
        },
    )
    return base.with_changes(**changes)


@pytest.fixture
def settings(tmp_path: Path, temporal_server: DevServer, github: FakeGitHub) -> Settings:
    write_catalog(tmp_path / "catalog")
    return chaos_settings(tmp_path, temporal_server.address, github)


@pytest.fixture
def agent(tmp_path: Path) -> ChaosAgent:
    return write_agent(tmp_path / "agent")
