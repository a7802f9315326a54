"""The report's data model: JSON-ready (`model_dump(mode="json")`), rendered by bot.render."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workflows.records import RunStatus
from workflows.stats import ALPHA, Verdict


class ReportModel(BaseModel):
    model_config = ConfigDict(frozen=True)


class ArmInfo(ReportModel):
    name: str
    ref: str
    commit: str
    short_sha: str
    config: dict[str, str] = Field(default_factory=dict)


class ComparisonRow(ReportModel):
    """One criterion (or the overall score): head − base, paired by case."""

    criterion: str
    overall: bool = False
    base_mean: float | None = None
    head_mean: float | None = None
    delta: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = Field(None, description="Holm across criteria; None for overall.")
    verdict: Verdict
    mde: float | None = None
    n_cases: int = 0
    dropped_cases: list[str] = Field(default_factory=list)
    pending_cases: list[str] = Field(default_factory=list)
    boot_low: float | None = Field(None, description="Paired bootstrap 95% interval (check).")
    boot_high: float | None = None
    intervals_disagree: bool = Field(False, description="t and bootstrap disagree about 0.")
    pass_to_fail: list[str] = Field(default_factory=list, description="Paired cases that broke.")
    fail_to_pass: list[str] = Field(default_factory=list, description="Paired cases now passing.")
    base_disagreement: float | None = Field(
        None, description="Share of cases whose trials disagree (pass vs fail) in the base arm."
    )
    head_disagreement: float | None = None
    binary: bool = False
    failure_rate: bool = Field(
        False, description="The agent-failure-rate row: higher is worse, so its verdict is flipped."
    )
    method: str = Field("", description="How p and the interval were computed (stats.paired).")
    cases_needed: int | None = Field(
        None, description="Paired cases at which the observed Δ would be detected (80% power)."
    )

    @property
    def flips(self) -> int:
        return len(self.pass_to_fail) + len(self.fail_to_pass)


class CaseMove(ReportModel):
    """A case whose overall score moved, with the criterion that moved most and why."""

    case_id: str
    base: float
    head: float
    delta: float
    criterion: str | None = None
    reason: str = ""  # that criterion's rationale in `reason_arm` (where it scored lowest)
    reason_arm: str = ""


Unit = Literal["usd", "tokens", "seconds"]


class ResourceChange(ReportModel):
    metric: str
    unit: Unit
    base: float | None = None
    head: float | None = None
    change: float | None = Field(None, description="(head − base) / base; None if base is 0.")


class TrialsMde(ReportModel):
    trials: int
    mde: float


class NoiseSummary(ReportModel):
    """Variance components of the overall score and the MDE other trial counts would give."""

    n_cases: int
    trials: float
    within_var: float
    between_var: float
    mde_by_trials: list[TrialsMde] = Field(default_factory=list)


class LostCells(ReportModel):
    """Cells excluded as infrastructure failures (workflows/outcomes.py), per arm."""

    base_lost: int = 0
    base_cells: int = 0
    head_lost: int = 0
    head_cells: int = 0
    incomplete: bool = Field(False, description="Too many lost, or lost unevenly: no verdict.")


class ArmComparison(ReportModel):
    base: str
    head: str
    verdict: Verdict = Field(
        Verdict.NO_CHANGE, description="The comparison's verdict (workflows/report/verdict.py)."
    )
    verdict_reason: str = Field("", description="One sentence: why that verdict.")
    rows: list[ComparisonRow]  # overall first, then criteria in first-seen rubric order
    failure_rate: ComparisonRow | None = Field(
        None,
        description="Share of counted runs the agent failed (crash, timeout, OOM, limit, "
        "no answer), per arm, with its own paired test.",
    )
    infrastructure: LostCells = Field(default_factory=LostCells)
    aa: bool = Field(False, description="Same commit and config: an A/A (noise floor) run.")
    resources: list[ResourceChange] = Field(default_factory=list)
    regressed_cases: list[CaseMove] = Field(default_factory=list)
    improved_cases: list[CaseMove] = Field(default_factory=list)
    noise: NoiseSummary | None = None


class PassKRow(ReportModel):
    criterion: str
    k: int
    pass_at_k: float
    pass_hat_k: float
    n_cases: int


class JudgeUsage(ReportModel):
    """What the LLM judge cost for this arm's runs — apart from the agent's own usage."""

    criteria_judged: int = 0
    from_cache: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class ArmSummary(ReportModel):
    arm: str
    cells_total: int
    cells_done: int
    scored: int
    errored: int
    failed: int = Field(0, description="The agent's failures: counted, at the criteria's floor.")
    excluded: int = Field(0, description="Infrastructure failures: left out of every number.")
    failure_rate: float | None = Field(None, description="failed / (scored + failed).")
    errors_by_status: dict[str, int] = Field(default_factory=dict)
    total_cost_usd: float = 0.0
    mean_cost_usd: float | None = None
    # What the sandboxes cost as the provider bills them (Modal), beside the agent's own cost.
    sandbox_cost_usd: float = 0.0
    mean_sandbox_cost_usd: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_per_run: float | None = None
    wall_p50_s: float | None = None
    wall_p95_s: float | None = None
    pass_k: list[PassKRow] = Field(default_factory=list)
    judge: JudgeUsage = Field(default_factory=JudgeUsage)


class RunErrorItem(ReportModel):
    run_id: str
    case_id: str
    arm: str
    trial: int
    status: RunStatus
    infra: bool = Field(description="Infrastructure: excluded from the numbers (else counted).")
    error: str


class ErrorClass(ReportModel):
    """Runs that ended with one error status: infrastructure (excluded, with the command that
    retries them) or the agent's failures (counted; rerun only on purpose)."""

    status: RunStatus
    count: int
    infra: bool
    command: str  # the CLI command
    comment: str | None = None  # the PR comment command, when there is one


