"""What `score` does when the store will not take a run (workflows/engine/activities.py, `_save`):
an outage is waited out, a refusal fails the stage at once. Through the real activities on the
`process` provider, as a short run's one stage."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from bot.composition import open_store
from tests.support.agent_repo import TINY_CATALOG
from tests.support.experiments import make_spec, run_input
from workflows.engine.activities import STORE_REFUSED, RunActivities
from workflows.engine.grading import CaseGrader
from workflows.engine.types import ShortRunInput
from workflows.providers.process import ProcessProvider
from workflows.settings import Settings
from workflows.store import Store
from workflows.store.store_errors import StoreError

# A build that treats a refusal as an outage waits STORE_OUTAGE_S (600 s) and fails this timeout.
pytestmark = pytest.mark.timeout(60)

SPEC = make_spec(n_cases=1, trials=1, arms=("main",), dataset="tiny").model_copy(
    update={"case_ids": ("lease-rent",)}
)


async def short_run(tmp_path: Path, store: Store) -> tuple[RunActivities, ShortRunInput]:
    settings = Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG)
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    image = tmp_path / "image"
    image.mkdir()
    job = run_input(SPEC.cells()[0], image=str(image))
    command = 'echo "no idea" > "$EVALBOT_OUT_DIR/answer.md"'
    job = dataclasses.replace(job, prepared=dataclasses.replace(job.prepared, command=command))
    activities = RunActivities(settings, provider, store, CaseGrader(None))
    provision = await ActivityEnvironment().run(activities.provision, job)
    return activities, ShortRunInput(job, provision)


def store_at(tmp_path: Path) -> Store:
    return open_store(Settings(data_dir=tmp_path / "evalbot", catalog_root=TINY_CATALOG))


async def test_a_run_of_an_unsaved_experiment_fails_its_stage_at_once_and_says_why(
    tmp_path: Path,
) -> None:
    store = store_at(tmp_path)  # save_experiment never called
    activities, job = await short_run(tmp_path, store)
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.finish_short_run, job)
    assert raised.value.type == STORE_REFUSED and raised.value.non_retryable
    assert "which is not saved; call save_experiment first" in str(raised.value)
    assert store.list_runs(SPEC.experiment_id) == []


async def test_a_store_outage_is_waited_out_and_the_run_stored_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_at(tmp_path)
    store.save_experiment(SPEC)
    activities, job = await short_run(tmp_path, store)
    save_run, attempts = store.save_run, []

    def down_twice(result: object) -> bool:
        attempts.append(result)
        if len(attempts) <= 2:
            raise StoreError("Database at sqlite:///x is unreachable.")
        return save_run(result)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "save_run", down_twice)
    summary = await ActivityEnvironment().run(activities.finish_short_run, job)
    assert len(attempts) == 3
    stored = store.list_runs(SPEC.experiment_id)
    assert [(run.run_id, run.status.value) for run in stored] == [
        (job.run.cell.run_id, summary.status)
    ]
