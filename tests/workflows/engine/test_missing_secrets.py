"""A run that names a secret group nobody synced fails at once, saying which group — it is a
configuration error, not a fault worth retrying — and the other arm's runs are unaffected."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.support.agent_repo import TINY_AGENT
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.planning import plan_experiment
from workflows.engine.repos import commit_all, init_repo
from workflows.records import RunStatus
from workflows.secret_store import LocalSecretStore
from workflows.settings import Settings


def repo_with_secret_group(dest: Path) -> tuple[str, str]:
    shutil.copytree(TINY_AGENT, dest)
    init_repo(dest)
    plain = commit_all(dest, "no secrets")
    toml = dest / "evalbot.toml"
    toml.write_text(toml.read_text().replace("secrets = []", 'secrets = ["never-synced"]'))
    needs_secrets = commit_all(dest, "needs a secret group")
    return plain, needs_secrets


def plan_with_secret_arm(settings: Settings, repo: Path, trials: int) -> ExperimentSpec:
    """Arm `plain` needs no secrets; arm `secret` names a group that was never synced."""
    plain, needs_secrets = repo_with_secret_group(repo)
    arms = [
        ArmSpec(name="plain", ref="a", commit=plain),
        ArmSpec(name="secret", ref="b", commit=needs_secrets),
    ]
    return plan_experiment(
        settings,
        repo=str(repo),
        dataset="tiny",
        arms=arms,
        trials=trials,
        case_selectors=["supply-governing-law"],
    )


async def test_unsynced_secret_group_fails_fast_and_says_which(
    engine_settings: Settings, tmp_path: Path
) -> None:
    spec = plan_with_secret_arm(engine_settings, tmp_path / "agent", trials=1)
    store = open_store(engine_settings)
    started = time.monotonic()
    await run_experiment(engine_settings, store, spec, quiet=True)

    runs = {r.arm: r for r in store.list_runs(spec.experiment_id)}
    assert runs["plain"].status is RunStatus.SCORED
    assert runs["secret"].status is RunStatus.SANDBOX_ERROR
    assert "never-synced" in runs["secret"].error
    assert not runs["secret"].error.startswith("run failed")  # handled by the run, not its parent
    assert time.monotonic() - started < 30  # not five retries with backoff


async def test_rerun_failed_replaces_only_the_errored_cells_once_the_cause_is_fixed(
    engine_settings: Settings, tmp_path: Path
) -> None:
    spec = plan_with_secret_arm(engine_settings, tmp_path / "agent", trials=2)
    store = open_store(engine_settings)
    await run_experiment(engine_settings, store, spec, quiet=True)
    before = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    assert {r.status for r in before.values() if r.arm == "secret"} == {RunStatus.SANDBOX_ERROR}

    LocalSecretStore.from_settings(engine_settings).replace({"never-synced": {"KEY": "v4lue-xyz"}})
    report = await run_experiment(engine_settings, store, spec, quiet=True, only_failed=True)

    after = {r.run_id: r for r in store.list_runs(spec.experiment_id)}
    assert sorted(after) == sorted(c.run_id for c in spec.cells())  # one result per cell
    assert {r.status for r in after.values()} == {RunStatus.SCORED}
    for run_id, run in before.items():
        if run.arm == "plain":
            assert after[run_id] == run  # scored cells were not run again
    assert report.progress.complete
