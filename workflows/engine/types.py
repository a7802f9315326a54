"""Inputs and outputs of the workflows and activities: ids, references and numbers only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workflows.catalog.models import CellRef, ExperimentSpec
from workflows.records import RunResult, Usage


@dataclass
class StageQueues:
    """Task queues by role: runs (workflows, provision, execute, teardown), collect, score."""

    runs: str
    collect: str
    score: str
    heartbeat_timeout_s: int = 30  # how fast a dead worker's stage is noticed and retried
    # `provision` of remote providers (Modal), rate-limited server-side; "" = the runs queue.
    provision: str = ""
    # host queues (docs/engine.md, "Host queues"): a stage of a run pinned to the host of its
    # sandbox that no worker of that host starts within this long means the host is gone
    host_lost_s: int = 60


BATCH_RUNS_MEMO = "runs"  # a RunBatchWorkflow's memo: the run ids of its cells


@dataclass
class ExperimentInput:
    spec: ExperimentSpec
    queues: StageQueues
    max_parallel: int  # cells in flight for this experiment
    # cells per RunBatchWorkflow in the local placement (workflows.run_groups); 1, the default,
    # is a RunWorkflow per cell, as for experiments started before batches (test_replay_compat)
    run_batch: int = 1
    reporter: dict[str, Any] | None = None
    only_failed: bool = False  # rerun: only cells lost to infrastructure (workflows/outcomes.py)
    rerun_agent_failures: bool = False  # rerun: the agent's failures too (an explicit choice)
    spent_usd: float = 0.0  # rerun: what the stored runs already cost, counted toward the budget


@dataclass
class PrepareInput:
    repo: str
    arm: str
    commit: str


@dataclass
class PreparedArm:
    """An arm's commit built once (the image) and its evalbot.toml, read once for all its runs."""

    image: str
    command: str
    timeout_s: int
    limits: dict[str, Any]
    secrets: list[str] = field(default_factory=list)
    allow_domains: list[str] = field(default_factory=list)
    quick_provision: bool = False
    local_stages: bool = False  # every stage a local activity (short runs on quick providers)
    # and all of them one local activity, run_short_cell: local stages without host queues
    one_stage: bool = False
    error: str = ""  # the commit could not be built: every run of the arm records this


@dataclass
class RunInput:
    cell: CellRef
    queues: StageQueues
    repo: str
    commit: str
    arm_config: dict[str, str]
    dataset: str
    prepared: PreparedArm
    # None: every secret group the arm's evalbot.toml names; a list: only those of them (runs of
    # fork PRs get their dataset's fork-safe groups; docs/secrets.md, "Fork pull requests")
    secret_groups_allowed: list[str] | None = None


@dataclass
class ProvisionResult:
    sandbox_id: str
    provider: str
    image: str
    command: str
    timeout_s: int
    world_version: str
    limits: dict[str, Any]
    provision_s: float | None = None  # this attempt, activity start to sandbox up (/metrics)
    # the task queue of the worker host holding the sandbox: execute, collect and teardown go
    # there ("" = not host-bound: the stages' own queues or local placement, as before)
    host_queue: str = ""


@dataclass
class ExecuteInput:
    sandbox_id: str
    command: str
    timeout_s: int
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ExecuteResult:
    state: dict[str, Any]
    usage: dict[str, Any]
    host_timeout: bool = False
    stderr_tail: str = ""


@dataclass
class CollectInput:
    run_id: str
    sandbox_id: str
    dataset: str
    case_id: str


@dataclass
class CollectResult:
    outputs_ref: str
    usage: Usage
    has_answer: bool
    notes: list[str] = field(default_factory=list)


@dataclass
class ScoreInput:
    run: RunInput
    provision: ProvisionResult
    execute: ExecuteResult
    collect: CollectResult


@dataclass
class ShortRunInput:
    """A short run's execute, collect and score in one local activity (docs/engine.md, "One
    stage for a short run")."""

    run: RunInput
    provision: ProvisionResult


def execute_input(provision: ProvisionResult) -> ExecuteInput:
    return ExecuteInput(provision.sandbox_id, provision.command, provision.timeout_s)


def collect_input(run: RunInput, provision: ProvisionResult) -> CollectInput:
    return CollectInput(run.cell.run_id, provision.sandbox_id, run.dataset, run.cell.case_id)


@dataclass
class RecordErrorInput:
    run: RunInput
    status: str
    error: str
    provision: ProvisionResult | None = None


@dataclass
class RunSummary:
    run_id: str
    status: str
    score: float | None = None
    cost_usd: float = 0.0  # agent + sandbox: the ExperimentWorkflow keeps a running total (budget)


@dataclass
class PublishReportInput:
    experiment_id: str
    reporter: dict[str, Any]
    phase: str  # queued | progress | final | cancelled | failed
    reason: str = ""  # failed: why the experiment could not run (one sentence)


@dataclass
class Progress:
    total: int
    queued: int = 0
    running: int = 0
    scored: int = 0
    errored: int = 0
    cancelled: int = 0
    done: bool = False
    spent_usd: float = 0.0  # finished cells' cost (agent + sandbox), a rerun's earlier spend too
    stopped_by_budget: bool = False  # cells were left unstarted: spent reached the budget

    @property
    def finished(self) -> int:
        return self.scored + self.errored + self.cancelled


def summarize(result: RunResult) -> RunSummary:
    return RunSummary(
        run_id=result.run_id,
        status=result.status.value,
        score=result.score,
        cost_usd=result.usage.cost_usd + result.sandbox.cost_usd,
    )
