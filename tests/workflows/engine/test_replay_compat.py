"""Today's workflow code replays histories recorded by earlier code (tests/fixtures/histories,
written by its record.py): an experiment that was running when a new version was deployed goes on
under the new workers instead of failing with a non-determinism error. `per-cell-c83dd20` predates
batches (a RunWorkflow per cell); `batches-547e1be` runs its cells in RunBatchWorkflows, with five
local activities per cell; `one-stage-e6e674d` with three, a short run's execute, collect and
score being one (docs/engine.md, "One stage for a short run"); `one-cell-2a10685` with one, a
short run's every stage (docs/engine.md, "One stage for a short cell")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from tests.support.agent_repo import REPO_ROOT
from tests.support.temporal import replay_histories

RECORDED = REPO_ROOT / "tests" / "fixtures" / "histories"


def recordings() -> list[Path]:
    return sorted(p for p in RECORDED.iterdir() if p.is_dir())


async def histories(folder: Path) -> AsyncIterator[WorkflowHistory]:
    for path in sorted(folder.glob("*.json")):
        yield WorkflowHistory.from_json(path.stem, path.read_text())


@pytest.mark.parametrize("folder", recordings(), ids=lambda p: p.name)
async def test_todays_workflows_replay_histories_of_earlier_code(folder: Path) -> None:
    replayed = await replay_histories(histories(folder))
    assert replayed.replay_failures == {}
    types = {
        path.stem: WorkflowHistory.from_json(path.stem, path.read_text())
        .events[0]
        .workflow_execution_started_event_attributes.workflow_type.name
        for path in folder.glob("*.json")
    }
    expected = "RunWorkflow" if "per-cell" in folder.name else "RunBatchWorkflow"
    assert sorted(set(types.values())) == sorted({"ExperimentWorkflow", expected})
