"""Mutation checks: each check of the fault tests fails against a deliberately broken build.

A small experiment (4 cases x 2 arms x 1 trial, case-03 failing on purpose) runs on a worker
started with `EVALBOT_FAULT` (workflows/faults.py), and the same end-of-test checks the fault
tests use (tests/chaos/harness.py `Outcome`, fed by tests/chaos/evidence.py) must report the
failure the fault causes. The same
experiment on the real build passes them, so a check that always failed would show here too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.composition import open_store
from tests.chaos.conftest import PR, REPO
from tests.chaos.harness import (
    Outcome,
    WorkerProcess,
    finish,
    outcome,
    plan,
    reporter,
    write_agent,
    write_catalog,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from workflows.engine.engine_client import connect, start_experiment, wait_for
from workflows.faults import VARIABLE
from workflows.settings import Settings

FAULTS = {  # the broken build -> (the check that must catch it, what it then reports)
    "skip-teardown": ("host snapshot before clean-up", "left on the host before clean-up"),
    "score-twice": ("results duplicated: Temporal history", "results produced twice"),
    "comment-twice": ("results duplicated: GitHub request log", "2 comments"),
    "stale-comment": ("PR comment correct", "the PR comment does not show the stored results"),
    "drop-errors": ("results lost", "results lost"),
    "errors-as-infra": ("cells misclassified", "misclassified"),
}
CASES = 4  # case-03 fails on purpose (agent_error), so failed cells are recorded too


async def small_experiment(
    tmp_path: Path, settings: Settings, github: FakeGitHub, fault: str
) -> Outcome:
    write_catalog(settings.catalog_root, cases=CASES)
    agent = write_agent(tmp_path / "agent", sleep_s=0.05)
    spec = plan(settings, agent, trials=1)
    store = open_store(settings)
    client = await connect(settings)
    env = {VARIABLE: fault} if fault else {}
    worker = WorkerProcess(settings, tmp_path / "worker.log", extra_env=env).start()
    completed = False
    try:
        await start_experiment(client, settings, spec, reporter=reporter(REPO, PR), max_parallel=8)
        await asyncio.wait_for(wait_for(client, spec.experiment_id), timeout=120)
        completed = True
    finally:
        snapshot, left = await finish(worker, settings, spec.experiment_id)
    result = await outcome(
        client, store, github, spec, (REPO, PR),
        completed=completed, snapshot=snapshot, blob_dir=settings.blob_dir,
    )  # fmt: skip
    result.orphaned = left
    return result


@pytest.fixture
def small_settings(settings: Settings) -> Settings:
    """The chaos settings, on a catalog this module writes itself."""
    catalog = settings.catalog_root.parent / "small-catalog"
    return settings.with_changes(catalog_root=catalog)


@pytest.mark.timeout(180)
async def test_the_checks_pass_on_the_real_build(
    tmp_path: Path, small_settings: Settings, github: FakeGitHub
) -> None:
    result = await small_experiment(tmp_path, small_settings, github, fault="")
    assert result.failures() == [], result.failures()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_each_check_catches_its_broken_build(
    tmp_path: Path, small_settings: Settings, github: FakeGitHub, fault: str
) -> None:
    check, expected = FAULTS[fault]
    result = await small_experiment(tmp_path, small_settings, github, fault=fault)
    failures = result.failures()
    caught = any(expected in failure for failure in failures)
    record("mutation", check, fault=f"EVALBOT_FAULT={fault}", caught=caught,
           detail="; ".join(failures)[:200])  # fmt: skip
    assert caught, (fault, failures)
