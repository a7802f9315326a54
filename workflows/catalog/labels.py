"""Spec labels the engine, the report and the bot share (`ExperimentSpec.labels`, str -> str).

Plain names and their parsing, below every layer that reads them: the ExperimentWorkflow, the
budget and the report read the budget; the CLI's `rerun` counts the agent failures it reran.
"""

from __future__ import annotations

BUDGET_LABEL = "budget_usd"  # the experiment's budget in USD (workflows/experiment_budget.py)
RERAN_AGENT_FAILURES = "reran_agent_failures"  # cells rerun on request (CLI rerun)
# Fork pull requests (docs/secrets.md, "Fork pull requests"): the only secret groups its runs may
# receive (comma-separated; absent: every group the arm's evalbot.toml names), and the dataset's
# declared groups withheld, for the PR comment.
SECRET_GROUPS_ALLOWED = "secret_groups_allowed"  # noqa: S105 (a label name)
SECRET_GROUPS_WITHHELD = "secret_groups_withheld"  # noqa: S105


def budget_from_labels(labels: dict[str, str]) -> float | None:
    """The experiment's budget in USD, from its spec labels (None: no budget)."""
    value = labels.get(BUDGET_LABEL)
    return float(value) if value else None


def allowed_secret_groups(labels: dict[str, str]) -> list[str] | None:
    """The secret groups runs may receive; None: no restriction (not a fork PR)."""
    value = labels.get(SECRET_GROUPS_ALLOWED)
    return None if value is None else [g for g in value.split(",") if g]


def fork_secret_labels(fork_safe: tuple[str, ...], withheld: tuple[str, ...]) -> dict[str, str]:
    """The spec labels restricting a fork PR's runs to the `fork_safe` groups."""
    return {SECRET_GROUPS_ALLOWED: ",".join(fork_safe), SECRET_GROUPS_WITHHELD: ",".join(withheld)}


def secrets_decision(labels: dict[str, str]) -> str | None:
    """'secrets: a (fork-safe); withheld: b and any other group' for a fork PR, else None."""
    allowed = allowed_secret_groups(labels)
    if allowed is None:
        return None
    given = ", ".join(f"{g} (fork-safe)" for g in allowed) or "none"
    withheld = [g for g in labels.get(SECRET_GROUPS_WITHHELD, "").split(",") if g]
    others = "any other group" if not withheld else f"{', '.join(withheld)} and any other group"
    return f"secrets: {given}; withheld: {others}"


def budget_label(budget: float | None) -> dict[str, str]:
    """The spec labels carrying `budget` (none without a budget)."""
    return {} if budget is None else {BUDGET_LABEL: f"{budget:.6f}"}
