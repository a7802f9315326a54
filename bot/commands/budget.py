"""`evalbot estimate` — what an experiment would cost and take, before starting it.

Plans the experiment exactly as `evalbot run` would (same flags) and estimates from stored runs of
the dataset (workflows.experiment_budget). With --budget-usd, exits 4 when the estimate exceeds it,
so an agent can check a plan against its budget before spending anything. Exit codes: 0 estimated
(or no history to estimate from: "known": false), 2 bad input, 4 over budget.
"""

from __future__ import annotations

import json
import sys

import click

from bot import composition
from bot.commands.errors import ExitCode, command_errors
from bot.commands.plan_flags import ExperimentFlags, experiment_options
from bot.commands.run_budget import estimate_summary
from workflows.experiment_budget import estimate_experiment, format_estimate
from workflows.settings import Settings


@click.command("estimate")
@experiment_options
@click.option("--max-parallel", type=click.IntRange(1, 1000), default=8, show_default=True)
@click.option("--budget-usd", type=click.FloatRange(min=0), help="Exit 4 if the estimate is above.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
@command_errors
def estimate_command(
    settings: Settings,
    flags: ExperimentFlags,
    max_parallel: int,
    budget_usd: float | None,
    as_json: bool,
) -> None:
    """Estimate cost and duration of the experiment `evalbot run` would start with these flags."""
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
        click.echo(f"{flags.dataset}: {estimate_summary(estimate)}")
        if over:
            click.echo(f"over the budget of ${budget_usd:.2f}")
    if over:
        sys.exit(ExitCode.OVER_BUDGET)  # a result, not an error: no sentence
