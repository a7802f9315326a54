"""Stage options: how the engine's workflows call each of their activities, in one table.

Every activity a workflow calls is a stage with options of its own (`StageOptions`): its
start-to-close timeout, its retry policy, the task queue (by role, resolved from the job's
`StageQueues`), whether it heartbeats, and when it runs as a local activity of its workflow instead
(docs/engine.md, "Stage options"). Workflow code names the activity by reference and its options
by constant, and `stage` places the call:

    provision = await stage(PROVISION, RunActivities.provision, job, on=job)

Workflow code: deterministic, and re-imported by the sandbox when tests replay histories, so what
it imports from the engine's pure models is passed through.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, overload

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows.engine.types import ExperimentInput, RunInput, StageQueues

A = TypeVar("A")
R = TypeVar("R")
_NO_ARG: Any = object()


class Queue(enum.Enum):
    """A stage's task queue, by role (StageQueues)."""

    RUNS = "runs"
    COLLECT = "collect"
    SCORE = "score"
    PROVISION = "provision"  # remote providers' rate-limited queue (docs/modal.md), else runs


class Local(enum.Enum):
    """When a stage runs as a local activity of its workflow (a cell's arm decides, PreparedArm)."""

    NEVER = "never"
    QUICK_PROVIDER = "quick provider"  # PreparedArm.quick_provision: sandboxes in milliseconds
    SHORT_RUN = "short run"  # PreparedArm.local_stages: a short run on a quick provider


@dataclass(frozen=True)
class StageOptions:
    queue: Queue
    start_to_close: timedelta
    retry: RetryPolicy
    local: Local = Local.NEVER
    # as a regular activity, heartbeat within StageQueues.heartbeat_timeout_s, so one a crashed
    # worker held is retried within that time instead of after its start-to-close timeout (local
    # activities have no heartbeats)
    heartbeat: bool = True
    # start_to_close is counted beyond the run's own timeout (`execute`: the agent's run)
    after_run_timeout: bool = False
    # touches the run's sandbox: with a host queue (ProvisionResult.host_queue) it runs there,
    # as a regular activity that heartbeats, whatever `queue` and `local` say (docs/engine.md,
    # "Host queues")
    host_bound: bool = False

    def task_queue(self, queues: StageQueues) -> str:
        roles = {
            Queue.RUNS: queues.runs,
            Queue.COLLECT: queues.collect,
            Queue.SCORE: queues.score,
            Queue.PROVISION: queues.provision or queues.runs,
        }
        return roles[self.queue]

    def is_local(self, on: RunInput | ExperimentInput) -> bool:
        if self.local is Local.NEVER:
            return False
        if not isinstance(on, RunInput):
            raise TypeError(f"{self.local} is decided by a cell's arm: pass the cell's RunInput")
        if self.local is Local.QUICK_PROVIDER:
            return on.prepared.quick_provision
        return on.prepared.local_stages


STAGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)
TEARDOWN_RETRY = RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=30))
RECORD_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30))  # until the store answers
PUBLISH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2)
)  # unlimited attempts: a GitHub outage delays the comment, it does not lose it

