"""A short run's execute, collect and score as one stage (`finish_short_run`, docs/engine.md, "One
stage for a short run"), and all its stages as one (`run_short_cell`, "One stage for a short
cell"), through the real activities on the `process` provider: a retry after a failed collect
reattaches to the finished runner instead of running the agent again, and stores one result."""

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
from workflows.engine.types import RunInput, ShortRunInput
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings

SPEC = make_spec(n_cases=1, trials=1, arms=("main",), dataset="tiny").model_copy(
    update={"case_ids": ("lease-rent",)}
)


def fail_staging_once(activities: RunActivities, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blob store's staging folder cannot be made once (collect fails), then it can."""
    staging = activities.blobs.staging
    failures = iter([OSError("blob staging folder unavailable")])

    def staging_failing_once(run_id: str) -> Path:
        for failure in failures:
            raise failure
        return staging(run_id)

    monkeypatch.setattr(activities.blobs, "staging", staging_failing_once)


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
    fail_staging_once(activities, monkeypatch)
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


def short_cell(tmp_path: Path) -> tuple[RunActivities, ProcessProvider, RunInput, Path]:
    """The real activities on `process`, and a short run whose agent logs each start outside
    its sandbox (`process` does not isolate) before it answers."""
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    agent_log = tmp_path / "agent-runs.log"
    command = f'echo ran >> {agent_log}; echo "no idea" > "$EVALBOT_OUT_DIR/answer.md"'
    job = run_input(SPEC.cells()[0], image=str(image))
    job = dataclasses.replace(job, prepared=dataclasses.replace(job.prepared, command=command))
    store = open_store(settings)
    store.save_experiment(SPEC)
    return RunActivities(settings, provider, store, CaseGrader(None)), provider, job, agent_log


async def test_a_short_cell_retried_after_its_collect_failed_resumes_in_its_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_short_cell` (docs/engine.md, "One stage for a short cell"): the failed attempt
    leaves its sandbox, the retry resumes in it (the agent ran once), stores one result and
    tears the sandbox down. Broken builds caught: a retry that provisions afresh (two lines in
    the agent's log), a failure that tears its sandbox down (the retry would run the agent
    again), a success that leaves it."""
    activities, provider, job, agent_log = short_cell(tmp_path)
    fail_staging_once(activities, monkeypatch)
    environment = ActivityEnvironment()
    with pytest.raises(OSError, match="staging folder unavailable"):
        await environment.run(activities.run_short_cell, job)
    left = await provider.sandboxes_of(job.cell.run_id)
    assert len(left) == 1

    summary = await environment.run(activities.run_short_cell, job)

    assert agent_log.read_text().splitlines() == ["ran"]
    stored = activities.store.list_runs(job.cell.experiment_id)
    assert [(run.run_id, run.status.value) for run in stored] == [(job.cell.run_id, summary.status)]
    assert stored[0].provision_s is None  # resumed: this attempt provisioned nothing
    assert await provider.sandboxes_of(job.cell.run_id) == []
    assert not (tmp_path / "sandboxes" / left[0]).exists()


async def test_a_short_cell_does_not_resume_in_a_sandbox_whose_runner_never_started(
    tmp_path: Path,
) -> None:
    """A sandbox left between provision and the runner's start (a worker that died there) may
    be half made: the next attempt removes it and runs in a fresh one."""
    activities, provider, job, agent_log = short_cell(tmp_path)
    environment = ActivityEnvironment()
    leftover = await environment.run(activities.provision, job)

    summary = await environment.run(activities.run_short_cell, job)

    assert summary.status == "scored"
    assert agent_log.read_text().splitlines() == ["ran"]
    stored = activities.store.list_runs(job.cell.experiment_id)
    assert stored[0].provision_s is not None and stored[0].provision_s > 0  # a fresh sandbox
    observed = activities.metrics.registry.get_sample_value
    for stage in ("provision", "execute", "collect", "teardown"):  # the one stage's own, timed
        count = observed("evalbot_stage_duration_seconds_count", {"stage": stage, "outcome": "ok"})
        assert count == 1 + (stage == "provision"), stage  # the leftover's provision, then ours
    assert not (tmp_path / "sandboxes" / leftover.sandbox_id).exists()
    assert await provider.sandboxes_of(job.cell.run_id) == []


async def test_a_short_cell_rerun_by_another_workflow_run_does_not_resume_its_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandbox whose runner finished, left by another Temporal run of the cell's workflow (a
    rerun of failed cells, a reset), is not resumed: the rerun runs the agent again."""
    activities, provider, job, agent_log = short_cell(tmp_path)
    fail_staging_once(activities, monkeypatch)
    first = ActivityEnvironment()
    with pytest.raises(OSError, match="staging folder unavailable"):
        await first.run(activities.run_short_cell, job)
    (left,) = await provider.sandboxes_of(job.cell.run_id)
    rerun = ActivityEnvironment()
    rerun.info = dataclasses.replace(first.info, workflow_run_id="another-run")

    summary = await rerun.run(activities.run_short_cell, job)

    assert summary.status == "scored"
    assert agent_log.read_text().splitlines() == ["ran", "ran"]
    assert not (tmp_path / "sandboxes" / left).exists()
    assert await provider.sandboxes_of(job.cell.run_id) == []
