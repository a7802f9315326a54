"""Switching provider is one setting: the tiny experiment through the real engine (Temporal dev
server, workers, store) with EVALBOT_PROVIDER=modal — the real `modal` SDK talking to the Modal test
server (tests/fakes/modal_server) —, prewarm then reset to the PR's commit through the CLI, and the
demo (`evalbot demo`) on the local provider and on Modal with the same verdicts. What happened on
"Modal" is read from the server's side: its sandboxes' records and its counters."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bot.cli import _register_commands, cli
from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.conftest import REPO_ROOT
from tests.fakes.modal_server.fixture import ModalTestServer
from tests.support.agent_repo import TINY_CATALOG, AgentRepo
from tests.support.temporal import engine_settings_for
from workflows.catalog.hashing import tree_version
from workflows.catalog.loaders import load_world
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.planning import plan_experiment
from workflows.prewarm.image_label import split_reference
from workflows.providers.modal.modal_images import modal_image_name, prewarm_image_name
from workflows.records import RunStatus
from workflows.report import ExperimentReport
from workflows.settings import Settings

pytestmark = [pytest.mark.timeout(300)]


@pytest.fixture
def server(modal_server: ModalTestServer) -> Iterator[ModalTestServer]:
    """The session's server with a start latency and Modal's 5/s creation limit, counters reset."""
    saved = asdict(modal_server.cloud.knobs())
    modal_server.reset_counters()
    modal_server.configure(start_latency_s=0.3, create_rate_per_s=5)
    yield modal_server
    modal_server.configure(**saved)


def sandboxes_since(server: ModalTestServer, started: float) -> list[dict[str, Any]]:
    metas = [json.loads(p.read_text()) for p in server.cloud.root.glob("sandboxes/*/meta.json")]
    return [meta for meta in metas if meta["created_at"] >= started]


@pytest.fixture
def modal_settings(
    tmp_path: Path, temporal_server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The engine tests' settings, plus the one setting that picks the provider (from the env)."""
    monkeypatch.setenv("EVALBOT_PROVIDER", "modal")
    monkeypatch.setenv("EVALBOT_MODAL_APP_NAME", f"evalbot-engine-{uuid.uuid4().hex[:8]}")
    return engine_settings_for(tmp_path / "evalbot", temporal_server, TINY_CATALOG)


async def test_the_tiny_experiment_runs_unchanged_on_modal(
    modal_settings: Settings, agent_repo: AgentRepo, server: ModalTestServer
) -> None:
    assert modal_settings.sandbox.provider == "modal"
    world = load_world(modal_settings.catalog_root, "tiny")
    version_before = tree_version(world.path)
    store = open_store(modal_settings)
    arms = [
        ArmSpec(name="base", ref="base", commit=agent_repo.base),
        ArmSpec(name="head", ref="head", commit=agent_repo.head),
    ]
    spec = plan_experiment(
        modal_settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=2
    )
    started = time.time()

    report = await run_experiment(modal_settings, store, spec, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in runs) == sorted(c.run_id for c in spec.cells())
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    overall = next(row for row in report.comparisons[0].rows if row.overall)
    assert overall.head_mean > overall.base_mean  # the same verdict as on the local provider
    assert {r.provider for r in runs} == {"modal"}
    assert {r.world_version for r in runs} == {world.version}
    assert tree_version(world.path) == version_before
    # Sandbox CPU and memory seconds per run, priced beside the agent's own cost.
    for run in runs:
        assert run.sandbox.sandbox_seconds > 0 and run.sandbox.memory_gib_seconds > 0
        assert run.sandbox.billed_cpu_seconds >= run.sandbox.sandbox_seconds  # 1 reserved core
        assert run.sandbox.cost_usd > 0
    assert all(summary.sandbox_cost_usd > 0 for summary in report.summaries)
    assert "sandbox cost / run" in {c.metric for c in report.comparisons[0].resources}
    # Modal's side: one build sandbox per arm, one sandbox per cell, all gone at the end; no cold
    # build came from a prewarmed image (there is none yet).
    metas = sandboxes_since(server, started)
    builds = [m for m in metas if m["tags"]["evalbot"] == "build"]
    cells = [m for m in metas if m["tags"]["evalbot"] == "run"]
    assert sorted(m["tags"]["commit"] for m in builds) == sorted([agent_repo.base, agent_repo.head])
    assert sorted(m["tags"]["run"] for m in cells) == sorted(c.run_id for c in spec.cells())
    assert {m["tags"]["experiment"] for m in cells} == {spec.experiment_id}
    assert all(m["terminated_at"] is not None for m in metas)
    assert all(m["block_network"] for m in metas)  # neither runs nor builds have network here
    # Creations ran at the server's 5/s limit, as the server counted them; any it refused were
    # retried by the admission control and no run paid for them.
    seen = server.stats()
    assert seen["max_per_1s"] <= 5 and seen["created"] == len(metas)


