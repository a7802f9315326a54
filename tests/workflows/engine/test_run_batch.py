"""Short cells run in groups (RunBatchWorkflow, docs/engine.md "Batches"): how cells are grouped,
and — on the real Temporal dev server, with stand-in stages — that each cell of a batch runs on its
own: one cell's failure is recorded for that cell alone, and a cancel records every cell."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from tests.fakes.stages import StandInStages
from tests.support.experiments import make_spec, run_input
from workflows.catalog.models import CellRef
from workflows.engine.client import connect, stage_queues
from workflows.engine.types import PreparedArm, RunInput, RunSummary
from workflows.engine.worker import workflow_runner
from workflows.engine.workflows import RunBatchWorkflow, batch_size, run_groups
from workflows.settings import Settings

SHORT = PreparedArm(image="img", command="true", timeout_s=60, limits={}, local_stages=True)
LONG = dataclasses.replace(SHORT, local_stages=False)


def cells(n: int, arms: tuple[str, ...] = ("main",)) -> list[CellRef]:
    return make_spec(n_cases=n, trials=1, arms=arms).cells()


def test_short_cells_are_grouped_in_order_and_the_rest_run_alone() -> None:
    spec_cells = cells(5, arms=("main", "pr"))  # case-major: main, pr, main, pr, ...
    groups = run_groups(spec_cells, {"main": SHORT, "pr": LONG}, size=2)
    m = [c for c in spec_cells if c.arm == "main"]
    p = [c for c in spec_cells if c.arm == "pr"]
    expected = [[p[0]], [m[0], m[1]], [p[1]], [p[2]], [m[2], m[3]], [p[3]], [p[4]], [m[4]]]
    assert groups == expected


@pytest.mark.parametrize(
    ("requested", "parallel", "expected"),
    [(10, 500, 10), (10, 128, 10), (10, 20, 5), (10, 8, 2), (10, 6, 1), (1, 500, 1), (50, 40, 10)],
)
def test_a_batch_is_at_most_a_quarter_of_the_cells_in_flight(
    requested: int, parallel: int, expected: int
) -> None:
    assert batch_size(requested, parallel) == expected


@contextlib.asynccontextmanager
async def batch_worker(settings: Settings, stages: StandInStages) -> AsyncIterator[Client]:
    client = await connect(settings)
    runs = Worker(
        client,
        task_queue=settings.run_task_queue,
        workflows=[RunBatchWorkflow],
        activities=stages.activities(),
        workflow_runner=workflow_runner(False),
    )
    score = Worker(client, task_queue=settings.score_task_queue, activities=[stages.record_error])
    async with runs, score:
        yield client


def batch_of(settings: Settings, n: int) -> list[RunInput]:
    queues = stage_queues(settings)
    quick = dataclasses.replace(SHORT, quick_provision=True)
    return [
        dataclasses.replace(run_input(cell), queues=queues, prepared=quick) for cell in cells(n)
    ]


async def run_batch(client: Client, settings: Settings, jobs: list[RunInput]) -> list[RunSummary]:
    return await client.execute_workflow(
        RunBatchWorkflow.run,
        jobs,
        id=f"batch-{uuid.uuid4().hex[:8]}",
        task_queue=settings.run_task_queue,
    )


async def test_a_failing_cell_is_recorded_alone_and_the_others_score(
    engine_settings: Settings,
) -> None:
    jobs = batch_of(engine_settings, 4)
    ok, failed_stage, failed_teardown, ok_too = (job.cell.run_id for job in jobs)
    stages = StandInStages(
        fail={("execute", failed_stage): "runner broke", ("teardown", failed_teardown): "stuck"}
    )
    async with batch_worker(engine_settings, stages) as client:
        summaries = await run_batch(client, engine_settings, jobs)

    assert [s.run_id for s in summaries] == [job.cell.run_id for job in jobs]
    statuses = {s.run_id: s.status for s in summaries}
    assert statuses[ok] == statuses[ok_too] == "scored"
    assert statuses[failed_stage] == statuses[failed_teardown] == "sandbox_error"
    assert stages.recorded[failed_stage] == ("sandbox_error", "runner broke")  # a stage's failure
    assert stages.recorded[failed_teardown] == ("sandbox_error", "run failed: stuck")  # the run's
    assert ok not in stages.recorded and ok_too not in stages.recorded
    torn_down = sorted(run for stage, run in stages.calls if stage == "teardown")
    assert torn_down == sorted(job.cell.run_id for job in jobs)  # each once, failures included


async def test_a_cancelled_batch_records_and_tears_down_every_cell(
    engine_settings: Settings,
) -> None:
    jobs = batch_of(engine_settings, 3)
    stages = StandInStages(hang={job.cell.run_id for job in jobs})
    async with batch_worker(engine_settings, stages) as client:
        handle = await client.start_workflow(
            RunBatchWorkflow.run,
            jobs,
            id=f"batch-{uuid.uuid4().hex[:8]}",
            task_queue=engine_settings.run_task_queue,
        )
        await asyncio.wait_for(stages.all_hanging.wait(), timeout=60)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    assert isinstance(failure.value.cause, CancelledError)
    assert stages.recorded == {job.cell.run_id: ("cancelled", "cancelled") for job in jobs}
    torn_down = sorted(run for stage, run in stages.calls if stage == "teardown")
    assert torn_down == sorted(job.cell.run_id for job in jobs)
