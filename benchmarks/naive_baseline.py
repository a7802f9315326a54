"""The naive design the issue measures against: one child workflow per cell running five sequential
trivial activities, all on one task queue, no sandbox and no store. Used by orchestration.py as the
same-run baseline, with the workflow runner evalbot's worker has
(Settings.temporal.workflow_sandbox);
`python naive_baseline.py ADDRESS QUEUE [sandboxed]` runs one more worker process for it."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

STAGES = ("provision", "execute", "collect", "score", "teardown")
# a short run's stages today: all in one local activity (docs/engine.md)
SHORT_RUN_STAGES = ("run_short_cell",)


@activity.defn(name="naive_stage")
async def naive_stage(stage: str) -> str:
    return stage


@workflow.defn(name="NaiveRunWorkflow")
class NaiveRunWorkflow:
    @workflow.run
    async def run(
        self, queue: str, local: bool, cells: int = 1, stages: list[str] | None = None
    ) -> None:
        """The five stages as regular activities (the naive design), or as local activities (the
        shape of evalbot's short runs, with none of their work: the floor of that design), for
        one cell or for `cells` side by side (the shape of evalbot's batches). `stages`: other
        stage names than the five (SHORT_RUN_STAGES, the shape of a short run today)."""
        names = tuple(stages or STAGES)
        await asyncio.gather(*(_stages(queue, local, names) for _ in range(cells)))


async def _stages(queue: str, local: bool, names: tuple[str, ...]) -> None:
    timeout = timedelta(minutes=1)
    for stage in names:
        if local:
            await workflow.execute_local_activity(
                "naive_stage", stage, start_to_close_timeout=timeout
            )
        else:
            await workflow.execute_activity(
                "naive_stage", stage, task_queue=queue, start_to_close_timeout=timeout
            )


@workflow.defn(name="NaiveExperimentWorkflow")
class NaiveExperimentWorkflow:
    def __init__(self) -> None:
        self.in_flight = 0

    @workflow.run
    async def run(
        self,
        cells: int,
        queue: str,
        max_parallel: int,
        local: bool = False,
        batch: int = 1,
        stages: list[str] | None = None,
    ) -> None:
        """`cells` cells, `batch` to a child workflow, at most `max_parallel` cells in flight."""
        tasks = []
        for index in range(0, cells, batch):
            size = min(batch, cells - index)
            await workflow.wait_condition(lambda: self.in_flight + size <= max_parallel)  # noqa: B023
            self.in_flight += size
            tasks.append(asyncio.ensure_future(self._child(index, queue, local, size, stages)))
        await asyncio.gather(*tasks)

    async def _child(
        self, index: int, queue: str, local: bool, size: int, stages: list[str] | None
    ) -> None:
        try:
            await workflow.execute_child_workflow(
                NaiveRunWorkflow.run,
                args=[queue, local, size, stages],
                id=f"{workflow.info().workflow_id}/{index}",
                task_queue=queue,
            )
        finally:
            self.in_flight -= size


def worker(client: Client, queue: str, sandboxed: bool) -> Worker:
    from workflows.engine.worker import workflow_runner

    return Worker(
        client,
        task_queue=queue,
        workflows=[NaiveRunWorkflow, NaiveExperimentWorkflow],
        activities=[naive_stage],
        workflow_runner=workflow_runner(sandboxed, "naive_baseline"),
        max_cached_workflows=10_000,
        max_concurrent_workflow_tasks=100,
        max_concurrent_activities=64,
        max_concurrent_local_activities=64,
    )


async def serve(address: str, queue: str, sandboxed: bool) -> None:
    client = await Client.connect(address)
    await worker(client, queue, sandboxed).run()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3:] == ["sandboxed"]))
