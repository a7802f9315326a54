"""Budgets: what an experiment will likely cost and take, estimated from stored runs.

The estimate looks at finished runs of earlier experiments on the same dataset, preferring runs of
an arm with the same config (model, mode...), and scales the mean cost and wall time per run to the
planned cells. Duration assumes `max_parallel` cells in flight. `format_estimate` gives the bot's
first-reply wording: "≈ $41, ~35 min".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from workflows.catalog.labels import budget_from_labels, budget_label
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.settings import Settings
from workflows.store import Store

HISTORY_EXPERIMENTS = 20  # newest experiments of the dataset looked at


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)

    cells: int
    cost_usd: float | None
    duration_s: float | None
    cost_per_cell_usd: float | None
    wall_per_cell_s: float | None
    basis_runs: int  # stored runs the estimate rests on (0: no history, no estimate)

    @property
    def known(self) -> bool:
        return self.basis_runs > 0


def run_cost(run: RunResult) -> float:
    """What one run spent: the agent's own usage plus its sandbox."""
    return run.usage.cost_usd + run.sandbox.cost_usd


def _per_cell(runs: list[RunResult]) -> tuple[float, float] | None:
    finished = [r for r in runs if r.wall_s > 0 or run_cost(r) > 0]
    if not finished:
        return None
    cost = sum(run_cost(r) for r in finished) / len(finished)
    wall = sum(r.wall_s for r in finished) / len(finished)
    return cost, wall


def estimate_from_runs(
    spec: ExperimentSpec,
    history: Iterable[tuple[ExperimentSpec, list[RunResult]]],
    *,
    max_parallel: int = 8,
) -> Estimate:
    """Per arm: mean cost and wall of earlier runs with that arm's config (else of any arm)."""
    pairs = [(s, runs) for s, runs in history if s.experiment_id != spec.experiment_id]
    all_runs = [r for _, runs in pairs for r in runs]
    cells = len(spec.cells())
    per_arm_cells = len(spec.case_ids) * spec.trials
    cost_total = 0.0
    wall_total = 0.0
    basis = 0
    for arm in spec.arms:
        same = [
            r
            for s, runs in pairs
            for r in runs
            if any(a.name == r.arm and a.config == arm.config for a in s.arms)
        ]
        chosen = same or all_runs
        per_cell = _per_cell(chosen)
        if per_cell is None:
            return Estimate(
                cells=cells,
                cost_usd=None,
                duration_s=None,
                cost_per_cell_usd=None,
                wall_per_cell_s=None,
                basis_runs=0,
            )
        basis += len(chosen)
        cost_total += per_cell[0] * per_arm_cells
        wall_total += per_cell[1] * per_arm_cells
    duration = wall_total / max(1, min(max_parallel, cells))
    return Estimate(
        cells=cells,
        cost_usd=round(cost_total, 6),
        duration_s=round(duration, 3),
        cost_per_cell_usd=round(cost_total / cells, 6),
        wall_per_cell_s=round(wall_total / cells, 3),
        basis_runs=basis,
    )


def estimate_experiment(store: Store, spec: ExperimentSpec, *, max_parallel: int = 8) -> Estimate:
    records = store.list_experiments(dataset=spec.dataset, limit=HISTORY_EXPERIMENTS)
    history = [(r.spec, store.list_runs(r.spec.experiment_id)) for r in records]
    return estimate_from_runs(spec, history, max_parallel=max_parallel)


def format_estimate(estimate: Estimate) -> str:
    """'≈ $41, ~35 min' — or a plain note when there is no history to go on."""
    if estimate.cost_usd is None or estimate.duration_s is None:
        return "no estimate yet (no earlier runs of this dataset)"
    cost = estimate.cost_usd
    cost_text = f"${cost:.0f}" if cost >= 10 else f"${cost:.2f}"
    minutes = estimate.duration_s / 60
    time_text = f"~{math.ceil(minutes)} min" if minutes >= 1 else f"~{estimate.duration_s:.0f} s"
    return f"≈ {cost_text}, {time_text}"


def spent(runs: Iterable[RunResult]) -> float:
    return sum(run_cost(r) for r in runs)


def within_budget(spent_usd: float, budget_usd: float | None) -> bool:
    """True while new cells may still be scheduled."""
    return budget_usd is None or spent_usd < budget_usd


class BudgetExhausted(Exception):
    """The repository's daily cap is spent: nothing may start today."""


def spent_today(store: Store, repo: str, *, now: datetime | None = None) -> float:
    """What the repository's experiments started this UTC day have spent so far."""
    day = (now or datetime.now(UTC)).date()
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return store.spend(repo, midnight, midnight + timedelta(days=1))


def default_budget(settings: Settings, *names: str) -> float | None:
    """The repository's default budget: EVALBOT_REPO_BUDGETS_USD under the first of the
    repository's names found there (the bot tries `owner/name`, then the clone URL; the CLI its
    --repo), else EVALBOT_BUDGET_USD, else None (no budget)."""
    for name in names:
        if name in settings.budget.per_repo_usd:
            return settings.budget.per_repo_usd[name]
    return settings.budget.default_usd


def effective_budget(
    settings: Settings,
    store: Store | None,
    repo: str,
    budget_usd: float | None,
    *,
    aliases: tuple[str, ...] = (),
) -> float | None:
    """The experiment's budget: the flag, else the repo's default (looked up under `aliases`,
    then `repo`), else the global default — lowered to what is left of the repository's daily cap,
    so that the workflow's stop-scheduling at the budget also enforces the cap during the run.
    `repo` is the experiments' `repo` whose spend today counts. Raises BudgetExhausted when the
    cap is spent. Approximate: experiments of one repository running at once each get what was
    left when they started (docs/cli.md)."""
    budget = budget_usd
    if budget is None:
        budget = default_budget(settings, *aliases, repo)
    if settings.budget.daily_cap_usd is None:
        return budget
    if store is None:
        raise TypeError("the daily cap needs the store, to count what was spent today")
    left = _left_today(settings.budget.daily_cap_usd, store, repo)
    return left if budget is None else min(budget, left)


def rerun_terms(
    settings: Settings, store: Store, spec: ExperimentSpec
) -> tuple[ExperimentSpec, float]:
    """What a rerun of `spec`'s failed cells starts with: the spec, and what its stored runs
    cost (the rerun counts it toward the budget from the start). Under a daily cap, the spec's
    budget label becomes that cost plus what is left of the repository's cap today, or its own
    budget if that is lower. Raises BudgetExhausted when the cap is spent, as for a new
    experiment."""
    spent_usd = spent(store.list_runs(spec.experiment_id))
    if settings.budget.daily_cap_usd is None:
        return spec, spent_usd
    allowed = spent_usd + _left_today(settings.budget.daily_cap_usd, store, spec.repo)
    own = budget_from_labels(spec.labels)
    budget = allowed if own is None else min(own, allowed)
    return spec.model_copy(update={"labels": {**spec.labels, **budget_label(budget)}}), spent_usd


def _left_today(cap_usd: float, store: Store, repo: str) -> float:
    left = cap_usd - spent_today(store, repo)
    if left <= 0:
        raise BudgetExhausted(f"the daily cap of ${cap_usd:.2f} for {repo} is spent; try tomorrow")
    return left
