"""An experiment one workflow cannot hold is refused before it starts a run: at planning (cells)
and in the experiment workflow (child workflows, known once the arms are prepared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.trivial_matter import write_catalog
from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.support.agent_repo import AgentRepo
from tests.workflows.engine.test_experiment import plan
from workflows.catalog.models import ArmSpec
from workflows.engine.engine_client import connect, run_executions
from workflows.engine.planning import MAX_CELLS, PlanError, plan_experiment
from workflows.engine.workflows import MAX_CHILD_WORKFLOWS
from workflows.settings import Settings


def test_planning_refuses_more_cells_than_one_experiment_holds(tmp_path: Path) -> None:
    write_catalog(tmp_path / "catalog", cases=1_001)
    settings = Settings(data_dir=tmp_path / "state", catalog_root=tmp_path / "catalog")
    arms = [ArmSpec(name=f"arm{i}", ref="main", commit="0" * 40) for i in range(4)]

    def planned(trials: int) -> int:
        spec = plan_experiment(settings, repo="r", dataset="bench", arms=arms, trials=trials)
        return len(spec.cells())

    assert planned(trials=9) == 36_036 <= MAX_CELLS
    with pytest.raises(PlanError, match=r"1,001 cases × 4 arms × 10 trials is 40,040 cells"):
        planned(trials=10)


async def test_an_experiment_needing_too_many_run_workflows_fails_before_any_runs(
    engine_settings: Settings, agent_repo: AgentRepo
) -> None:
    # every stage a regular activity: no batches, one run workflow per cell
    settings = engine_settings.with_changes(sandbox={"local_stage_max_s": 0})
    store = open_store(settings)
    tiny = plan(settings, agent_repo, trials=2)
    cases = MAX_CHILD_WORKFLOWS // 4 + 1  # × 2 arms × 2 trials: 4 cells over the limit
    spec = tiny.model_copy(update={"case_ids": tuple(f"case-{i}" for i in range(cases))})
    assert len(spec.cells()) == MAX_CHILD_WORKFLOWS + 4

    with pytest.raises(Exception, match="8,004 cells need 8,004 run workflows") as failed:
        await run_experiment(settings, store, spec, quiet=True)

    assert "split the dataset" in str(failed.value)
    record = store.get_experiment(spec.experiment_id)
    assert record is not None and record.status == "failed"
    assert store.list_runs(spec.experiment_id) == []
    assert await run_executions(await connect(settings), spec.experiment_id) == []
