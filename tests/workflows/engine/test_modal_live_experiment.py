"""One small experiment on real Modal through the real engine — opt-in (`make test-modal-live`,
docs/modal.md "Live tests"): the tiny dataset, two arms, one trial, EVALBOT_PROVIDER=modal with the
token's workspace. Skips with one line unless MODAL_TOKEN_ID/MODAL_TOKEN_SECRET are set and the run
selected the `live` marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.support.agent_repo import TINY_CATALOG, AgentRepo
from tests.support.temporal import engine_settings_for
from tests.workflows.providers.test_modal_live import live_skip_reason
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.planning import plan_experiment
from workflows.records import RunStatus

pytestmark = [pytest.mark.live, pytest.mark.timeout(1200)]


async def test_the_tiny_experiment_on_real_modal(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    temporal_server: DevServer,
    agent_repo: AgentRepo,
) -> None:
    reason = live_skip_reason(request.config)
    if reason:
        pytest.skip(reason)
    app = os.environ.get("EVALBOT_MODAL_APP_NAME", "evalbot-conformance")
    settings = engine_settings_for(
        tmp_path / "evalbot", temporal_server, TINY_CATALOG,
        sandbox={"provider": "modal"}, modal={"app_name": app},
    )  # fmt: skip
    arms = [
        ArmSpec(name="base", ref="base", commit=agent_repo.base),
        ArmSpec(name="head", ref="head", commit=agent_repo.head),
    ]
    spec = plan_experiment(settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=1)
    store = open_store(settings)

    report = await run_experiment(settings, store, spec, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    assert {r.provider for r in runs} == {"modal"}
    assert all(r.sandbox.sandbox_seconds > 0 for r in runs)
    overall = next(row for row in report.comparisons[0].rows if row.overall)
    assert overall.head_mean > overall.base_mean
