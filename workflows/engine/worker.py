"""Build the workers for the three task-queue roles. One process may run all of them (embedded
default) or one role each (`evalbot worker --role collect`) when scaled out against a cluster."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from workflows.engine.activities import ExperimentActivities, Grader, RunActivities, RunStore
from workflows.engine.engine_client import host_queue, stage_queues
from workflows.engine.reaper import ReaperActivities
from workflows.engine.telemetry import EngineMetrics
from workflows.engine.workflows import (
    ExperimentWorkflow,
    ReaperWorkflow,
    RunBatchWorkflow,
    RunWorkflow,
)
from workflows.providers.base import SandboxProvider
from workflows.settings import Settings

ROLES = ("runs", "collect", "score")
# a host queue's tasks start at once, whatever the host is doing (a task left waiting there reads
# as a lost host): agents wait for a run slot inside `execute`, collects for a collect slot
HOST_STAGE_SLOTS = 1000


def workflow_runner(sandboxed: bool, *passthrough: str) -> WorkflowRunner:
    """No sandbox (the default, Settings.temporal.workflow_sandbox), or Temporal's sandbox checking
    the workflow modules: they are re-imported in it, so their calls to clocks, randomness, files or
    processes fail the workflow task. What they import under `imports_passed_through` (our pure
    models) is not re-imported per workflow."""
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    modules = ("pydantic", *passthrough)
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*modules)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def build_workers(
    client: Client,
    settings: Settings,
    provider: SandboxProvider,
    store: RunStore,
    grader: Grader,
    *,
    roles: Sequence[str] = ROLES,
    extra_activities: Sequence[Callable[..., Any]] = (),
    secrets: Any = None,
    metrics: EngineMetrics | None = None,
) -> list[Worker]:
    """`metrics`: what the activities count and time (docs/deploy.md, "Metrics")."""
    queues = stage_queues(settings)
    pinned = host_queue(settings) if settings.temporal.host_affinity and provider.host_bound else ""
    metrics = metrics or EngineMetrics()
    runs = RunActivities(
        settings, provider, store, grader, secrets=secrets, host_queue=pinned, metrics=metrics
    )
    experiments = ExperimentActivities(store, metrics)
    workers: list[Worker] = []
    # remote sandboxes outlive their worker: reap those no run needs (workflows/engine/reaper.py)
    reaping = [] if provider.quick_provision else [ReaperActivities(provider).reap_sandboxes]
    if "runs" in roles:
        workers.append(
            Worker(
                client,
                graceful_shutdown_timeout=grace(settings),
                task_queue=queues.runs,
                workflows=[ExperimentWorkflow, RunWorkflow, RunBatchWorkflow, ReaperWorkflow],
                activities=[
                    runs.prepare_arm,
                    runs.provision,
                    runs.execute,
                    runs.teardown,
                    runs.collect,
                    runs.score,
                    runs.finish_short_run,
                    runs.run_short_cell,
                    *reaping,
                    *extra_activities,
                ],
                workflow_runner=workflow_runner(settings.temporal.workflow_sandbox),
                max_concurrent_activities=settings.sandbox.worker_run_slots,
                max_cached_workflows=10_000,
                max_concurrent_workflow_tasks=100,
                max_concurrent_local_activities=settings.sandbox.worker_run_slots,
                max_concurrent_workflow_task_polls=10,
                max_concurrent_activity_task_polls=10,
            )
        )
    if "runs" in roles and pinned:
        workers.append(host_worker(client, settings, pinned, runs))
    if "runs" in roles and not provider.quick_provision and queues.provision:
        workers.append(provision_worker(client, settings, queues.provision, runs))
    if "collect" in roles:
        workers.append(
            Worker(
                client,
                graceful_shutdown_timeout=grace(settings),
                task_queue=queues.collect,
                activities=[runs.collect],
                max_concurrent_activities=settings.sandbox.collect_slots,
            )
        )
    if "score" in roles:
        workers.append(
            Worker(
                client,
                graceful_shutdown_timeout=grace(settings),
                task_queue=queues.score,
                activities=[
                    runs.score,
                    runs.record_error,
                    experiments.save_experiment,
                    experiments.finish_experiment,
                    experiments.failed_cells,
                ],
                max_concurrent_activities=settings.sandbox.max_concurrent_score,
            )
        )
    return workers


def provision_worker(client: Client, settings: Settings, queue: str, runs: RunActivities) -> Worker:
    """`provision` for remote providers: Temporal starts at most `sandbox.provision_rate_per_s` of
    these per second across every worker of the queue (a server-side limit), and each worker runs
    at most `sandbox.max_concurrent_provision` at once (sandboxes starting). See docs/modal.md."""
    rate = settings.sandbox.provision_rate_per_s
    return Worker(
        client,
        graceful_shutdown_timeout=grace(settings),
        task_queue=queue,
        activities=[runs.provision],
        max_concurrent_activities=settings.sandbox.max_concurrent_provision,
        max_task_queue_activities_per_second=rate if rate > 0 else None,
    )


def host_worker(client: Client, settings: Settings, queue: str, runs: RunActivities) -> Worker:
    """The stages that touch this host's sandboxes, for the runs it provisioned (docs/engine.md,
    "Host queues"): only this host's workers poll `queue`."""
    return Worker(
        client,
        graceful_shutdown_timeout=grace(settings),
        task_queue=queue,
        activities=[runs.execute, runs.collect, runs.teardown],
        max_concurrent_activities=HOST_STAGE_SLOTS,
    )


def grace(settings: Settings) -> timedelta:
    """How long a stopping worker lets its in-flight activities finish before cancelling them."""
    return timedelta(seconds=settings.temporal.graceful_shutdown_s)
