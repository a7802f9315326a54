"""The naive design the issue measures against: one child workflow per cell running five sequential
trivial activities, all on one task queue, no sandbox and no store. Used by orchestration.py as the
same-run baseline, with the workflow runner evalbot's worker has (Settings.workflow_sandbox);
`python naive_baseline.py ADDRESS QUEUE [sandboxed]` runs one more worker process for it."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

STAGES = ("provision", "execute", "collect", "score", "teardown")


@activity.defn(name="naive_stage")
async def naive_stage(stage: str) -> str:
    return stage


@workflow.defn(name="NaiveRunWorkflow")
class NaiveRunWorkflow:
    @workflow.run
    async def run(self, queue: str, local: bool) -> None:
        """The five stages as regular activities (the naive design), or as local activities (the
        shape of evalbot's short runs, with none of their work: the floor of that design)."""
        timeout = timedelta(minutes=1)
        for stage in STAGES:
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
    async def run(self, cells: int, queue: str, max_parallel: int, local: bool = False) -> None:
        tasks = []
        for index in range(cells):
            await workflow.wait_condition(lambda: self.in_flight < max_parallel)
            self.in_flight += 1
            tasks.append(asyncio.ensure_future(self._cell(index, queue, local)))
        await asyncio.gather(*tasks)

    async def _cell(self, index: int, queue: str, local: bool) -> None:
        try:
            await workflow.execute_child_workflow(
                NaiveRunWorkflow.run,
                args=[queue, local],
                id=f"{workflow.info().workflow_id}/{index}",
                task_queue=queue,
            )
        finally:
            self.in_flight -= 1


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
