"""A budget smaller than the experiment's cost, through the real Temporal dev server and the local
sandbox provider: the ExperimentWorkflow stops starting cells once the finished ones spent the
budget, finishes what is running, and the report marks the partial result as stopped by budget.
The repository's daily cap binds the same way, through the budget label it lowers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from bot.render import render_markdown
from tests.support.agent_repo import TINY_CATALOG, tiny_agent_repo
from tests.support.experiments import make_spec, scored_run
from tests.support.temporal import engine_settings_for
from tests.workflows.engine.test_missing_secrets import plan_with_secret_arm
from workflows.catalog.labels import budget_label
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.engine_client import connect, wait_for
from workflows.engine.planning import plan_experiment
from workflows.experiment_budget import BudgetExhausted, effective_budget, spent, spent_today
from workflows.records import RunStatus
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings


@pytest.fixture
def settings(tmp_path: Path, temporal_server: DevServer) -> Settings:
    return engine_settings_for(tmp_path / "evalbot", temporal_server, TINY_CATALOG)


async def test_budget_stops_scheduling_and_reports_a_partial_result(
    settings: Settings, tmp_path: Path
) -> None:
    repo = tiny_agent_repo(tmp_path / "agent")
    budget = 1e-6  # far below one cell of the tiny agent
    max_parallel = 2
    spec = plan_experiment(
        settings,
        repo=str(repo.path),
        dataset="tiny",
        arms=[
            ArmSpec(name="base", ref="base", commit=repo.base),
            ArmSpec(name="head", ref="head", commit=repo.head),
        ],
        trials=1,
        labels={"budget_usd": str(budget)},
    )
    assert len(spec.cells()) == 10
    store = open_store(settings)
    report = await run_experiment(settings, store, spec, max_parallel, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    costs = [r.usage.cost_usd + r.sandbox.cost_usd for r in runs]
    assert all(c > 0 for c in costs), costs  # the tiny agent reports what it spent
    # stopped early: only the cells already in flight when the first finished one spent the budget
    assert 1 <= len(runs) <= max_parallel
    assert spent(runs) <= budget + max_parallel * max(costs)
    record = store.get_experiment(spec.experiment_id)
    assert record is not None and record.status == "completed"

    assert report.budget is not None and report.budget.stopped
    assert report.budget.spent_usd == pytest.approx(spent(runs), abs=1e-6)
    assert not report.progress.complete and report.progress.cells_done == len(runs)
    markdown = render_markdown(report)
    assert "Stopped by budget" in markdown and "a partial result" in markdown
    assert "Running:" not in markdown


async def test_a_budget_above_the_cost_changes_nothing(settings: Settings, tmp_path: Path) -> None:
    repo = tiny_agent_repo(tmp_path / "agent")
    spec = plan_experiment(
        settings,
        repo=str(repo.path),
        dataset="tiny",
        arms=[ArmSpec(name="head", ref="head", commit=repo.head)],
        trials=1,
        case_selectors=["supply-governing-law", "lease-rent"],
        labels={"budget_usd": "100"},
    )
    store = open_store(settings)
    report = await run_experiment(settings, store, spec, 1, quiet=True)
    assert report.progress.complete
    assert report.budget is not None and not report.budget.stopped
    assert "Stopped by budget" not in render_markdown(report)


async def test_the_daily_cap_stops_a_run_that_would_overspend_it(
    settings: Settings, tmp_path: Path
) -> None:
    """The repository spent most of its daily cap earlier today; a new experiment with a generous
    budget of its own gets what is left as its budget label, so the cap binds during the run."""
    repo = tiny_agent_repo(tmp_path / "agent")
    store = open_store(settings)
    earlier = make_spec(n_cases=2, trials=1).model_copy(
        update={"experiment_id": "earlier-today", "repo": str(repo.path)}
    )
    store.save_experiment(earlier)
    for i in range(2):
        store.save_run(scored_run(earlier, i, "main", 0, {"x": 1.0}, cost=0.25))
    capped = settings.with_changes(budget={"daily_cap_usd": 0.5 + 1e-6})  # ~nothing left today
    max_parallel = 2
    spec = plan_experiment(
        capped,
        repo=str(repo.path),
        dataset="tiny",
        arms=[ArmSpec(name="head", ref="head", commit=repo.head)],
        trials=1,
        labels=budget_label(effective_budget(capped, store, str(repo.path), 100.0)),
    )
    assert len(spec.cells()) == 5
    report = await run_experiment(capped, store, spec, max_parallel, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    costs = [r.usage.cost_usd + r.sandbox.cost_usd for r in runs]
    assert 1 <= len(runs) <= max_parallel  # stopped: the cells in flight finished, no more
    assert spent_today(store, str(repo.path)) <= 0.5 + 1e-6 + max_parallel * max(costs)
    assert report.budget is not None and report.budget.stopped
    with pytest.raises(BudgetExhausted):  # and the next experiment today does not start
        effective_budget(capped, store, str(repo.path), 100.0)


async def test_a_rerun_counts_what_the_experiment_already_spent(
    settings: Settings, tmp_path: Path
) -> None:
    """`rerun --failed` starts the experiment again under its id with only its errored cells; the
    workflow counts what the stored runs cost toward the budget, so a rerun cannot spend the whole
    budget again. Here the first run (all four cells in flight at once) spent the budget: the rerun
    of the two errored cells starts nothing, though their cause is fixed."""
    spec = plan_with_secret_arm(settings, tmp_path / "agent", trials=2)
    spec = spec.model_copy(update={"labels": {**spec.labels, **budget_label(1e-6)}})
    store = open_store(settings)
    await run_experiment(settings, store, spec, 4, quiet=True)
    before = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    assert len(before) == 4 and spent(before.values()) > 1e-6
    assert {r.status for r in before.values() if r.arm == "secret"} == {RunStatus.SANDBOX_ERROR}

    LocalSecretStore.from_settings(settings).replace({"never-synced": {"KEY": "v4lue-xyz"}})
    await run_experiment(settings, store, spec, quiet=True, only_failed=True)

    after = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    assert after == before  # no errored cell was run again
    progress = await wait_for(await connect(settings), spec.experiment_id)
    assert progress.stopped_by_budget
    assert (progress.total, progress.cancelled) == (2, 2)
    assert progress.spent_usd == pytest.approx(spent(before.values()), abs=1e-6)
