"""Workers run workflow code without Temporal's sandbox (Settings.temporal.workflow_sandbox); the
tests replay real histories through it instead (tests/support/temporal.replay_in_sandbox). These
tests show that check bites: a workflow that reads the clock runs fine on the worker, and fails
replay."""

from __future__ import annotations

import time
import uuid

from temporalio.worker import Worker

from tests.fakes.clock_workflow import ReadsTheClock
from tests.support.temporal import replay_in_sandbox
from workflows.engine.engine_client import connect
from workflows.engine.worker import workflow_runner
from workflows.settings import Settings


async def test_a_workflow_reading_the_clock_runs_unsandboxed_and_fails_the_sandboxed_replay(
    engine_settings: Settings,
) -> None:
    client = await connect(engine_settings)
    queue, workflow_id = engine_settings.temporal.run_task_queue, f"clock-{uuid.uuid4().hex[:8]}"
    runner = workflow_runner(engine_settings.temporal.workflow_sandbox)  # the default: no sandbox
    async with Worker(client, task_queue=queue, workflows=[ReadsTheClock], workflow_runner=runner):
        result = await client.execute_workflow(ReadsTheClock.run, id=workflow_id, task_queue=queue)
    assert abs(result - time.time()) < 60  # the worker (no sandbox) let it read the clock

    replayed = await replay_in_sandbox(client, [workflow_id], workflows=[ReadsTheClock])

    failure = replayed.replay_failures[next(iter(replayed.replay_failures))]
    assert "Cannot access time.time" in str(failure)
