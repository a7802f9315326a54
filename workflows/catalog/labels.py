"""Spec labels the engine, the report and the bot share (`ExperimentSpec.labels`, str -> str).

Plain names and their parsing, below every layer that reads them: the ExperimentWorkflow, the
budget and the report read the budget; the CLI's `rerun` counts the agent failures it reran.
"""

from __future__ import annotations

BUDGET_LABEL = "budget_usd"  # the experiment's budget in USD (workflows/experiment_budget.py)
RERAN_AGENT_FAILURES = "reran_agent_failures"  # cells rerun on request (CLI rerun)


def budget_from_labels(labels: dict[str, str]) -> float | None:
    """The experiment's budget in USD, from its spec labels (None: no budget)."""
    value = labels.get(BUDGET_LABEL)
    return float(value) if value else None


def budget_label(budget: float | None) -> dict[str, str]:
    """The spec labels carrying `budget` (none without a budget)."""
    return {} if budget is None else {BUDGET_LABEL: f"{budget:.6f}"}
