"""The budget an experiment starts with, and the estimate `run` prints before it starts.

`evalbot run` (bot/commands/experiments.py) labels its spec with `budget_labels` and prints
`estimate_line`; `evalbot estimate` (bot/commands/budget.py) prints the same `estimate_summary`.
"""

from __future__ import annotations

from bot.commands.errors import CommandError
from workflows.catalog.labels import budget_from_labels, budget_label
from workflows.catalog.models import ExperimentSpec
from workflows.experiment_budget import (
    BudgetExhausted,
    Estimate,
    effective_budget,
    estimate_experiment,
    format_estimate,
)
from workflows.settings import Settings
from workflows.store import Store


def budget_labels(
    settings: Settings, store: Store, repo: str, budget_usd: float | None
) -> dict[str, str]:
    """Spec labels carrying the experiment's budget (read by the ExperimentWorkflow and the
    report); exit 4 when the repository's daily cap is spent already."""
    try:
        budget = effective_budget(settings, store, repo, budget_usd)
    except BudgetExhausted as error:
        raise CommandError.over_budget(str(error)) from None
    return budget_label(budget)


def estimate_summary(estimate: Estimate) -> str:
    """'10 cells, ≈ $41, ~35 min' (or '10 cells, no estimate yet ...')."""
    return f"{estimate.cells} cells, {format_estimate(estimate)}"


def estimate_line(store: Store, spec: ExperimentSpec, max_parallel: int | None) -> str:
    """The estimate summary, plus the budget when there is one."""
    line = estimate_summary(estimate_experiment(store, spec, max_parallel=max_parallel or 8))
    budget = budget_from_labels(spec.labels)
    return f"{line}; budget ${budget:.2f}" if budget is not None else line
