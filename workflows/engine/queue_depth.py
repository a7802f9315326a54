"""Task-queue backlog for the worker's metrics (`evalbot_task_queue_backlog`): every few seconds,
one DescribeTaskQueue per queue and task type, with the server's approximate backlog count. Cheap
(a handful of RPCs per interval, nothing from the store) and identical on every worker, so a
dashboard takes the max per queue (infra/grafana/evalbot-dashboard.json)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

from workflows.engine.telemetry import EngineMetrics
from workflows.engine.types import StageQueues

log = logging.getLogger(__name__)
KINDS = {
    "workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
}


def queue_names(queues: StageQueues) -> list[str]:
    """The distinct task queues of the stages (provision shares runs unless set)."""
    names = [queues.runs, queues.collect, queues.score, queues.provision]
    return sorted({name for name in names if name})


async def backlog(client: Client, queue: str, kind: str) -> int:
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=queue),
        task_queue_type=KINDS[kind],
        report_stats=True,
    )
    response = await client.workflow_service.describe_task_queue(request)
    return int(response.stats.approximate_backlog_count)


async def record_backlog(client: Client, queues: Sequence[str], metrics: EngineMetrics) -> None:
    for queue in queues:
        for kind in KINDS:
            count = await backlog(client, queue, kind)
            metrics.queue_backlog.labels(queue, kind).set(count)


async def watch_backlog(
    client: Client, queues: Sequence[str], metrics: EngineMetrics, every_s: float
) -> None:
    """Refresh the gauges until cancelled; a failed read is logged and tried again next time."""
    while True:
        try:
            await record_backlog(client, queues, metrics)
        except RPCError as error:
            log.warning("could not read the task queues' backlog: %s", error)
        await asyncio.sleep(every_s)
