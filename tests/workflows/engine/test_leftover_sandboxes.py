"""A sandbox an earlier attempt of a run left behind (its worker died before teardown, or even
before the sandbox's metadata was written) is removed when the run is provisioned again; other
runs' sandboxes are left alone, even runs whose ids read the same in a sandbox id."""

from __future__ import annotations

from pathlib import Path

from temporalio.testing import ActivityEnvironment

from tests.support.agent_repo import TINY_CATALOG
from tests.support.experiments import run_input
from workflows.catalog.models import CellRef
from workflows.engine.activities import RunActivities
from workflows.providers.base import SandboxSpec
from workflows.providers.common.sandbox_layout import run_prefix, sandbox_slug
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings

LONG = "exp-" + "x" * 60  # run ids whose sandbox-id slugs are cut to the same 40 characters


def cell(trial: int) -> CellRef:
    return CellRef(experiment_id=LONG, case_id="lease-rent", arm="base", trial=trial, seed=trial)


async def test_provision_terminates_the_runs_leftovers_only(tmp_path: Path) -> None:
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    world = TINY_CATALOG / "worlds" / "tiny"
    mine, other = run_input(cell(0), image=str(image)), run_input(cell(1), image=str(image))
    leftover = await provider.create(SandboxSpec(mine.cell.run_id, str(image), world, {}))
    neighbour = await provider.create(SandboxSpec(other.cell.run_id, str(image), world, {}))
    assert sandbox_slug(mine.cell.run_id) == sandbox_slug(other.cell.run_id)
    # cut off mid-create: a folder named for the run, no metadata yet
    half_made = tmp_path / "sandboxes" / (run_prefix(mine.cell.run_id) + "0" * 12)
    (half_made / "world").mkdir(parents=True)
    assert await provider.sandboxes_of(mine.cell.run_id) == sorted([leftover.id, half_made.name])

    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    activities = RunActivities(settings, provider, store=None, grader=lambda *a: [])  # type: ignore[arg-type]
    provisioned = await ActivityEnvironment().run(activities.provision, mine)

    assert await provider.sandboxes_of(mine.cell.run_id) == [provisioned.sandbox_id]
    assert provisioned.sandbox_id not in (leftover.id, half_made.name)
    assert not half_made.exists()
    assert await provider.sandboxes_of(other.cell.run_id) == [neighbour.id]


async def test_teardown_removes_a_superseded_provisions_sandbox_of_the_run_too(
    tmp_path: Path,
) -> None:
    """A provision whose task was given again while it still ran (a Temporal server killed and
    restarted) leaves two sandboxes for one run: the run's teardown removes both, on a
    host-bound provider, and nothing of other runs. Broken builds caught: a teardown that removes
    only the sandbox it was given (the chaos test's "left on the host" after a server restart)."""
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    mine, other = run_input(cell(0), image=str(image)), run_input(cell(1), image=str(image))
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    activities = RunActivities(settings, provider, store=None, grader=lambda *a: [])  # type: ignore[arg-type]
    environment = ActivityEnvironment()
    superseded = await environment.run(activities.provision, mine)
    world = TINY_CATALOG / "worlds" / "tiny"  # made beside it, as the other attempt's create
    kept = await provider.create(SandboxSpec(mine.cell.run_id, str(image), world, {}))
    neighbour = await provider.create(SandboxSpec(other.cell.run_id, str(image), world, {}))
    assert len(await provider.sandboxes_of(mine.cell.run_id)) == 2

    await environment.run(activities.teardown, kept.id, mine.cell.run_id)

    assert await provider.sandboxes_of(mine.cell.run_id) == []
    assert not (tmp_path / "sandboxes" / superseded.sandbox_id).exists()
    assert await provider.sandboxes_of(other.cell.run_id) == [neighbour.id]


async def test_teardown_without_a_run_or_off_the_host_removes_only_its_sandbox(
    tmp_path: Path,
) -> None:
    """Workflows started before teardown was given the run id, and providers whose listing is a
    remote call (Modal: the reaper's pass removes the rest), remove the one sandbox only."""
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    mine = run_input(cell(0), image=str(image))
    world = TINY_CATALOG / "worlds" / "tiny"
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    activities = RunActivities(settings, provider, store=None, grader=lambda *a: [])  # type: ignore[arg-type]
    first, second, third = [
        await provider.create(SandboxSpec(mine.cell.run_id, str(image), world, {}))
        for _ in range(3)
    ]
    await ActivityEnvironment().run(activities.teardown, first.id)
    provider.host_bound = False
    await ActivityEnvironment().run(activities.teardown, second.id, mine.cell.run_id)
    assert await provider.sandboxes_of(mine.cell.run_id) == [third.id]