async def test_a_server_limit_under_the_engines_rate_is_retried_within_the_budget(
    modal_settings: Settings, agent_repo: AgentRepo, server: ModalTestServer
) -> None:
    """40 cells while the server refuses creations beyond 2/s and the engine sends up to 5/s (its
    provision queue and its client bucket at their defaults): each refusal is a RESOURCE_EXHAUSTED
    that the admission control retries with backoff. Counted by the server, not the client: the
    limit was hit and held, no creation was refused as often as `create_attempts` (it would have
    given up), the refusals stay within that retry budget, and every cell is scored with one
    sandbox."""
    server.configure(create_rate_per_s=2)
    store = open_store(modal_settings)
    arms = [
        ArmSpec(name="base", ref="base", commit=agent_repo.base),
        ArmSpec(name="head", ref="head", commit=agent_repo.head),
    ]
    spec = plan_experiment(
        modal_settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=4
    )
    assert len(spec.cells()) == 40
    started = time.time()

    await run_experiment(modal_settings, store, spec, quiet=True)

    runs = store.list_runs(spec.experiment_id)
    assert sorted(r.run_id for r in runs) == sorted(c.run_id for c in spec.cells())
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    cells = [m for m in sandboxes_since(server, started) if m["tags"]["evalbot"] == "run"]
    assert sorted(m["tags"]["run"] for m in cells) == sorted(c.run_id for c in spec.cells())
    seen = server.stats()
    per_creation = modal_settings.modal.create_attempts - 1
    assert seen["max_per_1s"] <= 2
    assert seen["refused"] > 0  # the engine's 5/s met the server's 2/s
    assert seen["max_refused_one"] <= per_creation
    assert seen["refused"] <= per_creation * seen["created"]


def test_prewarm_then_the_prs_commit_is_a_reset(
    modal_settings: Settings, agent_repo: AgentRepo, server: ModalTestServer
) -> None:
    """`evalbot prewarm` (the hourly job) publishes main's image; the experiment's base arm uses
    it as is and its head arm is the prewarmed image plus the delta and `build.incremental`."""
    env = {"EVALBOT_DATA_DIR": str(modal_settings.data_dir), "EVALBOT_PROVIDER": "modal"}
    _register_commands()
    prewarmed = CliRunner().invoke(
        cli, ["prewarm", "--repo", str(agent_repo.path), "--ref", agent_repo.base], env=env
    )
    assert prewarmed.exit_code == 0, prewarmed.output
    store = open_store(modal_settings)
    arms = [
        ArmSpec(name="base", ref="base", commit=agent_repo.base),
        ArmSpec(name="head", ref="head", commit=agent_repo.head),
    ]
    spec = plan_experiment(
        modal_settings, repo=str(agent_repo.path), dataset="tiny", arms=arms, trials=1
    )
    started = time.time()

    asyncio.run(run_experiment(modal_settings, store, spec, quiet=True))  # the CLI's own loop

    runs = store.list_runs(spec.experiment_id)
    assert {r.status for r in runs} == {RunStatus.SCORED}, [(r.run_id, r.error) for r in runs]
    images = {r.arm: split_reference(r.image) for r in runs}
    assert images["base"] == (modal_image_name(agent_repo.path, agent_repo.base), None)
    name, origin = images["head"]
    assert name == modal_image_name(agent_repo.path, agent_repo.head)
    assert origin is not None and (origin.kind, origin.base) == ("reset", agent_repo.base[:12])
    (build,) = [m for m in sandboxes_since(server, started) if m["tags"]["evalbot"] == "build"]
    prewarm = prewarm_image_name(agent_repo.path, agent_repo.base)
    assert build["image_id"] == server.cloud.image_by_tag(prewarm)  # started from the prewarm


# -- the demo ------------------------------------------------------------------------------------

