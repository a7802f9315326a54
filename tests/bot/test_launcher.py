"""TemporalLauncher.rerun on the session's real Temporal dev server: a rerun counts against the
repository's daily cap like a new experiment: refused when the cap is spent, otherwise started
with its budget lowered to what the experiment spent plus what is left of the cap today."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.launcher import TemporalLauncher
from tests.support.agent_repo import TINY_CATALOG
from tests.support.experiments import make_spec, scored_run
from tests.support.temporal import engine_settings_for
from workflows.catalog.labels import BUDGET_LABEL
from workflows.engine import engine_client as engine
from workflows.engine.devserver import DevServer
from workflows.engine.types import ExperimentInput
from workflows.experiment_budget import BudgetExhausted
from workflows.records import RunStatus
from workflows.store import Store


def store_with_spend(tmp_path: Path, experiment_id: str, usd: float) -> Store:
    """An experiment of repo /repo, started today, with a scored run costing `usd` and an errored
    run to rerun; its own budget is $5."""
    store = Store(f"sqlite:///{tmp_path / 'evalbot.db'}")
    store.migrate()
    spec = make_spec(n_cases=2, trials=1, arms=("main",)).model_copy(
        update={"experiment_id": experiment_id, "labels": {BUDGET_LABEL: "5.000000"}}
    )
    store.save_experiment(spec)
    store.save_run(scored_run(spec, 0, "main", 0, {"x": 1.0}, cost=usd))
    errored = scored_run(spec, 1, "main", 0, {"x": 1.0}, cost=0.0)
    store.save_run(errored.model_copy(update={"status": RunStatus.SANDBOX_ERROR, "score": None}))
    return store


@pytest.mark.parametrize(("cap", "budget"), [(1.0, None), (1.5, 1.5), (9.0, 5.0)])
async def test_a_rerun_is_held_to_the_daily_cap(
    tmp_path: Path, temporal_server: DevServer, cap: float, budget: float | None
) -> None:
    experiment_id = f"capped-{tmp_path.name}"
    settings = engine_settings_for(
        tmp_path, temporal_server, TINY_CATALOG, budget={"daily_cap_usd": cap}
    )
    store = store_with_spend(tmp_path, experiment_id, usd=1.0)
    launcher = TemporalLauncher(settings, store)
    client = await launcher.client()
    if budget is None:
        with pytest.raises(BudgetExhausted, match=r"daily cap of \$1.00 for /repo is spent"):
            await launcher.rerun(experiment_id, reporter={})
        with pytest.raises(engine.ExperimentNotFound):  # nothing was started
            await engine.is_running(client, experiment_id)
        return
    await launcher.rerun(experiment_id, reporter={})
    handle = client.get_workflow_handle(experiment_id)
    history = await handle.fetch_history()
    attributes = history.events[0].workflow_execution_started_event_attributes
    (started,) = await client.data_converter.decode(attributes.input.payloads, [ExperimentInput])
    await handle.terminate("test over")  # no worker serves this test's queues
    assert started.only_failed and started.spent_usd == pytest.approx(1.0)
    assert float(started.spec.labels[BUDGET_LABEL]) == pytest.approx(budget)
