"""Short cells run in groups (RunBatchWorkflow, docs/engine.md "Batches"): how cells are grouped,
and — on the real Temporal dev server, with stand-in stages — that each cell of a batch runs on its
own: one cell's failure is recorded for that cell alone, and a cancel records every cell."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.chaos.harness import leftover_sandboxes
from tests.fakes.stages import StandInStages
from tests.support.agent_repo import AgentRepo
from tests.support.experiments import make_spec, run_input, wait_stored
from workflows.catalog.models import ArmSpec, CellRef
from workflows.engine.engine_client import cancel_experiment, connect, get_progress, stage_queues
from workflows.engine.planning import plan_experiment
from workflows.engine.types import PreparedArm, RunInput, RunSummary
from workflows.engine.worker import workflow_runner
from workflows.engine.workflows import RunBatchWorkflow, RunWorkflow, batch_size, run_groups
from workflows.records import RunStatus
from workflows.settings import Settings

SHORT = PreparedArm(image="img", command="true", timeout_s=60, limits={}, local_stages=True)
LONG = dataclasses.replace(SHORT, local_stages=False)


def cells(n: int, arms: tuple[str, ...] = ("main",)) -> list[CellRef]:
    return make_spec(n_cases=n, trials=1, arms=arms).cells()


def test_short_cells_are_grouped_in_order_and_the_rest_run_alone() -> None:
    spec_cells = cells(5, arms=("main", "pr"))  # case-major: main, pr, main, pr, ...
    groups = run_groups(spec_cells, {"main": SHORT, "pr": LONG}, size=2)
    m = [c for c in spec_cells if c.arm == "main"]
    p = [c for c in spec_cells if c.arm == "pr"]
    expected = [[p[0]], [m[0], m[1]], [p[1]], [p[2]], [m[2], m[3]], [p[3]], [p[4]], [m[4]]]
    assert groups == expected


@pytest.mark.parametrize(
    ("requested", "parallel", "expected"),
    [(10, 500, 10), (10, 128, 10), (10, 20, 5), (10, 8, 2), (10, 6, 1), (1, 500, 1), (50, 40, 10)],
)
def test_a_batch_is_at_most_a_quarter_of_the_cells_in_flight(
    requested: int, parallel: int, expected: int
) -> None:
    assert batch_size(requested, parallel) == expected


@contextlib.asynccontextmanager
async def batch_worker(settings: Settings, stages: StandInStages) -> AsyncIterator[Client]:
    client = await connect(settings)
    runs = Worker(
        client,
        task_queue=settings.temporal.run_task_queue,
        workflows=[RunWorkflow, RunBatchWorkflow],
        activities=stages.activities(),
        workflow_runner=workflow_runner(False),
    )
    score = Worker(
        client, task_queue=settings.temporal.score_task_queue, activities=[stages.record_error]
    )
    async with runs, score:
        yield client


# a short cell's stages in today's workflows (one: run_short_cell) and in an experiment whose arms
# were prepared before that (three: provision, finish_short_run, teardown)
SHAPES = {"one-stage": True, "three-stages": False}


@pytest.fixture(params=list(SHAPES.values()), ids=list(SHAPES))
def one_stage(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def batch_of(settings: Settings, n: int, one_stage: bool) -> list[RunInput]:
    queues = stage_queues(settings)
    quick = dataclasses.replace(SHORT, quick_provision=True, one_stage=one_stage)
    return [
        dataclasses.replace(run_input(cell), queues=queues, prepared=quick) for cell in cells(n)
    ]


async def run_batch(client: Client, settings: Settings, jobs: list[RunInput]) -> list[RunSummary]:
    return await client.execute_workflow(
        RunBatchWorkflow.run,
        jobs,
        id=f"batch-{uuid.uuid4().hex[:8]}",
        task_queue=settings.temporal.run_task_queue,
    )


async def run_alone(client: Client, settings: Settings, jobs: list[RunInput]) -> list[RunSummary]:
    """Each job in a RunWorkflow of its own, side by side."""
    runs = (
        client.execute_workflow(
            RunWorkflow.run,
            job,
            id=f"run-{uuid.uuid4().hex[:8]}",
            task_queue=settings.temporal.run_task_queue,
        )
        for job in jobs
    )
    return list(await asyncio.gather(*runs))


@pytest.mark.parametrize("run", [run_batch, run_alone], ids=["in-a-batch", "alone"])
async def test_a_failing_cell_is_recorded_alone_and_the_others_score(
    engine_settings: Settings,
    run: Callable[[Client, Settings, list[RunInput]], Awaitable[list[RunSummary]]],
    one_stage: bool,
) -> None:
    """The same for a batch and for RunWorkflows: both record a run that failed beyond its
    stages themselves (run_cells), not through the parent."""
    jobs = batch_of(engine_settings, 4, one_stage)
    ok, failed_stage, failed_teardown, ok_too = (job.cell.run_id for job in jobs)
    stages = StandInStages(
        fail={("execute", failed_stage): "runner broke", ("teardown", failed_teardown): "stuck"}
    )
    async with batch_worker(engine_settings, stages) as client:
        summaries = await run(client, engine_settings, jobs)

    assert [s.run_id for s in summaries] == [job.cell.run_id for job in jobs]
    statuses = {s.run_id: s.status for s in summaries}
    assert statuses[ok] == statuses[ok_too] == "scored"
    assert statuses[failed_stage] == statuses[failed_teardown] == "sandbox_error"
    assert stages.recorded[failed_stage] == ("sandbox_error", "runner broke")  # a stage's failure
    assert stages.recorded[failed_teardown] == ("sandbox_error", "run failed: stuck")  # the run's
    assert ok not in stages.recorded and ok_too not in stages.recorded
    torn_down = Counter(run for stage, run in stages.calls if stage == "teardown")
    # each once, failures included; in one stage, a teardown that fails is the stage's failure,
    # and the sweep after it tries again
    assert torn_down == {ok: 1, failed_stage: 1, failed_teardown: 1 + one_stage, ok_too: 1}


async def test_a_stage_that_fails_once_is_retried_inside_its_cell_alone(
    engine_settings: Settings, one_stage: bool
) -> None:
    """Retries survive batching: a collect that fails once is retried by its stage's policy
    inside that cell only. A short run's stages are one (run_short_cell), whose retry resumes
    in the sandbox the first attempt left, or three (finish_short_run the middle one): either
    way the retry executes again (which reattaches) and collects again; its provision, teardown
    and score, and every stage of the other cells, run once. (The resuming here is the
    stand-in's, which only mirrors the real rule: test_short_run_stage.py checks that one.)"""
    jobs = batch_of(engine_settings, 3, one_stage)
    hiccup = jobs[1].cell.run_id
    stages = StandInStages(flaky={("collect", hiccup)})
    async with batch_worker(engine_settings, stages) as client:
        summaries = await run_batch(client, engine_settings, jobs)

    assert [s.status for s in summaries] == ["scored"] * 3
    runs = Counter(stages.calls)
    again = {("execute", hiccup), ("collect", hiccup)}
    assert {key: runs[key] for key in again} == {key: 2 for key in again}
    assert {n for key, n in runs.items() if key not in again} == {1}
    assert len(runs) == 5 * len(jobs)  # provision, execute, collect, score, teardown per cell
    assert stages.recorded == {}


async def test_a_cell_whose_runner_is_lost_runs_again_in_a_fresh_sandbox(
    engine_settings: Settings, one_stage: bool
) -> None:
    """A lost runner (RunnerLost) re-runs its cell once from provision (SANDBOX_ATTEMPTS): the
    lost sandbox is torn down, the second one scores, and no error is recorded. Broken builds
    caught: a lost runner recorded as the cell's error, or a re-run without a new sandbox."""
    jobs = batch_of(engine_settings, 2, one_stage)
    lost = jobs[0].cell.run_id
    stages = StandInStages(lose={lost})
    async with batch_worker(engine_settings, stages) as client:
        summaries = await run_batch(client, engine_settings, jobs)

    assert [s.status for s in summaries] == ["scored"] * 2
    assert stages.recorded == {}
    runs = Counter(stages.calls)
    for stage in ("provision", "execute", "teardown"):
        assert runs[(stage, lost)] == 2, stage
    assert runs[("score", lost)] == 1


async def test_a_cancelled_batch_records_and_tears_down_every_cell(
    engine_settings: Settings, one_stage: bool
) -> None:
    jobs = batch_of(engine_settings, 3, one_stage)
    stages = StandInStages(hang={job.cell.run_id for job in jobs})
    async with batch_worker(engine_settings, stages) as client:
        handle = await client.start_workflow(
            RunBatchWorkflow.run,
            jobs,
            id=f"batch-{uuid.uuid4().hex[:8]}",
            task_queue=engine_settings.temporal.run_task_queue,
        )
        await asyncio.wait_for(stages.all_hanging.wait(), timeout=60)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()

    assert isinstance(failure.value.cause, CancelledError)
    assert stages.recorded == {job.cell.run_id: ("cancelled", "cancelled") for job in jobs}
    torn_down = sorted(run for stage, run in stages.calls if stage == "teardown")
    assert torn_down == sorted(job.cell.run_id for job in jobs)


async def test_cancelling_an_experiment_mid_batch_keeps_what_finished_and_leaves_nothing(
    engine_settings: Settings, agent_repo: AgentRepo
) -> None:
    """Each batch of two holds a quick cell and one that sleeps: cancelling once the quick ones
    are stored cancels the sleepers, keeps the quick results, starts no more batches and leaves
    no sandbox behind."""
    settings = engine_settings.with_changes(  # slots for all 8 cells in flight at once
        sandbox={"experiment_parallelism": 8, "run_batch_size": 2, "max_concurrent_runs": 8}
    )
    arms = [
        ArmSpec(name="quick", ref="base", commit=agent_repo.base),
        ArmSpec(name="sleepy", ref="base", commit=agent_repo.base, config={"sleep_s": "50"}),
    ]
    spec = plan_experiment(
        settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=1, case_selectors=[]
    )
    cells = spec.cells()
    assert len(cells) > 8  # more batches than fit in flight: the last ones never start
    store = open_store(settings)
    experiment = asyncio.ensure_future(run_experiment(settings, store, spec, quiet=True))
    client = await connect(settings)
    await wait_stored(store, spec.experiment_id, 4, timeout_s=120)  # the first four batches' quick
    assert await cancel_experiment(client, spec.experiment_id)
    await asyncio.wait_for(experiment, timeout=120)

    runs = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    started = cells[:8]  # four batches of (quick, sleepy), in order
    assert set(runs) == {c.run_id for c in started}
    for cell in started:
        expected = RunStatus.SCORED if cell.arm == "quick" else RunStatus.CANCELLED
        assert runs[cell.run_id].status is expected, runs[cell.run_id]
    progress = await get_progress(client, spec.experiment_id)
    assert (progress.total, progress.scored + progress.cancelled) == (len(cells), len(cells))
    assert leftover_sandboxes(settings) == []