# What `evalbot demo` must show (seed 0, 3 trials, all 32 cases of `bar`), on any provider: the PR
# completes the lists the main branch leaves short and leaks privileged documents into summaries
# (tests/examples/test_pr_overlay.py), nothing else changes detectably, the criteria on fewer than
# 10 cases say so, and the LLM-judged criterion is not judged (no judge configured). Verdict, then
# the arms' means as the report rounds them.
DEMO_EXPECTED = {
    "overall": ("no detectable change", 0.85, 0.90),
    "accuracy": ("no detectable change", 1.00, 0.97),
    "completeness": ("improved", 0.20, 0.90),
    "citations": ("no detectable change", 0.86, 0.90),
    "quality": ("not judged", None, None),
    "world_change": ("too few cases", 1.00, 1.00),
    "format": ("too few cases", 1.00, 1.00),
    "privilege": ("regressed", 1.00, 0.33),
}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def run_demo(
    provider: str, folder: Path, temporal_server: DevServer, trials: int
) -> tuple[ExperimentReport, dict[str, Any]]:
    """`evalbot demo --json` itself (the CLI, in this process, whose environment points the
    `modal` SDK at the test server), with EVALBOT_PROVIDER and the trials the only inputs; the rest
    of the environment is the test harness's (where state goes, this session's Temporal server,
    task queues of its own, a short poll interval). The report, and what it shows per criterion."""
    suffix = uuid.uuid4().hex[:8]
    env = {name: None for name in os.environ if name.startswith(("EVALBOT_", "OPENAI_"))} | {
        "EVALBOT_DATA_DIR": str(folder / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(REPO_ROOT),
        "EVALBOT_TEMPORAL_ADDRESS": temporal_server.address,
        "EVALBOT_RUN_TASK_QUEUE": f"runs-{suffix}",
        "EVALBOT_COLLECT_TASK_QUEUE": f"collect-{suffix}",
        "EVALBOT_SCORE_TASK_QUEUE": f"score-{suffix}",
        "EVALBOT_PROVISION_TASK_QUEUE": f"provision-{suffix}",
        "EVALBOT_POLL_INTERVAL_S": "0.2" if provider == "local" else "1.0",
        "EVALBOT_PROVIDER": provider,
        "EVALBOT_MODAL_APP_NAME": f"evalbot-demo-{suffix}",
    }
    _register_commands()
    command = ["demo", "--json", "--no-history", "--trials", str(trials)]
    command += ["--output", str(folder / "demo-output")]  # the history: test_demo_history.py
    result = CliRunner().invoke(cli, command, env=env)
    assert result.exit_code == 0, result.output
    report = ExperimentReport.model_validate_json(result.stdout)
    cells = 32 * 2 * trials
    assert (report.dataset, report.trials, len(report.arms)) == ("bar", trials, 2)
    assert report.progress.complete and report.progress.by_status == {"scored": cells}
    store = open_store(Settings(data_dir=folder / "evalbot", store={"database_url": None}))
    runs = store.list_runs(report.experiment_id)
    assert len(runs) == cells and {r.provider for r in runs} == {provider}
    shown = {
        row.criterion: (str(row.verdict), _rounded(row.base_mean), _rounded(row.head_mean))
        for row in report.comparisons[0].rows
    }
    return report, shown


def test_the_demo_shows_what_it_should(tmp_path: Path, temporal_server: DevServer) -> None:
    """The whole demo (3 trials, 192 cells) on the local provider."""
    _, shown = run_demo("local", tmp_path, temporal_server, trials=3)
    assert shown == DEMO_EXPECTED


def test_the_demo_shows_the_same_on_modal_as_on_local(
    tmp_path: Path, temporal_server: DevServer, server: ModalTestServer
) -> None:
    """One trial of the demo (64 cells) on each provider, EVALBOT_PROVIDER the only difference:
    the same verdicts and means. (One trial, not three: on this 2-core machine 192 Modal
    sandboxes, each a container polled over gRPC, starve the engine sharing the CPU with them.)"""
    _, on_local = run_demo("local", tmp_path / "local", temporal_server, trials=1)
    started = time.time()
    _, on_modal = run_demo("modal", tmp_path / "modal", temporal_server, trials=1)
    assert on_modal == on_local
    assert {verdict for verdict, _, _ in on_local.values()} > {"no detectable change"}
    metas = sandboxes_since(server, started)
    assert len([m for m in metas if m["tags"]["evalbot"] == "build"]) == 2
    assert len([m for m in metas if m["tags"]["evalbot"] == "run"]) == 64
    assert all(meta["terminated_at"] is not None for meta in metas)
    assert server.stats()["max_per_1s"] <= 5
