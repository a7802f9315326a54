"""What the CLI and the bot call: connect, start (idempotently), cancel, progress, rerun, wait."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from workflows.catalog.models import ExperimentSpec
from workflows.engine.converter import data_converter
from workflows.engine.failures import reason_of
from workflows.engine.types import BATCH_RUNS_MEMO, ExperimentInput, Progress, StageQueues
from workflows.settings import Settings

CONNECT_WAIT_S = 20.0


class ExperimentNotFound(LookupError):
    pass


class ExperimentFailed(RuntimeError):
    """The experiment's workflow stopped on an error; the message is one sentence."""


def stage_queues(settings: Settings) -> StageQueues:
    return StageQueues(
        runs=settings.temporal.run_task_queue,
        collect=settings.temporal.collect_task_queue,
        score=settings.temporal.score_task_queue,
        heartbeat_timeout_s=settings.temporal.heartbeat_timeout_s,
        provision=settings.temporal.provision_task_queue,
        host_lost_s=settings.temporal.host_lost_s,
    )


def host_id(settings: Settings) -> str:
    """This host's stable id: the setting, else the hostname and a hash of the data folder (two
    workers with separate data folders on one machine are two hosts: their sandboxes differ)."""
    if settings.temporal.host_id:
        return settings.temporal.host_id
    folder = str(Path(settings.data_dir).absolute())
    return f"{socket.gethostname()}-{hashlib.sha256(folder.encode()).hexdigest()[:8]}"


def host_queue(settings: Settings) -> str:
    """The task queue of this host's sandbox stages (docs/engine.md, "Host queues")."""
    return f"{settings.temporal.run_task_queue}@{host_id(settings)}"


async def connect(
    settings: Settings,
    address: str | None = None,
    *,
    wait_s: float = CONNECT_WAIT_S,
    runtime: Runtime | None = None,
) -> Client:
    """Connect, waiting up to `wait_s` for a server that is still starting (a dev server opens
    its port before its frontend is healthy). Workers built on the client share its `runtime`
    (the SDK's default when None, which prints the core's logs on stdout; the composition root
    passes one that forwards them to Python logging)."""
    target = address or settings.temporal.address
    if not target:
        raise ValueError("no Temporal address: set EVALBOT_TEMPORAL_ADDRESS or run embedded")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await Client.connect(
                target,
                namespace=settings.temporal.namespace,
                data_converter=data_converter,
                runtime=runtime,
                **cloud_options(settings),
            )
        except RuntimeError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.25)


def cloud_options(settings: Settings) -> dict[str, Any]:
    """API key and TLS for Temporal Cloud (docs/deploy.md, "Temporal Cloud"); none by default."""
    key = settings.temporal.api_key
    api_key = key.get_secret_value() if key is not None and key.get_secret_value() else None
    tls = settings.temporal.tls if settings.temporal.tls is not None else api_key is not None
    return {"api_key": api_key, "tls": tls}


async def start_experiment(
    client: Client,
    settings: Settings,
    spec: ExperimentSpec,
    *,
    reporter: dict[str, Any] | None = None,
    max_parallel: int | None = None,
    only_failed: bool = False,
    rerun_agent_failures: bool = False,
    spent_usd: float = 0.0,
) -> str:
    """Start the ExperimentWorkflow with id = spec.experiment_id. Starting the same id again is a
    no-op (the existing experiment is kept), so a redelivered request starts nothing new.
    `spent_usd` counts toward the budget label from the start: a rerun passes what the
    experiment's stored runs cost (workflows.experiment_budget.spent)."""
    job = ExperimentInput(
        spec=spec,
        queues=stage_queues(settings),
        max_parallel=max_parallel or settings.sandbox.resolved_experiment_parallelism,
        run_batch=settings.sandbox.run_batch_size,
        reporter=reporter,
        only_failed=only_failed,
        rerun_agent_failures=rerun_agent_failures,
        spent_usd=spent_usd,
    )
    policy = (
        WorkflowIDReusePolicy.ALLOW_DUPLICATE
        if only_failed
        else WorkflowIDReusePolicy.REJECT_DUPLICATE
    )
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await client.start_workflow(
            "ExperimentWorkflow",
            job,
            id=spec.experiment_id,
            task_queue=settings.temporal.run_task_queue,
            id_reuse_policy=policy,
        )
    return spec.experiment_id


def _handle(client: Client, experiment_id: str) -> WorkflowHandle[Any, Progress]:
    return client.get_workflow_handle(experiment_id, result_type=Progress)


async def is_running(client: Client, experiment_id: str) -> bool:
    try:
        description = await _handle(client, experiment_id).describe()
    except RPCError:
        raise ExperimentNotFound(f"no experiment '{experiment_id}'") from None
    return description.status == WorkflowExecutionStatus.RUNNING


async def cancel_experiment(client: Client, experiment_id: str) -> bool:
    """Ask a running experiment to stop; False when it is not running."""
    try:
        if not await is_running(client, experiment_id):
            return False
        await _handle(client, experiment_id).signal("cancel")
    except ExperimentNotFound:
        return False
    return True


async def get_progress(client: Client, experiment_id: str) -> Progress:
    """Cells by state; ExperimentFailed (one sentence) when the experiment stopped on an error,
    e.g. a host that cannot run the provider."""
    handle = _handle(client, experiment_id)
    if await is_running(client, experiment_id):
        progress: Progress = await handle.query("progress", result_type=Progress)
        return progress
    try:
        return await handle.result()
    except WorkflowFailureError as error:
        raise ExperimentFailed(
            f"experiment '{experiment_id}' stopped: {reason_of(error)}"
        ) from None


async def wait_for(client: Client, experiment_id: str) -> Progress:
    return await _handle(client, experiment_id).result()


async def rerun_failed(
    client: Client,
    settings: Settings,
    spec: ExperimentSpec,
    *,
    spent_usd: float,
    include_agent_failures: bool = False,
) -> str:
    """Run the experiment's cells lost to infrastructure again (after it finished), and with
    `include_agent_failures` the agent's failures too; their results are replaced. `spent_usd`
    is what its stored runs cost: the rerun's budget is what is left of the label."""
    if await is_running(client, spec.experiment_id):
        raise RuntimeError(f"experiment '{spec.experiment_id}' is still running")
    return await start_experiment(
        client,
        settings,
        spec,
        only_failed=True,
        rerun_agent_failures=include_agent_failures,
        spent_usd=spent_usd,
    )


async def run_executions(client: Client, experiment_id: str) -> list[tuple[str, list[str]]]:
    """Every run workflow execution of an experiment (any status) as (workflow id, the run ids it
    ran): a RunWorkflow runs the cell its id names, a RunBatchWorkflow the cells its memo lists.
    A run id listed twice means a cell's workflow was started twice."""
    query = (
        'WorkflowType IN ("RunWorkflow", "RunBatchWorkflow") '
        f'AND WorkflowId STARTS_WITH "{quoted(experiment_id)}/"'
    )
    executions: list[tuple[str, list[str]]] = []
    async for execution in client.list_workflows(query):
        if execution.workflow_type == "RunWorkflow":
            executions.append((execution.id, [execution.id]))
        else:
            executions.append((execution.id, list((await execution.memo())[BATCH_RUNS_MEMO])))
    return executions


def quoted(text: str) -> str:
    """`text` inside a double-quoted string of a visibility query."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
