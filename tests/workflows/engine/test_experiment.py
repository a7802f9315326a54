"""A whole experiment through the real Temporal dev server and the local bubblewrap provider."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from temporalio.api.enums.v1 import EventType

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.support.agent_repo import AgentRepo
from tests.support.temporal import replay_in_sandbox
from workflows.catalog.hashing import tree_version
from workflows.catalog.loaders import load_world
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.engine_client import connect, run_executions
from workflows.engine.planning import plan_experiment
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store import Store


def plan(
    settings: Settings, repo: AgentRepo, trials: int, cases: list[str] | None = None
) -> ExperimentSpec:
    arms = [
        ArmSpec(name="base", ref="base", commit=repo.base),
        ArmSpec(name="head", ref="head", commit=repo.head),
    ]
    return plan_experiment(
        settings,
        repo=str(repo.path),
        dataset="tiny",
        arms=arms,
        trials=trials,
        case_selectors=cases or [],
    )


async def run_tiny(
    settings: Settings, repo: AgentRepo, trials: int, cases: list[str]
) -> tuple[Store, ExperimentSpec]:
    store = open_store(settings)
    spec = plan(settings, repo, trials, cases)
    await run_experiment(settings, store, spec, quiet=True)
    return store, spec


async def stages_of(settings: Settings, workflow_id: str) -> tuple[list[str], Counter[str]]:
    """The regular activities a run's workflow scheduled, and how often it ran each local
    activity (local ones leave a marker with the activity's type instead)."""
    client = await connect(settings)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    regular = [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    local: Counter[str] = Counter()
    for event in history.events:
        details = event.marker_recorded_event_attributes.details
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and "data" in details:
            local[json.loads(details["data"].payloads[0].data).get("activity_type", "")] += 1
    return regular, local


SHORT = ["run_short_cell"]  # every stage of a short run in one local activity
PLACEMENTS = {  # sandbox settings → (cells per run workflow, regular activities per run, local)
    "short-runs-as-local-activities": ({"local_stage_max_s": 120}, 1, [], SHORT),
    "short-runs-in-batches": (
        {"experiment_parallelism": 16, "run_batch_size": 4},
        4,
        [],
        SHORT,
    ),
    "every-stage-a-regular-activity": (
        {"local_stage_max_s": 0, "experiment_parallelism": 16, "run_batch_size": 4},
        1,
        ["execute", "collect", "score"],
        ["provision", "teardown"],
    ),
}


@pytest.mark.parametrize(
    ("overrides", "batch", "regular", "local"), PLACEMENTS.values(), ids=list(PLACEMENTS)
)
async def test_every_cell_is_scored_once_and_head_beats_base(
    engine_settings: Settings,
    agent_repo: AgentRepo,
    overrides: dict[str, int],
    batch: int,
    regular: list[str],
    local: list[str],
) -> None:
    settings = engine_settings.with_changes(sandbox=overrides)
    world = load_world(settings.catalog_root, "tiny")
    version_before = tree_version(world.path)
    store = open_store(settings)
    spec = plan(settings, agent_repo, trials=2)
    report = await run_experiment(settings, store, spec, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in runs) == sorted(c.run_id for c in spec.cells())
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    overall = next(row for row in report.comparisons[0].rows if row.overall)
    assert overall.head_mean > overall.base_mean
    assert tree_version(world.path) == version_before  # the pristine world is never written
    # the tiny agent's timeout (60 s) is within 120 s: placement follows the settings
    client = await connect(settings)
    executions = await run_executions(client, spec.experiment_id)
    ran = sorted(run_id for _, run_ids in executions for run_id in run_ids)
    assert ran == sorted(c.run_id for c in spec.cells())  # each cell in one execution, once
    assert max(len(run_ids) for _, run_ids in executions) == batch
    for workflow_id, run_ids in executions[:3]:
        scheduled, markers = await stages_of(settings, workflow_id)
        assert scheduled == regular * len(run_ids)
        assert markers == Counter({name: len(run_ids) for name in local})
    workflow_ids = [workflow_id for workflow_id, _ in executions]
    # workers run workflows unsandboxed; the sandbox checks every workflow of the run here
    replayed = await replay_in_sandbox(client, [spec.experiment_id, *workflow_ids])
    assert replayed.replay_failures == {}


async def test_runs_record_what_makes_them_reproducible(
    engine_settings: Settings, agent_repo: AgentRepo
) -> None:
    store, spec = await run_tiny(engine_settings, agent_repo, trials=2, cases=["consent-draft"])
    runs = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    world = load_world(engine_settings.catalog_root, "tiny")

    for run in runs.values():
        assert run.provider == "local"
        assert run.world_version == world.version
        assert run.commit == (agent_repo.base if run.arm == "base" else agent_repo.head)
        assert run.limits["memory_mb"] == 256  # from the agent's evalbot.toml
        assert run.evalbot_version
        assert run.provision_s is not None and 0 < run.provision_s < 60  # timed by `provision`
    seeds = {(r.arm, r.trial): r.seed for r in runs.values()}
    assert seeds[("base", 0)] == seeds[("head", 0)]  # arms share draws (paired by case)
    assert seeds[("base", 0)] != seeds[("base", 1)]  # trials differ by their seed


async def test_a_run_never_sees_another_runs_world_changes(
    engine_settings: Settings, agent_repo: AgentRepo
) -> None:
    """Head runs write a draft into their world; base runs of the same case, running beside them,
    must find the world pristine."""
    store, spec = await run_tiny(engine_settings, agent_repo, trials=3, cases=["consent-draft"])

    for run in store.list_runs(spec.experiment_id):
        outputs = engine_settings.blob_dir / run.outputs_ref  # a key in the local blob store
        changed = sorted(
            p.relative_to(outputs / "world_changes").as_posix()
            for p in (outputs / "world_changes").rglob("*")
            if p.is_file()
        )
        if run.arm == "head":
            assert changed == ["drafts/consent-request.md"]
        else:
            assert changed == []
        assert json.loads((outputs / "world_deleted.json").read_text()) == []