# -- the table: one StageOptions per stage ----------------------------------------------------
# ExperimentWorkflow
SAVE_EXPERIMENT = StageOptions(Queue.SCORE, timedelta(minutes=5), RECORD_RETRY)
FAILED_CELLS = StageOptions(Queue.SCORE, timedelta(minutes=5), RECORD_RETRY)
PREPARE_ARM = StageOptions(Queue.RUNS, timedelta(hours=2), STAGE_RETRY)
PUBLISH_REPORT = StageOptions(Queue.RUNS, timedelta(minutes=2), PUBLISH_RETRY)
FINISH_EXPERIMENT = StageOptions(Queue.SCORE, timedelta(minutes=5), RECORD_RETRY)
# a cell (RunWorkflow, RunBatchWorkflow)
PROVISION = StageOptions(
    Queue.PROVISION, timedelta(minutes=10), STAGE_RETRY, Local.QUICK_PROVIDER, heartbeat=False
)
EXECUTE = StageOptions(
    Queue.RUNS,
    timedelta(minutes=10),
    STAGE_RETRY,
    Local.SHORT_RUN,
    after_run_timeout=True,
    host_bound=True,
)
COLLECT = StageOptions(
    Queue.COLLECT, timedelta(hours=1), STAGE_RETRY, Local.SHORT_RUN, host_bound=True
)
SCORE = StageOptions(Queue.SCORE, timedelta(minutes=30), STAGE_RETRY, Local.SHORT_RUN)
# a short run's execute, collect and score as one local activity (never a regular one)
FINISH_SHORT_RUN = StageOptions(
    Queue.RUNS,
    EXECUTE.start_to_close + COLLECT.start_to_close + SCORE.start_to_close,
    STAGE_RETRY,
    Local.SHORT_RUN,
    after_run_timeout=True,
)
TEARDOWN = StageOptions(
    Queue.RUNS,
    timedelta(minutes=5),
    TEARDOWN_RETRY,
    Local.QUICK_PROVIDER,
    heartbeat=False,
    host_bound=True,
)
# every stage of a short run as one local activity (never a regular one, never on a host queue:
# the sandbox lives and dies inside it)
RUN_SHORT_CELL = StageOptions(
    Queue.RUNS,
    PROVISION.start_to_close + FINISH_SHORT_RUN.start_to_close + TEARDOWN.start_to_close,
    STAGE_RETRY,
    Local.SHORT_RUN,
    after_run_timeout=True,
)
RECORD_ERROR = StageOptions(Queue.SCORE, timedelta(minutes=5), RECORD_RETRY)  # run cell, parent


@overload
async def stage(
    options: StageOptions,
    activity: Callable[[Any, A], Awaitable[R]],
    arg: A,
    *,
    on: RunInput | ExperimentInput,
    run_timeout_s: int = 0,
    host_queue: str = "",
) -> R: ...


@overload
async def stage(
    options: StageOptions,
    activity: Callable[..., Awaitable[R]],
    *,
    args: Sequence[Any],
    on: RunInput | ExperimentInput,
    run_timeout_s: int = 0,
    host_queue: str = "",
) -> R: ...


async def stage(
    options: StageOptions,
    activity: Callable[..., Awaitable[Any]],
    arg: Any = _NO_ARG,
    *,
    args: Sequence[Any] = (),
    on: RunInput | ExperimentInput,
    run_timeout_s: int = 0,
    host_queue: str = "",
) -> Any:
    """Call a stage's activity method (e.g. `RunActivities.provision`) with its options for this
    job (`on`): a local activity of the workflow when its arm places it so, else a regular activity
    on the task queue of its role. `args` for activities of several arguments; `run_timeout_s`
    for a stage timed beyond the run's own timeout (`execute`); `host_queue` for a host-bound
    stage of a run whose sandbox is on that host (the provision's host queue)."""
    arguments = [arg] if arg is not _NO_ARG else list(args)
    timeout = options.start_to_close
    if options.after_run_timeout:
        timeout += timedelta(seconds=run_timeout_s)
    if host_queue and options.host_bound:
        return await workflow.execute_activity_method(
            activity,
            args=arguments,
            task_queue=host_queue,
            start_to_close_timeout=timeout,
            # the host's workers take their tasks within this, or the host is gone: not retried
            # by Temporal (the same queue), but by the workflow on another host (HOST_LOST)
            schedule_to_start_timeout=timedelta(seconds=on.queues.host_lost_s),
            heartbeat_timeout=timedelta(seconds=on.queues.heartbeat_timeout_s),
            retry_policy=options.retry,
        )
    if options.is_local(on):
        return await workflow.execute_local_activity_method(
            activity, args=arguments, start_to_close_timeout=timeout, retry_policy=options.retry
        )
    heartbeat = timedelta(seconds=on.queues.heartbeat_timeout_s) if options.heartbeat else None
    return await workflow.execute_activity_method(
        activity,
        args=arguments,
        task_queue=options.task_queue(on.queues),
        start_to_close_timeout=timeout,
        heartbeat_timeout=heartbeat,
        retry_policy=options.retry,
    )