class RubricCheck(ReportModel):
    """Whether the ruler changed: criteria scored under different rubric versions."""

    mixed: list[str] = Field(
        default_factory=list, description="Criteria scored under several rubric versions here."
    )
    stale: list[str] = Field(
        default_factory=list, description="Criteria whose rubric changed since they were scored."
    )
    unhashed_runs: int = Field(0, description="Runs scored before rubric hashes were recorded.")
    checked_against_catalog: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.mixed or self.stale)


class Progress(ReportModel):
    cells_done: int
    cells_total: int
    complete: bool
    by_status: dict[str, int] = Field(default_factory=dict)


class ImageNote(ReportModel):
    """How an arm's image was built (workflows/report/images.py), and what to warn about."""

    arm: str
    kind: str = Field(description="prewarmed | reset | full | cold")
    build_s: float
    base: str = Field("", description="Commit (12 hex) of the prewarmed image it started from.")
    newest_age_s: float | None = Field(None, description="Age of the newest prewarmed image then.")
    reason: str = Field("", description="Why a full build: deps:<files> or no-incremental.")
    warnings: list[str] = Field(default_factory=list, description="e.g. 'cold build: 3m12s'.")


class BudgetNote(ReportModel):
    """The experiment's budget (spec label `budget_usd`) and whether it stopped the experiment."""

    budget_usd: float
    spent_usd: float
    stopped: bool = Field(description="Cells were left unstarted because spent reached budget.")


class BuildFailure(ReportModel):
    """An arm whose own build (evalbot.toml `setup`) failed: every cell is the arm's failure."""

    arm: str
    cells: int
    log_tail: str = Field("", description="The last lines of the build's output.")


class FrontierPoint(ReportModel):
    """An arm on the cost/quality plane (workflows/report/frontier.py)."""

    arm: str
    score: float | None = Field(None, description="Overall score: mean over cases.")
    score_low: float | None = Field(None, description="95% t interval over the cases.")
    score_high: float | None = None
    cost_usd: float | None = Field(None, description="Agent + sandbox cost per counted run.")
    cost_low: float | None = Field(None, description="95% t interval over the runs.")
    cost_high: float | None = None
    n_cases: int = 0
    n_runs: int = 0
    on_frontier: bool = Field(
        False, description="No other arm scores as well for less, or better for as much."
    )


class ExperimentReport(ReportModel):
    experiment_id: str
    dataset: str
    trials: int
    baseline: str
    arms: list[ArmInfo]
    criteria: list[str]
    comparisons: list[ArmComparison]
    summaries: list[ArmSummary]
    errors: list[RunErrorItem]
    errors_by_status: dict[str, int]
    progress: Progress
    alpha: float = ALPHA
    error_classes: list[ErrorClass] = Field(default_factory=list)
    rubric: RubricCheck = Field(default_factory=RubricCheck)
    images: list[ImageNote] = Field(default_factory=list, description="How arms were built.")
    budget: BudgetNote | None = None
    build_failures: list[BuildFailure] = Field(
        default_factory=list, description="Arms whose commit did not build: their cells failed."
    )
    reran_agent_failures: int = Field(
        0, description="Agent failures rerun on request (--include-agent-failures) and replaced."
    )
    frontier: list[FrontierPoint] = Field(
        default_factory=list, description="Score against cost per run, one point per arm."
    )
