"""A short run's execute, collect and score as one stage (`finish_short_run`, docs/engine.md, "One
stage for a short run"), through the real activities on the `process` provider: a retry after a
failed collect reattaches to the finished runner instead of running the agent again, and stores
one result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from bot.composition import open_store
from tests.support.agent_repo import TINY_CATALOG
from tests.support.experiments import make_spec, run_input
from workflows.engine.activities import RunActivities
from workflows.engine.grading import CaseGrader
from workflows.engine.types import ShortRunInput
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings

SPEC = make_spec(n_cases=1, trials=1, arms=("main",), dataset="tiny").model_copy(
    update={"case_ids": ("lease-rent",)}
)


async def test_a_short_run_retried_after_its_collect_failed_runs_the_agent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken builds caught: a retry that starts the agent again (two lines in the agent's log;
    checked with both guards against it removed, execute's look at the state file and the
    provider's start-once, which each hold alone), or one that stores nothing after the retry."""
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    agent_log = tmp_path / "agent-runs.log"  # outside the sandbox: `process` does not isolate
    command = f'echo ran >> {agent_log}; echo "no idea" > "$EVALBOT_OUT_DIR/answer.md"'
    job = run_input(SPEC.cells()[0], image=str(image))
    job = dataclasses.replace(job, prepared=dataclasses.replace(job.prepared, command=command))
    store = open_store(settings)
    store.save_experiment(SPEC)
    activities = RunActivities(settings, provider, store, CaseGrader(None))
    staging = activities.blobs.staging
    failures = iter([OSError("blob staging folder unavailable")])

    def staging_failing_once(run_id: str) -> Path:
        for failure in failures:
            raise failure
        return staging(run_id)

    monkeypatch.setattr(activities.blobs, "staging", staging_failing_once)
    environment = ActivityEnvironment()
    provision = await environment.run(activities.provision, job)
    short_run = ShortRunInput(job, provision)

    with pytest.raises(OSError, match="staging folder unavailable"):
        await environment.run(activities.finish_short_run, short_run)
    assert store.list_runs(job.cell.experiment_id) == []  # it failed before score
    summary = await environment.run(activities.finish_short_run, short_run)

    assert agent_log.read_text().splitlines() == ["ran"]
    stored = store.list_runs(job.cell.experiment_id)
    assert [(run.run_id, run.status.value) for run in stored] == [(job.cell.run_id, summary.status)]
    assert stored[0].outputs_ref  # collected on the retry
