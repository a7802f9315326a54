"""ExperimentWorkflow fans out one RunWorkflow per cell (or one RunBatchWorkflow per group of short
cells); each cell runs the stage activities.

Deterministic code only: no I/O, clocks or randomness outside `workflow.*`. Payloads carry ids and
references, never outputs.

Stage placement: every stage is its own activity with its own retry policy. `execute`, `collect`
and `score` are regular activities (execute heartbeats the sandbox id for reattach; collect and
score have task queues of their own). `provision` and `teardown` run as local activities when the
provider creates sandboxes in milliseconds (local, process) — still retried per stage, but without
two task round trips per run — and as regular activities otherwise (Modal). On such providers, runs
whose timeout is short (settings.sandbox.local_stage_max_s) run `execute`, `collect` and `score` as
local activities too: the whole run is one workflow task, which halves Temporal's work per cell;
in a workflow that has the first patch, as one local activity, `finish_short_run` (docs/engine.md,
"One stage for a short run"), and in one that has the second, every stage of such a run is one
local activity, `run_short_cell` ("One stage for a short cell").
Those cells start in groups, one RunBatchWorkflow per group, which runs each of its cells exactly as
a RunWorkflow would (`run_cell`) and saves a workflow execution per cell (docs/engine.md,
"Batches").

Activities are called by reference (`RunActivities.provision`), each with its options from the
table in stages.py (timeouts, retries, task queue, heartbeat, local placement): `stage` places it.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TimeoutError,
    TimeoutType,
)

from workflows import faults
from workflows.engine.failures import reason_of
from workflows.engine.stages import (
    COLLECT,
    EXECUTE,
    FAILED_CELLS,
    FINISH_EXPERIMENT,
    FINISH_SHORT_RUN,
    PREPARE_ARM,
    PROVISION,
    PUBLISH_REPORT,
    RECORD_ERROR,
    RUN_SHORT_CELL,
    SAVE_EXPERIMENT,
    SCORE,
    TEARDOWN,
    stage,
)

with workflow.unsafe.imports_passed_through():
    # the activity classes for their methods' references: a passed-through module (providers,
    # store) is the worker's, not re-imported in the sandbox, and only its names are used here
    from workflows.catalog.labels import allowed_secret_groups, budget_from_labels
    from workflows.catalog.models import CellRef
    from workflows.engine.activities import (
        HOST_UNSUPPORTED,
        RUNNER_LOST,
        ExperimentActivities,
        ReportActivities,
        RunActivities,
    )
    from workflows.engine.reaper import ReaperActivities
    from workflows.engine.types import (
        BATCH_RUNS_MEMO,
        ExperimentInput,
        PreparedArm,
        PrepareInput,
        Progress,
        ProvisionResult,
        PublishReportInput,
        RecordErrorInput,
        RunInput,
        RunSummary,
        ScoreInput,
        ShortRunInput,
        collect_input,
        execute_input,
    )
    from workflows.records import RunStatus

SANDBOX_ATTEMPTS = 2  # a run whose sandbox died is re-provisioned once before it counts as failed
PROGRESS_EVERY = timedelta(seconds=20)
MIN_GROUPS_IN_FLIGHT = 4  # batches never take more than a quarter of an experiment's slots
# Each child adds about six events to the experiment's history, and Temporal terminates a workflow
# past 51,200 events: an experiment that needs more children is refused before it starts any
# (docs/engine.md, "Experiment size").
MAX_CHILD_WORKFLOWS = 8_000
TOO_LARGE = "ExperimentTooLarge"
STAGE_FAILURES = (ActivityError, ApplicationError, CancelledError)
# workflow.patched ids: short runs' execute, collect and score in one local activity; then
# every stage of a short run in one
SHORT_RUN_IN_ONE_STAGE = "short-run-in-one-stage"
SHORT_CELL_IN_ONE_STAGE = "short-cell-in-one-stage"


@workflow.defn(name="RunWorkflow")
class RunWorkflow:
    """One cell: provision → execute → collect → score; teardown always; errors are recorded."""

    @workflow.run
    async def run(self, job: RunInput) -> RunSummary:
        (summary,) = await run_cells([job])
        return summary


@workflow.defn(name="RunBatchWorkflow")
class RunBatchWorkflow:
    """Several short cells in one workflow (the local placement, docs/engine.md): each runs
    concurrently exactly as in RunWorkflow, with every stage retried on its own."""

    @workflow.run
    async def run(self, jobs: list[RunInput]) -> list[RunSummary]:
        return await run_cells(jobs)


async def run_cells(jobs: list[RunInput]) -> list[RunSummary]:
    """Each job through run_cell, side by side. A cell whose run fails beyond its stages (a
    teardown that exhausts its retries) gets its own recorded error and the others go on; a
    cancelled workflow records every unfinished cell as cancelled and ends cancelled."""
    outcomes = await asyncio.gather(*(run_cell(job) for job in jobs), return_exceptions=True)
    return [await _summary_of(job, out) for job, out in zip(jobs, outcomes, strict=True)]


async def _summary_of(job: RunInput, outcome: RunSummary | BaseException) -> RunSummary:
    if isinstance(outcome, RunSummary):
        return outcome
    if isinstance(outcome, asyncio.CancelledError) or _is_cancel(outcome):
        raise outcome  # recorded as cancelled by run_cell
    return await _record_failed_run(job, reason_of(outcome))


async def run_cell(job: RunInput) -> RunSummary:
    """Provision → execute → collect → score, teardown always; a stage failure becomes the
    cell's recorded error; a lost runner, or a lost host (docs/engine.md, "Host queues"),
    re-provisions once (SANDBOX_ATTEMPTS) — on another host, never attaching to the lost one."""
    if job.prepared.error:
        return await _record(job, None, RunStatus.AGENT_ERROR, job.prepared.error)
    if job.prepared.one_stage and workflow.patched(SHORT_CELL_IN_ONE_STAGE):
        return await _run_short_cell(job)
    for attempt in range(SANDBOX_ATTEMPTS):
        provision: ProvisionResult | None = None
        lost = False  # the sandbox's host is gone: nothing there to tear down
        evicted = False
        try:
            provision = await _provision(job)
            return await _run_in(job, provision)
        except GeneratorExit:
            # The worker dropped this workflow from its cache (or stopped) and closes its
            # coroutines: nothing can be scheduled now. A replay of the run tears down instead.
            evicted = True
            raise
        except STAGE_FAILURES as error:  # regular activities wrap; local ones raise directly
            if _is_cancel(error):
                await _record(job, provision, RunStatus.CANCELLED, "cancelled")
                raise
            lost = _host_lost(error, provision)
            if (lost or _error_type(error) == RUNNER_LOST) and attempt + 1 < SANDBOX_ATTEMPTS:
                continue
            reason = _lost_reason(provision) if lost else reason_of(error)
            return await _record(job, provision, _status_for(error), _after(reason, attempt))
        except asyncio.CancelledError:
            await _record(job, provision, RunStatus.CANCELLED, "cancelled")
            raise
        finally:
            if provision is not None and not lost and not evicted:
                await _teardown(job, provision)
    raise ApplicationError("unreachable")  # pragma: no cover


async def _run_short_cell(job: RunInput) -> RunSummary:
    """A short run on a quick provider: every stage in one local activity, `run_short_cell`,
    whose retries resume in the sandbox their runner started in (docs/engine.md, "One stage for
    a short cell"). A stage failure becomes the cell's recorded error, a lost runner re-runs the
    cell once in a fresh sandbox (SANDBOX_ATTEMPTS), and whatever a failed attempt left on this
    host is torn down by run id."""
    for attempt in range(SANDBOX_ATTEMPTS):
        finished = False
        try:
            if _score_twice():
                await _short_cell(job)
            summary = await _short_cell(job)
            finished = True
            return summary
        except GeneratorExit:  # evicted (see run_cell): a replay tears down instead
            finished = True
            raise
        except STAGE_FAILURES as error:
            if _is_cancel(error):
                await _record(job, None, RunStatus.CANCELLED, "cancelled")
                raise
            if _error_type(error) == RUNNER_LOST and attempt + 1 < SANDBOX_ATTEMPTS:
                continue
            return await _record(job, None, _status_for(error), _after(reason_of(error), attempt))
        except asyncio.CancelledError:
            await _record(job, None, RunStatus.CANCELLED, "cancelled")
            raise
        finally:
            if not finished:
                await _sweep(job)
    raise ApplicationError("unreachable")  # pragma: no cover


def _after(reason: str, attempt: int) -> str:
    """A run's error, saying how many sandboxes it took when more than one."""
    return reason + (f" (after {attempt + 1} sandboxes)" if attempt else "")


async def _short_cell(job: RunInput) -> RunSummary:
    return await stage(
        RUN_SHORT_CELL,
        RunActivities.run_short_cell,
        job,
        on=job,
        run_timeout_s=job.prepared.timeout_s,
    )


def _score_twice() -> bool:
    """A broken build for the mutation checks only: each cell's result is produced twice."""
    with workflow.unsafe.sandbox_unrestricted():  # read once per process; constant on replay
        return faults.active("score-twice")


async def _sweep(job: RunInput) -> None:
    """Tear down every sandbox of the run on this host (its id never reached the workflow)."""
    await stage(TEARDOWN, RunActivities.teardown, args=["", job.cell.run_id], on=job)


async def _provision(job: RunInput) -> ProvisionResult:
    return await stage(PROVISION, RunActivities.provision, job, on=job)


async def _run_in(job: RunInput, provision: ProvisionResult) -> RunSummary:
    twice = _score_twice()
    if _in_one_stage(job, provision):
        if twice:
            await _finish_short_run(job, provision)
        return await _finish_short_run(job, provision)
    executed = await stage(
        EXECUTE,
        RunActivities.execute,
        execute_input(provision),
        on=job,
        run_timeout_s=provision.timeout_s,
        host_queue=provision.host_queue,
    )
    collected = await stage(
        COLLECT,
        RunActivities.collect,
        collect_input(job, provision),
        on=job,
        host_queue=provision.host_queue,
    )
    scoring = ScoreInput(job, provision, executed, collected)
    if twice:
        await stage(SCORE, RunActivities.score, scoring, on=job)
    return await stage(SCORE, RunActivities.score, scoring, on=job)


async def _finish_short_run(job: RunInput, provision: ProvisionResult) -> RunSummary:
    return await stage(
        FINISH_SHORT_RUN,
        RunActivities.finish_short_run,
        ShortRunInput(job, provision),
        on=job,
        run_timeout_s=provision.timeout_s,
    )


def _in_one_stage(job: RunInput, provision: ProvisionResult) -> bool:
    """A short run on a quick provider, not pinned to a host queue, in a workflow started or
    resumed by code that has the single stage (histories recorded before it replay the three;
    docs/engine.md, "One stage for a short run")."""
    return (
        job.prepared.local_stages
        and not provision.host_queue
        and workflow.patched(SHORT_RUN_IN_ONE_STAGE)
    )


async def _record(
    job: RunInput, provision: ProvisionResult | None, status: RunStatus, error: str
) -> RunSummary:
    return await stage(
        RECORD_ERROR,
        RunActivities.record_error,
        RecordErrorInput(job, status.value, error, provision),
        on=job,
    )


async def _record_failed_run(job: RunInput, message: str) -> RunSummary:
    """A run that failed beyond its stages (those are recorded by run_cell) still gets a
    result, never none: recorded by its run workflow, or by the parent if that workflow failed."""
    return await _record(job, None, RunStatus.SANDBOX_ERROR, f"run failed: {message}")


async def _teardown(job: RunInput, provision: ProvisionResult) -> None:
    """On the sandbox's host when it has a host queue. A host found gone here (after its stages
    finished) keeps the sandbox: the host removes it when its worker starts again
    (docs/engine.md, "Host queues")."""
    try:
        await stage(
            TEARDOWN,
            RunActivities.teardown,
            args=[provision.sandbox_id, job.cell.run_id],
            on=job,
            host_queue=provision.host_queue,
        )
    except ActivityError as error:
        if not _host_lost(error, provision):
            raise
        workflow.logger.warning("%s: %s", _lost_reason(provision), provision.sandbox_id)


@workflow.defn(name="ExperimentWorkflow")
class ExperimentWorkflow:
    """Builds each arm once, then keeps at most `max_parallel` RunWorkflows in flight."""

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.in_flight = 0
        self.cancel_requested = False
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.changed = False
        self.finished = False
        self.spent_usd = 0.0  # running total of finished cells' cost (RunSummary.cost_usd)
        self.stopped_by_budget = False

    @workflow.run
    async def run(self, job: ExperimentInput) -> Progress:
        self.spent_usd = job.spent_usd  # a rerun starts from what the experiment already spent
        await stage(SAVE_EXPERIMENT, ExperimentActivities.save_experiment, job.spec, on=job)
        cells = await self._cells(job)
        self.states = {cell.run_id: "queued" for cell in cells}
        publisher = asyncio.ensure_future(self._publish_loop(job))
        await self._publish(job, "queued")
        try:
            prepared = await self._prepare_arms(job, {cell.arm for cell in cells})
            groups = run_groups(cells, prepared, batch_size(job.run_batch, job.max_parallel))
            check_children(len(cells), len(groups))
        except ApplicationError as error:  # the host cannot run the provider, or too many cells
            publisher.cancel()
            await self._finish(job, "failed")
            await self._publish(job, "failed", error.message)
            raise
        await self._dispatch(job, groups, prepared)
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        publisher.cancel()
        final = "cancelled" if self.cancel_requested else "completed"
        await self._finish(job, final)
        await self._publish(job, "cancelled" if self.cancel_requested else "final")
        self.finished = True
        return self.progress()

    async def _cells(self, job: ExperimentInput) -> list[CellRef]:
        cells = job.spec.cells()
        if not job.only_failed:
            return cells
        failed = set(
            await stage(
                FAILED_CELLS,
                ExperimentActivities.failed_cells,
                args=[job.spec.experiment_id, job.rerun_agent_failures],
                on=job,
            )
        )
        return [c for c in cells if c.run_id in failed]

    async def _prepare_arms(self, job: ExperimentInput, names: set[str]) -> dict[str, PreparedArm]:
        arms = [arm for arm in job.spec.arms if arm.name in names]
        prepared = await asyncio.gather(
            *(self._prepare(job, PrepareInput(job.spec.repo, a.name, a.commit)) for a in arms)
        )
        return {arm.name: result for arm, result in zip(arms, prepared, strict=True)}

    async def _prepare(self, job: ExperimentInput, arm: PrepareInput) -> PreparedArm:
        try:
            result = await stage(PREPARE_ARM, RunActivities.prepare_arm, arm, on=job)
        except ActivityError as error:
            if _error_type(error) == HOST_UNSUPPORTED:
                raise ApplicationError(
                    reason_of(error), type=HOST_UNSUPPORTED, non_retryable=True
                ) from None
            return PreparedArm(image="", command="", timeout_s=0, limits={}, error=reason_of(error))
        return result

    async def _dispatch(
        self,
        job: ExperimentInput,
        groups: list[list[CellRef]],
        prepared: dict[str, PreparedArm],
    ) -> None:
        """Start cells in order as slots free up; cells not yet started when cancelled are not.
        Short cells on quick providers start in groups (`run_groups`), every other cell alone."""
        limit = max(1, job.max_parallel)
        budget = budget_from_labels(job.spec.labels)
        for group in groups:
            size = len(group)
            await workflow.wait_condition(
                lambda: self.in_flight + size <= limit or self.cancel_requested  # noqa: B023
            )
            if self.cancel_requested:
                self._set_all(group, "cancelled")
                continue
            if budget is not None and self.spent_usd >= budget:  # finish what runs, start no more
                self.stopped_by_budget = True
                self._set_all(group, "cancelled")
                continue
            self.in_flight += len(group)
            self._set_all(group, "running")
            runs = [self._run_input(job, cell, prepared[cell.arm]) for cell in group]
            self.tasks[group[0].run_id] = asyncio.ensure_future(self._run_group(runs))

    @staticmethod
    def _run_input(job: ExperimentInput, cell: CellRef, prepared: PreparedArm) -> RunInput:
        arm = job.spec.arm(cell.arm)
        return RunInput(
            cell=cell,
            queues=job.queues,
            repo=job.spec.repo,
            commit=arm.commit,
            arm_config=dict(arm.config),
            dataset=job.spec.dataset,
            prepared=prepared,
            secret_groups_allowed=allowed_secret_groups(job.spec.labels),
        )

    async def _run_group(self, runs: list[RunInput]) -> None:
        cells = [run.cell for run in runs]
        try:
            for summary in await self._start_group(runs):
                self.spent_usd += summary.cost_usd
                self._set(summary.run_id, "scored" if summary.status == "scored" else "errored")
        except ChildWorkflowError as error:
            if self.cancel_requested:
                self._set_all(cells, "cancelled")
            else:  # the run workflow itself failed: its cells still get a result, never none
                await asyncio.gather(*(_record_failed_run(r, reason_of(error)) for r in runs))
                self._set_all(cells, "errored")
        except asyncio.CancelledError:
            self._set_all(cells, "cancelled" if self.cancel_requested else "errored")
        finally:
            self.in_flight -= len(runs)

    @staticmethod
    async def _start_group(runs: list[RunInput]) -> list[RunSummary]:
        """One cell: a RunWorkflow with the run's id. Several: a RunBatchWorkflow whose id is
        the first run's id + the number of the others, and whose memo lists every run id."""
        first = runs[0].cell.run_id
        options: dict[str, Any] = {
            "task_queue": runs[0].queues.runs,
            "id_reuse_policy": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        }
        if len(runs) == 1:
            summary = await workflow.execute_child_workflow(
                RunWorkflow.run, runs[0], id=first, **options
            )
            return [summary]
        return await workflow.execute_child_workflow(
            RunBatchWorkflow.run,
            runs,
            id=f"{first}+{len(runs) - 1}",
            memo={BATCH_RUNS_MEMO: [run.cell.run_id for run in runs]},
            **options,
        )

    def _set_all(self, cells: list[CellRef], state: str) -> None:
        for cell in cells:
            self._set(cell.run_id, state)

    def _set(self, run_id: str, state: str) -> None:
        self.states[run_id] = state
        self.changed = True

    async def _publish_loop(self, job: ExperimentInput) -> None:
        while job.reporter is not None:
            await workflow.sleep(PROGRESS_EVERY)
            if self.changed:
                self.changed = False
                await self._publish(job, "progress")

    async def _publish(self, job: ExperimentInput, phase: str, reason: str = "") -> None:
        if job.reporter is None:
            return
        await stage(
            PUBLISH_REPORT,
            ReportActivities.publish_report,
            PublishReportInput(job.spec.experiment_id, job.reporter, phase, reason),
            on=job,
        )

    @staticmethod
    async def _finish(job: ExperimentInput, status: str) -> None:
        await stage(
            FINISH_EXPERIMENT,
            ExperimentActivities.finish_experiment,
            args=[job.spec.experiment_id, status],
            on=job,
        )

    @workflow.signal
    def cancel(self) -> None:
        """Stop starting cells and cancel the running ones (a new push supersedes this one)."""
        self.cancel_requested = True
        for task in self.tasks.values():
            if not task.done():
                task.cancel()

    @workflow.query
    def progress(self) -> Progress:
        counts = {state: 0 for state in ("queued", "running", "scored", "errored", "cancelled")}
        for state in self.states.values():
            counts[state] += 1
        return Progress(
            total=len(self.states),
            done=self.finished,
            spent_usd=round(self.spent_usd, 6),
            stopped_by_budget=self.stopped_by_budget,
            **counts,
        )


def _is_cancel(error: BaseException) -> bool:
    return isinstance(error, CancelledError) or isinstance(error.__cause__, CancelledError)


def _host_lost(error: BaseException, provision: ProvisionResult | None) -> bool:
    """A host-queue stage that its host never started (schedule-to-start; a heartbeat timeout
    whose retry found nobody ends so) or stopped heartbeating: the worker host is gone."""
    if provision is None or not provision.host_queue or not isinstance(error, ActivityError):
        return False
    cause = error.cause
    lost = (TimeoutType.SCHEDULE_TO_START, TimeoutType.HEARTBEAT)
    return isinstance(cause, TimeoutError) and cause.type in lost


def _lost_reason(provision: ProvisionResult | None) -> str:
    queue = provision.host_queue if provision else ""
    return f"worker host lost: no worker of {queue} took the run's stage"


def _status_for(error: BaseException) -> RunStatus:
    """A commit that does not build is the arm's failure; everything else here is infrastructure."""
    return RunStatus.AGENT_ERROR if _error_type(error) == "BuildFailed" else RunStatus.SANDBOX_ERROR


def _error_type(error: BaseException) -> str | None:
    """The ApplicationError type of a stage failure, whether wrapped (regular) or not (local)."""
    failure = error.cause if isinstance(error, ActivityError) else error
    return failure.type if isinstance(failure, ApplicationError) else None


def batch_size(requested: int, max_parallel: int) -> int:
    """Cells per RunBatchWorkflow: at most a quarter of the experiment's slots, so that several
    groups overlap and one slow cell holds few slots idle; below 2, cells run alone."""
    size = min(requested, max_parallel // MIN_GROUPS_IN_FLIGHT)
    return size if size >= 2 else 1


def check_children(cells: int, children: int) -> None:
    """ApplicationError (non-retryable, one sentence with the fix) for an experiment whose child
    workflows would pass the history limit of its own workflow."""
    if children > MAX_CHILD_WORKFLOWS:
        raise ApplicationError(
            f"{cells:,} cells need {children:,} run workflows, and one experiment can start at "
            f"most {MAX_CHILD_WORKFLOWS:,} (its Temporal history would pass the event limit); "
            "select fewer cases or trials, or split the dataset into several experiments",
            type=TOO_LARGE,
            non_retryable=True,
        )


def run_groups(
    cells: list[CellRef], prepared: dict[str, PreparedArm], size: int
) -> list[list[CellRef]]:
    """Consecutive cells whose every stage is a local activity (short runs on quick providers)
    in groups of up to `size`; every other cell in a group of its own."""
    groups: list[list[CellRef]] = []
    batch: list[CellRef] = []
    for cell in cells:
        if not prepared[cell.arm].local_stages:
            groups.append([cell])
            continue
        batch.append(cell)
        if len(batch) >= size:
            groups.append(batch)
            batch = []
    if batch:
        groups.append(batch)
    return groups


@workflow.defn(name="ReaperWorkflow")
class ReaperWorkflow:
    """One reaping pass; the schedule starts one every REAP_EVERY (never two at once)."""

    @workflow.run
    async def run(self) -> dict[str, object]:
        result: dict[str, object] = await workflow.execute_activity_method(
            ReaperActivities.reap_sandboxes, start_to_close_timeout=timedelta(minutes=5)
        )
        return result
