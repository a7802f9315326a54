"""Reaping: terminate the sandboxes no run needs any more (docs/modal.md, "Reaping").

A remote sandbox outlives the worker that created it. When the worker dies mid-run, Temporal
retries the run elsewhere and the engine removes the old attempt's sandbox (`sandboxes_of`) — but
when the experiment is cancelled, terminated or finished meanwhile, nobody comes back for it, and
it bills until its own timeout. The reaper asks the provider for every sandbox of a run
(`run_sandboxes`, by the tags each carries) and terminates those whose experiment is not running
(finished, failed, cancelled, terminated, or unknown to Temporal). A running experiment's
sandboxes are never touched, not even one whose run has a stored result: a rerun of a failed cell
reuses its run id while the old result is still stored, so "has a result" does not mean "done".

It runs as an activity every REAP_EVERY (a Temporal schedule the worker creates when its provider
keeps sandboxes remotely) and on demand: `evalbot modal reap [--dry-run]`.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import activity
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from workflows.providers.base import RunSandbox, SandboxError, SandboxProvider

REAP_EVERY = timedelta(minutes=10)


def schedule_id(task_queue: str) -> str:
    """One reaping schedule per deployment (its runs task queue)."""
    return f"evalbot-reaper-{task_queue}"


@dataclass
class ReapReport:
    checked: int = 0
    terminated: list[str] = field(default_factory=list)  # sandbox ids
    kept: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "id: why"

    def as_dict(self) -> dict[str, object]:
        return {
            "checked": self.checked,
            "terminated": self.terminated,
            "kept": self.kept,
            "failed": self.failed,
        }


async def experiment_running(client: Client, experiment_id: str) -> bool:
    if not experiment_id:
        return False
    try:
        described = await client.get_workflow_handle(experiment_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.status == WorkflowExecutionStatus.RUNNING


async def reap(provider: SandboxProvider, client: Client, *, dry_run: bool = False) -> ReapReport:
    sandboxes = await provider.run_sandboxes()
    experiments = sorted({sandbox.experiment for sandbox in sandboxes})
    running = dict(
        zip(
            experiments,
            await asyncio.gather(*(experiment_running(client, e) for e in experiments)),
            strict=True,
        )
    )
    report = ReapReport(checked=len(sandboxes))
    for sandbox in sandboxes:
        if running[sandbox.experiment]:
            report.kept.append(sandbox.id)
        elif dry_run:
            report.terminated.append(sandbox.id)
        else:
            await _terminate(provider, sandbox, report)
    return report


async def _terminate(provider: SandboxProvider, sandbox: RunSandbox, report: ReapReport) -> None:
    try:
        await provider.remove_leftover(sandbox.id)
    except SandboxError as error:
        report.failed.append(f"{sandbox.id}: {error}")
    else:
        report.terminated.append(sandbox.id)


class ReaperActivities:
    def __init__(self, provider: SandboxProvider) -> None:
        self.provider = provider

    @activity.defn(name="reap_sandboxes")
    async def reap_sandboxes(self) -> dict[str, object]:
        report = await reap(self.provider, activity.client())
        return report.as_dict()


async def ensure_reaper_schedule(client: Client, task_queue: str) -> None:
    """Create the reaping schedule unless it exists (every worker calls this; one wins). A pass
    still running when the next is due makes that one skip (the schedule's default overlap)."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            "ReaperWorkflow", id=f"{schedule_id(task_queue)}-pass", task_queue=task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=REAP_EVERY)]),
    )
    with contextlib.suppress(ScheduleAlreadyRunningError):
        await client.create_schedule(schedule_id(task_queue), schedule)
