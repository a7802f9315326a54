"""A sandbox an earlier attempt of a run left behind (its worker died before teardown) is
terminated when the run is provisioned again; other runs' sandboxes are left alone."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import ActivityEnvironment

from tests.support.agent_repo import TINY_CATALOG
from workflows.catalog.models import CellRef
from workflows.engine.activities import RunActivities
from workflows.engine.types import PreparedArm, RunInput, StageQueues
from workflows.providers.base import SandboxSpec
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings

LONG = "exp-" + "x" * 60  # run ids whose sandbox-id slugs are cut to the same 48 characters


def run_input(image: Path, trial: int) -> RunInput:
    cell = CellRef(experiment_id=LONG, case_id="lease-rent", arm="base", trial=trial, seed=trial)
    prepared = PreparedArm(image=str(image), command="true", timeout_s=60, limits={})
    return RunInput(
        cell=cell,
        queues=StageQueues("runs", "collect", "score"),
        repo="/repo",
        commit="a" * 40,
        arm_config={},
        dataset="tiny",
        prepared=prepared,
    )


async def test_provision_terminates_the_runs_leftovers_only(tmp_path: Path) -> None:
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    world = TINY_CATALOG / "worlds" / "tiny"
    mine, other = run_input(image, 0), run_input(image, 1)
    leftover = await provider.create(SandboxSpec(mine.cell.run_id, str(image), world, {}))
    neighbour = await provider.create(SandboxSpec(other.cell.run_id, str(image), world, {}))
    assert leftover.id.rsplit("-", 1)[0] == neighbour.id.rsplit("-", 1)[0]  # same slug
    assert await provider.sandboxes_of(mine.cell.run_id) == [leftover.id]

    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    activities = RunActivities(settings, provider, store=None, grader=lambda *a: [])  # type: ignore[arg-type]
    provisioned = await ActivityEnvironment().run(activities.provision, mine)

    assert await provider.sandboxes_of(mine.cell.run_id) == [provisioned.sandbox_id]
    assert provisioned.sandbox_id != leftover.id
    assert await provider.sandboxes_of(other.cell.run_id) == [neighbour.id]
