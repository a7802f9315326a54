"""Provisioning latency: the `provision` activity times the sandbox's creation, the run's stored
record keeps it, and the worker's metrics observe it in the stage histogram; a stored result is
counted once, however often its save is retried."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from tests.support.agent_repo import TINY_CATALOG
from tests.support.experiments import run_input
from workflows.catalog.models import ArmSpec, CellRef, ExperimentSpec
from workflows.engine.activities import RunActivities
from workflows.engine.telemetry import EngineMetrics
from workflows.engine.types import RecordErrorInput, RunInput
from workflows.providers.base import Sandbox, SandboxError, SandboxProvider, SandboxSpec
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store import Store

CREATE_S = 0.3
SPEC = ExperimentSpec(
    experiment_id="exp-latency",
    repo="/repo",
    dataset="tiny",
    case_ids=("lease-rent",),
    arms=(ArmSpec(name="base", ref="base", commit="a" * 40),),
    trials=1,
)


class SlowSandbox:
    id = "slow-sandbox-1"


class SlowProvider(SandboxProvider):
    """Creating a sandbox takes CREATE_S; nothing else is needed by `provision`."""

    name = "slow"

    async def create(self, spec: SandboxSpec) -> Sandbox:
        await asyncio.sleep(CREATE_S)
        return SlowSandbox()  # type: ignore[return-value]

    async def attach(self, sandbox_id: str) -> Sandbox:
        raise NotImplementedError

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        raise NotImplementedError


class FailingProvider(SlowProvider):
    async def create(self, spec: SandboxSpec) -> Sandbox:
        raise SandboxError("no capacity")


def _run_input(spec: ExperimentSpec) -> RunInput:
    cell = CellRef(
        experiment_id=spec.experiment_id, case_id="lease-rent", arm="base", trial=0, seed=7
    )
    return run_input(cell)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'evalbot.db'}") as store:
        store.migrate()
        store.save_experiment(SPEC)
        yield store


@pytest.fixture
def activities(tmp_path: Path, store: Store) -> RunActivities:
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    return RunActivities(
        settings, SlowProvider(), store, grader=lambda *a: [], metrics=EngineMetrics()
    )


async def test_provision_time_reaches_the_store_and_the_metrics(
    activities: RunActivities, store: Store
) -> None:
    run = _run_input(SPEC)
    provisioned = await ActivityEnvironment().run(activities.provision, run)
    assert provisioned.provision_s is not None
    assert CREATE_S <= provisioned.provision_s < CREATE_S + 1.0

    # the agent then fails: the error record still carries how long its sandbox took
    job = RecordErrorInput(run, RunStatus.AGENT_ERROR.value, "exit 1", provisioned)
    await ActivityEnvironment().run(activities.record_error, job)
    stored = store.get_run(run.cell.run_id)
    assert stored is not None and stored.provision_s == pytest.approx(provisioned.provision_s)

    sample = activities.metrics.registry.get_sample_value
    stage = {"stage": "provision", "outcome": "ok"}
    assert sample("evalbot_stage_duration_seconds_bucket", {**stage, "le": "0.25"}) == 0
    assert sample("evalbot_stage_duration_seconds_bucket", {**stage, "le": "+Inf"}) == 1
    assert sample("evalbot_stage_duration_seconds_sum", stage) >= CREATE_S
    runs = {"status": RunStatus.AGENT_ERROR.value}
    assert sample("evalbot_runs_total", runs) == 1
    await ActivityEnvironment().run(activities.record_error, job)  # a retry: the same result
    assert sample("evalbot_runs_total", runs) == 1


async def test_a_failed_provision_is_observed_as_an_error_and_a_provider_error(
    tmp_path: Path, store: Store
) -> None:
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    failing = RunActivities(settings, FailingProvider(), store, grader=lambda *a: [],
                            metrics=EngineMetrics())  # fmt: skip
    with pytest.raises(ApplicationError, match="sandbox creation failed"):
        await ActivityEnvironment().run(failing.provision, _run_input(SPEC))
    sample = failing.metrics.registry.get_sample_value
    assert (
        sample("evalbot_stage_duration_seconds_count", {"stage": "provision", "outcome": "error"})
        == 1
    )
    assert (
        sample("evalbot_stage_duration_seconds_count", {"stage": "provision", "outcome": "ok"}) == 0
    )
    assert (
        sample("evalbot_provider_errors_total", {"provider": "slow", "error": "SandboxError"}) == 1
    )


async def test_a_run_that_never_had_a_sandbox_has_no_provision_time(
    activities: RunActivities, store: Store
) -> None:
    run = _run_input(SPEC)
    job = RecordErrorInput(run, RunStatus.SANDBOX_ERROR.value, "could not create", None)
    await ActivityEnvironment().run(activities.record_error, job)
    stored = store.get_run(run.cell.run_id)
    assert stored is not None and stored.provision_s is None
