"""workflows.experiment_budget: estimates from stored runs, per arm config, the bot's wording."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.experiments import make_spec, scored_run
from workflows.catalog.models import ArmSpec
from workflows.experiment_budget import (
    BudgetExhausted,
    effective_budget,
    estimate_from_runs,
    format_estimate,
    spent,
    spent_today,
    within_budget,
)
from workflows.settings import Settings
from workflows.store import Store


def test_estimate_scales_history_to_the_planned_cells() -> None:
    past = make_spec(n_cases=2, trials=1).model_copy(update={"experiment_id": "past"})
    runs = [scored_run(past, i, a, 0, {"x": 1.0}, cost=0.10, wall=60.0)
            for i in range(2) for a in ("main", "pr")]  # fmt: skip
    plan = make_spec(n_cases=10, trials=3).model_copy(update={"experiment_id": "new"})
    estimate = estimate_from_runs(plan, [(past, runs)], max_parallel=6)
    assert estimate.cells == 60 and estimate.known
    assert estimate.cost_usd == pytest.approx(6.0)
    assert estimate.duration_s == pytest.approx(60 * 60 / 6)
    assert format_estimate(estimate) == "≈ $6.00, ~10 min"


def test_estimate_prefers_runs_of_the_same_arm_config() -> None:
    cheap = ArmSpec(name="main", ref="main", commit="a" * 40, config={"model": "small"})
    dear = ArmSpec(name="pr", ref="pr", commit="b" * 40, config={"model": "large"})
    past = make_spec(n_cases=1, trials=1).model_copy(
        update={"experiment_id": "past", "arms": (cheap, dear)}
    )
    runs = [scored_run(past, 0, "main", 0, {"x": 1.0}, cost=1.0),
            scored_run(past, 0, "pr", 0, {"x": 1.0}, cost=9.0)]  # fmt: skip
    plan = make_spec(n_cases=5, trials=1).model_copy(
        update={"experiment_id": "new", "arms": (dear.model_copy(update={"name": "x"}),)}
    )
    assert estimate_from_runs(plan, [(past, runs)]).cost_usd == pytest.approx(45.0)


def test_no_history_means_no_estimate() -> None:
    estimate = estimate_from_runs(make_spec(), [])
    assert not estimate.known and estimate.cost_usd is None
    assert "no estimate" in format_estimate(estimate)


def test_format_rounds_large_amounts_like_the_bot_reply() -> None:
    plan = make_spec(n_cases=41, trials=1, arms=("main",))
    past = plan.model_copy(update={"experiment_id": "past"})
    runs = [scored_run(past, 0, "main", 0, {"x": 1.0}, cost=1.0, wall=35 * 60 / 41 * 8)]
    assert format_estimate(estimate_from_runs(plan, [(past, runs)])) == "≈ $41, ~35 min"


def test_spent_and_within_budget() -> None:
    spec = make_spec(n_cases=2, trials=1)
    runs = [scored_run(spec, i, "main", 0, {"x": 1.0}, cost=0.25) for i in range(2)]
    assert spent(runs) == pytest.approx(0.5)
    assert within_budget(0.49, 0.5) and not within_budget(0.5, 0.5) and within_budget(9, None)


def test_daily_cap_lowers_the_budget_and_refuses_when_spent(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'evalbot.db'}")
    store.migrate()
    settings = Settings(data_dir=tmp_path, budget={"daily_cap_usd": 1.0, "default_usd": 0.8,
                                                   "per_repo_usd": {"/other": 0.1}})  # fmt: skip
    assert effective_budget(settings, store, "/repo", None) == pytest.approx(0.8)
    assert effective_budget(settings, store, "/repo", 5.0) == pytest.approx(1.0)
    assert effective_budget(settings, store, "/other", None) == pytest.approx(0.1)
    spec = make_spec(n_cases=3, trials=1)  # repo "/repo"
    store.save_experiment(spec)
    for i in range(3):
        store.save_run(scored_run(spec, i, "main", 0, {"x": 1.0}, cost=0.25))
    assert spent_today(store, "/repo") == pytest.approx(0.75)
    assert effective_budget(settings, store, "/repo", None) == pytest.approx(0.25)
    assert spent_today(store, "/repo", now=datetime.now(UTC) + timedelta(days=1)) == 0
    store.save_run(scored_run(spec, 0, "pr", 0, {"x": 1.0}, cost=0.25))
    with pytest.raises(BudgetExhausted, match="daily cap"):
        effective_budget(settings, store, "/repo", 2.0)
    no_cap = settings.with_changes(budget={"daily_cap_usd": None})
    assert effective_budget(no_cap, store, "/repo", 2.0) == 2.0


def test_repo_defaults_are_looked_up_under_aliases_first(tmp_path: Path) -> None:
    url = "https://x/acme/agent.git"
    budgets = {"acme/agent": 1.0, url: 2.0}
    settings = Settings(data_dir=tmp_path, budget={"default_usd": 9.0, "per_repo_usd": budgets})
    assert effective_budget(settings, None, url, None, aliases=("acme/agent",)) == 1.0
    assert effective_budget(settings, None, url, None, aliases=("acme/other",)) == 2.0
    assert effective_budget(settings, None, "/elsewhere", None) == 9.0
    assert effective_budget(settings, None, url, 0.5, aliases=("acme/agent",)) == 0.5
    capped = settings.with_changes(budget={"daily_cap_usd": 1.0})
    with pytest.raises(TypeError, match="needs the store"):  # never silently uncapped
        effective_budget(capped, None, url, None)
