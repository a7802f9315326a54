"""Stand-in stage activities, registered under the engine's activity names, for testing run
workflows' own logic on a real Temporal server without sandboxes: each stage records its call,
and a cell can be told to fail a stage (non-retryably), to fail it once (retryably), to lose its
runner once in `execute`, or to hang in `execute` until cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from workflows.engine.types import (
    CollectInput,
    CollectResult,
    ExecuteInput,
    ExecuteResult,
    ProvisionResult,
    RecordErrorInput,
    RunInput,
    RunSummary,
    ScoreInput,
    ShortRunInput,
    collect_input,
    execute_input,
)
from workflows.records import RunStatus, Usage


@dataclass
class StandInStages:
    fail: dict[tuple[str, str], str] = field(default_factory=dict)  # (stage, run id) → message
    flaky: set[tuple[str, str]] = field(default_factory=set)  # (stage, run id): fails once
    hang: set[str] = field(default_factory=set)  # run ids whose execute never ends
    lose: set[str] = field(default_factory=set)  # run ids whose first execute loses its runner
    calls: list[tuple[str, str]] = field(default_factory=list)  # (stage, run id)
    recorded: dict[str, tuple[str, str]] = field(default_factory=dict)  # run id → status, error
    hanging: set[str] = field(default_factory=set)
    all_hanging: asyncio.Event = field(default_factory=asyncio.Event)  # every `hang` run hangs
    left: dict[str, ProvisionResult] = field(default_factory=dict)  # run id → its sandbox, if any
    started: set[str] = field(default_factory=set)  # sandboxes whose execute began

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.provision,
            self.execute,
            self.collect,
            self.score,
            self.finish_short_run,
            self.run_short_cell,
            self.teardown,
        ]

    def _enter(self, stage: str, run_id: str) -> None:
        self.calls.append((stage, run_id))
        message = self.fail.get((stage, run_id))
        if message:
            raise ApplicationError(message, non_retryable=True)
        if (stage, run_id) in self.flaky:
            self.flaky.discard((stage, run_id))
            raise ApplicationError(f"{stage} hiccup")  # retryable: the stage's policy retries it

    @activity.defn(name="provision")
    async def provision(self, run: RunInput) -> ProvisionResult:
        self._enter("provision", run.cell.run_id)
        sandbox = ProvisionResult(run.cell.run_id, "stand-in", "img", "true", 60, "v1", {})
        self.left[run.cell.run_id] = sandbox
        return sandbox

    @activity.defn(name="execute")
    async def execute(self, job: ExecuteInput) -> ExecuteResult:
        self.started.add(job.sandbox_id)
        self._enter("execute", job.sandbox_id)
        if job.sandbox_id in self.lose:
            self.lose.discard(job.sandbox_id)
            raise ApplicationError("the runner died", type="RunnerLost", non_retryable=True)
        if job.sandbox_id in self.hang:
            self.hanging.add(job.sandbox_id)
            if self.hanging == self.hang:
                self.all_hanging.set()
            await asyncio.Event().wait()  # until the activity is cancelled
        return ExecuteResult(state={"status": "done"}, usage={})

    @activity.defn(name="collect")
    async def collect(self, job: CollectInput) -> CollectResult:
        self._enter("collect", job.run_id)
        return CollectResult(outputs_ref="", usage=Usage(), has_answer=True)

    @activity.defn(name="score")
    async def score(self, job: ScoreInput) -> RunSummary:
        self._enter("score", job.run.cell.run_id)
        return RunSummary(job.run.cell.run_id, RunStatus.SCORED.value, 1.0, 0.01)

    @activity.defn(name="finish_short_run")
    async def finish_short_run(self, job: ShortRunInput) -> RunSummary:
        """The three stages in one, as RunActivities.finish_short_run runs them."""
        executed = await self.execute(execute_input(job.provision))
        collected = await self.collect(collect_input(job.run, job.provision))
        return await self.score(ScoreInput(job.run, job.provision, executed, collected))

    @activity.defn(name="run_short_cell")
    async def run_short_cell(self, run: RunInput) -> RunSummary:
        """Every stage in one, as RunActivities.run_short_cell runs them: an attempt resumes in
        the sandbox an earlier one left once that sandbox's execute had begun."""
        provision = self.left.get(run.cell.run_id)
        if provision is None or provision.sandbox_id not in self.started:
            provision = await self.provision(run)
        summary = await self.finish_short_run(ShortRunInput(run, provision))
        await self.teardown(provision.sandbox_id, run.cell.run_id)
        return summary

    @activity.defn(name="teardown")
    async def teardown(self, sandbox_id: str, run_id: str = "") -> None:
        """Called with the run id alone, tears down whatever the run left (recorded under it)."""
        self._enter("teardown", sandbox_id or run_id)
        self.left.pop(run_id or sandbox_id, None)

    @activity.defn(name="record_error")
    async def record_error(self, job: RecordErrorInput) -> RunSummary:
        run_id = job.run.cell.run_id
        self.calls.append(("record_error", run_id))
        self.recorded[run_id] = (job.status, job.error)
        return RunSummary(run_id, job.status)
