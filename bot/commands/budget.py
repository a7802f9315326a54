"""`evalbot estimate` — what an experiment would cost and take, before starting it.

Plans the experiment exactly as `evalbot run` would (same flags) and estimates from stored runs of
the dataset (workflows.budget). With --budget-usd, exits 4 when the estimate exceeds it, so an agent
can check a plan against its budget before spending anything. Exit codes: 0 estimated (or no history
to estimate from: "known": false), 2 bad input, 4 over budget.
"""

from __future__ import annotations

import json
import sys

import click

from bot import composition
from bot.commands.engine import OVER_BUDGET, BudgetSpent, one_sentence_errors
from bot.commands.plan_flags import ExperimentFlags, experiment_options
from workflows.budget import (
    BudgetExhausted,
    budget_label,
    effective_budget,
    estimate_experiment,
    format_estimate,
)
from workflows.catalog.models import ExperimentSpec
from workflows.engine.types import budget_from_labels
from workflows.settings import Settings
from workflows.store import Store


@click.command("estimate")
@experiment_options
@click.option("--max-parallel", type=click.IntRange(1, 1000), default=8, show_default=True)
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Exit 4 if the estimate is above.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def estimate_command(
    settings: Settings,
    flags: ExperimentFlags,
    max_parallel: int,
    budget_usd: float | None,
    as_json: bool,
) -> None:
    """Estimate cost and duration of the experiment `evalbot run` would start with these flags."""
    with one_sentence_errors():
        spec = flags.plan(settings)
        store = composition.open_store(settings)
        estimate = estimate_experiment(store, spec, max_parallel=max_parallel)
    over = (
        budget_usd is not None and estimate.cost_usd is not None and estimate.cost_usd > budget_usd
    )
    if as_json:
        payload = estimate.model_dump(mode="json") | {
            "known": estimate.known,
            "summary": format_estimate(estimate),
            "budget_usd": budget_usd,
            "over_budget": over,
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(f"{flags.dataset}: {estimate.cells} cells, {format_estimate(estimate)}")
        if over:
            click.echo(f"over the budget of ${budget_usd:.2f}")
    if over:
        sys.exit(OVER_BUDGET)


def budget_labels(
    settings: Settings, store: Store, repo: str, budget_usd: float | None
) -> dict[str, str]:
    """Spec labels carrying the experiment's budget (read by the ExperimentWorkflow and the
    report); exit 4 when the repository's daily cap is spent already."""
    try:
        budget = effective_budget(settings, store, repo, budget_usd)
    except BudgetExhausted as error:
        raise BudgetSpent(str(error)) from None
    return budget_label(budget)


def estimate_line(store: Store, spec: ExperimentSpec, max_parallel: int | None) -> str:
    """'≈ $41, ~35 min' (or 'no estimate yet ...'), plus the budget when there is one."""
    estimate = estimate_experiment(store, spec, max_parallel=max_parallel or 8)
    line = f"{estimate.cells} cells, {format_estimate(estimate)}"
    budget = budget_from_labels(spec.labels)
    return f"{line}; budget ${budget:.2f}" if budget is not None else line
