"""The naive design the issue measures against: one child workflow per cell running five sequential
trivial activities, all on one task queue, no sandbox and no store. Used by orchestration.py as the
same-run baseline."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

STAGES = ("provision", "execute", "collect", "score", "teardown")


@activity.defn(name="naive_stage")
async def naive_stage(stage: str) -> str:
    return stage


@workflow.defn(name="NaiveRunWorkflow")
class NaiveRunWorkflow:
    @workflow.run
    async def run(self, queue: str) -> None:
        for stage in STAGES:
            await workflow.execute_activity(
                "naive_stage", stage, task_queue=queue, start_to_close_timeout=timedelta(minutes=1)
            )


@workflow.defn(name="NaiveExperimentWorkflow")
class NaiveExperimentWorkflow:
    def __init__(self) -> None:
        self.in_flight = 0

    @workflow.run
    async def run(self, cells: int, queue: str, max_parallel: int) -> None:
        tasks = []
        for index in range(cells):
            await workflow.wait_condition(lambda: self.in_flight < max_parallel)
            self.in_flight += 1
            tasks.append(asyncio.ensure_future(self._cell(index, queue)))
        await asyncio.gather(*tasks)

    async def _cell(self, index: int, queue: str) -> None:
        try:
            await workflow.execute_child_workflow(
                NaiveRunWorkflow.run,
                queue,
                id=f"{workflow.info().workflow_id}/{index}",
                task_queue=queue,
            )
        finally:
            self.in_flight -= 1
