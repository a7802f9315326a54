"""One workflow calling one activity: enough traffic for the Temporal SDK's Prometheus exporter to
show its worker, workflow-task and activity series (tests/infra/test_metrics_names.py)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="echo")
async def echo(text: str) -> str:
    return text


@workflow.defn(name="Echo")
class Echo:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(
            echo, text, start_to_close_timeout=timedelta(seconds=30)
        )
