"""ExperimentWorkflow fans out one RunWorkflow per cell; RunWorkflow runs the stage activities.

Deterministic code only: no I/O, clocks or randomness outside `workflow.*`. Payloads carry ids and
references, never outputs.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

with workflow.unsafe.imports_passed_through():
    from workflows.catalog.models import CellRef
    from workflows.engine.types import (
        CollectInput,
        CollectResult,
        ExecuteInput,
        ExecuteResult,
        ExperimentInput,
        Progress,
        ProvisionResult,
        PublishReportInput,
        RecordErrorInput,
        RunInput,
        RunSummary,
        ScoreInput,
    )
    from workflows.records import RunStatus

RUNNER_LOST = "RunnerLost"
SANDBOX_ATTEMPTS = 2  # a run whose sandbox died is re-provisioned once before it counts as failed
STAGE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)
PUBLISH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), maximum_interval=timedelta(minutes=2)
)  # unlimited attempts: a GitHub outage delays the comment, it does not lose it
PROGRESS_EVERY = timedelta(seconds=20)


@workflow.defn(name="RunWorkflow")
class RunWorkflow:
    """One cell: provision → execute → collect → score; teardown always; errors are recorded."""

    @workflow.run
    async def run(self, job: RunInput) -> RunSummary:
        for attempt in range(SANDBOX_ATTEMPTS):
            provision: ProvisionResult | None = None
            try:
                provision = await self._provision(job)
                return await self._run_in(job, provision)
            except ActivityError as error:
                if isinstance(error.cause, CancelledError):
                    await self._record_cancelled(job, provision)
                    raise
                if _error_type(error) == RUNNER_LOST and attempt + 1 < SANDBOX_ATTEMPTS:
                    continue
                return await self._record(job, provision, _status_for(error), error)
            except asyncio.CancelledError:
                await self._record_cancelled(job, provision)
                raise
            finally:
                if provision is not None:
                    await self._teardown(job, provision)
        raise ApplicationError("unreachable")  # pragma: no cover

    async def _provision(self, job: RunInput) -> ProvisionResult:
        result: ProvisionResult = await workflow.execute_activity(
            "provision",
            job,
            result_type=ProvisionResult,
            task_queue=job.queues.runs,
            start_to_close_timeout=timedelta(hours=1),
            heartbeat_timeout=timedelta(seconds=job.queues.heartbeat_timeout_s),
            retry_policy=STAGE_RETRY,
        )
        return result

    async def _run_in(self, job: RunInput, provision: ProvisionResult) -> RunSummary:
        executed = await workflow.execute_activity(
            "execute",
            ExecuteInput(provision.sandbox_id, provision.command, provision.timeout_s),
            result_type=ExecuteResult,
            task_queue=job.queues.runs,
            start_to_close_timeout=timedelta(seconds=provision.timeout_s + 600),
            heartbeat_timeout=timedelta(seconds=job.queues.heartbeat_timeout_s),
            retry_policy=STAGE_RETRY,
        )
        collected = await workflow.execute_activity(
            "collect",
            CollectInput(job.cell.run_id, provision.sandbox_id, job.dataset, job.cell.case_id),
            result_type=CollectResult,
            task_queue=job.queues.collect,
            start_to_close_timeout=timedelta(hours=1),
            heartbeat_timeout=timedelta(seconds=job.queues.heartbeat_timeout_s),
            retry_policy=STAGE_RETRY,
        )
        summary: RunSummary = await workflow.execute_activity(
            "score",
            ScoreInput(job, provision, executed, collected),
            result_type=RunSummary,
            task_queue=job.queues.score,
            start_to_close_timeout=timedelta(minutes=30),
            retry_policy=STAGE_RETRY,
        )
        return summary

    async def _record(
        self,
        job: RunInput,
        provision: ProvisionResult | None,
        status: RunStatus,
        error: ActivityError,
    ) -> RunSummary:
        summary: RunSummary = await workflow.execute_activity(
            "record_error",
            RecordErrorInput(job, status.value, _error_message(error), provision),
            result_type=RunSummary,
            task_queue=job.queues.score,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
        )
        return summary

    async def _record_cancelled(self, job: RunInput, provision: ProvisionResult | None) -> None:
        await workflow.execute_activity(
            "record_error",
            RecordErrorInput(job, RunStatus.CANCELLED.value, "cancelled", provision),
            result_type=RunSummary,
            task_queue=job.queues.score,
            start_to_close_timeout=timedelta(minutes=5),
        )

    async def _teardown(self, job: RunInput, provision: ProvisionResult) -> None:
        await workflow.execute_activity(
            "teardown",
            provision.sandbox_id,
            task_queue=job.queues.runs,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_attempts=10, maximum_interval=timedelta(seconds=30)),
        )


@workflow.defn(name="ExperimentWorkflow")
class ExperimentWorkflow:
    """Plans the cells and keeps at most `max_parallel` RunWorkflows in flight."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.in_flight = 0
        self.cancel_requested = False
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.changed = False

    @workflow.run
    async def run(self, job: ExperimentInput) -> Progress:
        await self._activity(job, "save_experiment", job.spec)
        cells = await self._cells(job)
        self.states = {cell.run_id: "queued" for cell in cells}
        publisher = asyncio.ensure_future(self._publish_loop(job))
        await self._publish(job, "queued")
        for cell in cells:
            self.tasks[cell.run_id] = asyncio.ensure_future(self._run_cell(job, cell))
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        publisher.cancel()
        final = "cancelled" if self.cancel_requested else "completed"
        await self._activity(job, "finish_experiment", job.spec.experiment_id, final)
        await self._publish(job, "cancelled" if self.cancel_requested else "final")
        return self.progress()

    async def _cells(self, job: ExperimentInput) -> list[CellRef]:
        cells = job.spec.cells()
        if not job.only_failed:
            return cells
        failed = set(
            await workflow.execute_activity(
                "failed_cells",
                job.spec.experiment_id,
                result_type=list[str],
                task_queue=job.queues.score,
                start_to_close_timeout=timedelta(minutes=5),
            )
        )
        return [c for c in cells if c.run_id in failed]

    async def _run_cell(self, job: ExperimentInput, cell: CellRef) -> None:
        limit = max(1, job.max_parallel)
        await workflow.wait_condition(lambda: self.in_flight < limit or self.cancel_requested)
        if self.cancel_requested:
            self._set(cell.run_id, "cancelled")
            return
        self.in_flight += 1
        self._set(cell.run_id, "running")
        arm = job.spec.arm(cell.arm)
        run = RunInput(
            cell=cell,
            queues=job.queues,
            repo=job.spec.repo,
            commit=arm.commit,
            arm_config=dict(arm.config),
            dataset=job.spec.dataset,
            secrets_approved=job.spec.labels.get("secrets_approved", "true") == "true",
        )
        try:
            summary = await workflow.execute_child_workflow(
                RunWorkflow.run,
                run,
                id=cell.run_id,
                task_queue=job.queues.runs,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            )
            self._set(cell.run_id, "scored" if summary.status == "scored" else "errored")
        except (ChildWorkflowError, asyncio.CancelledError):
            self._set(cell.run_id, "cancelled" if self.cancel_requested else "errored")
        finally:
            self.in_flight -= 1

    def _set(self, run_id: str, state: str) -> None:
        self.states[run_id] = state
        self.changed = True

    async def _publish_loop(self, job: ExperimentInput) -> None:
        while job.reporter is not None:
            await workflow.sleep(PROGRESS_EVERY)
            if self.changed:
                self.changed = False
                await self._publish(job, "progress")

    async def _publish(self, job: ExperimentInput, phase: str) -> None:
        if job.reporter is None:
            return
        await workflow.execute_activity(
            "publish_report",
            PublishReportInput(job.spec.experiment_id, job.reporter, phase),
            task_queue=job.queues.runs,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=PUBLISH_RETRY,
        )

    async def _activity(self, job: ExperimentInput, name: str, *args: object) -> None:
        await workflow.execute_activity(
            name,
            args=list(args),
            task_queue=job.queues.score,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
        )

    @workflow.signal
    def cancel(self) -> None:
        """Stop starting cells and cancel the running ones (a new push supersedes this one)."""
        self.cancel_requested = True
        for run_id, task in self.tasks.items():
            if self.states.get(run_id) == "running":
                task.cancel()

    @workflow.query
    def progress(self) -> Progress:
        counts = {state: 0 for state in ("queued", "running", "scored", "errored", "cancelled")}
        for state in self.states.values():
            counts[state] += 1
        done = counts["queued"] == 0 and counts["running"] == 0 and bool(self.states)
        return Progress(total=len(self.states), done=done, **counts)


def _status_for(error: ActivityError) -> RunStatus:
    """A commit that does not build is the arm's failure; everything else here is infrastructure."""
    return RunStatus.AGENT_ERROR if _error_type(error) == "BuildFailed" else RunStatus.SANDBOX_ERROR


def _error_type(error: ActivityError) -> str | None:
    cause = error.cause
    return cause.type if isinstance(cause, ApplicationError) else None


def _error_message(error: BaseException) -> str:
    """The innermost message: what went wrong, not the chain of wrappers."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error)[:500]
