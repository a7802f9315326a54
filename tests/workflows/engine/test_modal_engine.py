"""Switching provider is one setting: the tiny experiment through the real engine (Temporal dev
server, workers, store) with EVALBOT_PROVIDER=modal, on the fake Modal (tests/fakes/modal_fake), and
the demo (`evalbot demo`) on the local provider and on the fake Modal with the same verdicts."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import _register_commands, cli
from bot.commands.experiments import run_experiment
from bot.composition import open_store
from tests.conftest import REPO_ROOT
from tests.fakes.modal_fake import FakeModal, host_problem
from tests.support.agent_repo import TINY_CATALOG, AgentRepo
from tests.support.temporal import engine_settings_for
from workflows.catalog.hashing import tree_version
from workflows.catalog.loaders import load_world
from workflows.catalog.models import ArmSpec
from workflows.engine.devserver import DevServer
from workflows.engine.planning import plan_experiment
from workflows.providers import PROVIDERS
from workflows.providers.base import SandboxProvider
from workflows.providers.modal import ModalConfig, ModalProvider
from workflows.records import RunStatus
from workflows.report import ExperimentReport
from workflows.settings import Settings

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(host_problem() is not None, reason=f"fake Modal: {host_problem()}"),
]


@pytest.fixture
def cloud(tmp_path: Path) -> FakeModal:
    return FakeModal(tmp_path / "modal-cloud", start_latency_s=0.3, create_rate_per_s=5)


@pytest.fixture
def providers(monkeypatch: pytest.MonkeyPatch, cloud: FakeModal) -> list[ModalProvider]:
    """The "modal" factory, building the real provider on the fake SDK instead of `modal`."""
    made: list[ModalProvider] = []

    def factory(settings: Settings) -> SandboxProvider:
        provider = ModalProvider(cloud, ModalConfig.from_settings(settings))
        made.append(provider)
        return provider

    monkeypatch.setitem(PROVIDERS, "modal", factory)
    return made


@pytest.fixture
def modal_settings(
    tmp_path: Path, temporal_server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The engine tests' settings, plus the one setting that picks the provider (from the env)."""
    monkeypatch.setenv("EVALBOT_PROVIDER", "modal")
    return engine_settings_for(tmp_path / "evalbot", temporal_server, TINY_CATALOG)


async def test_the_tiny_experiment_runs_unchanged_on_modal(
    modal_settings: Settings,
    agent_repo: AgentRepo,
    cloud: FakeModal,
    providers: list[ModalProvider],
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
    # Modal-side effects: one image per arm, one world Volume, every sandbox gone at the end.
    (provider,) = providers
    assert provider.images.builds == 2 and provider.worlds.uploads == 1
    assert len(cloud.stats.accepted) == len(runs) + 2  # a sandbox per cell plus the two builds
    # Creations ran at the server's 5/s limit; the few it refused (client and server clocks
    # differ) were retried by the admission control, and no run paid for them.
    assert cloud.stats.max_per_window(1.0) <= 5
    assert provider.admission.stats.rate_limited == len(cloud.stats.rejected)
    assert provider.admission.stats.gave_up == 0
    metas = [json.loads(p.read_text()) for p in cloud.root.glob("sandboxes/*/meta.json")]
    assert len(metas) == len(runs) + 2
    assert all(meta["terminated_at"] is not None for meta in metas)
    run_tags = [meta["tags"] for meta in metas if meta["tags"].get("evalbot") == "run"]
    assert {tags["run"] for tags in run_tags} == {c.run_id for c in spec.cells()}
    assert {tags["experiment"] for tags in run_tags} == {spec.experiment_id}
    assert all(meta["block_network"] for meta in metas if meta["tags"]["evalbot"] == "run")


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
DEMO_CELLS = 32 * 2 * 3


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@pytest.mark.parametrize("provider", ["local", "modal"])
def test_the_demo_shows_the_same_on_local_and_on_modal(
    provider: str, tmp_path: Path, temporal_server: DevServer, request: pytest.FixtureRequest
) -> None:
    """`evalbot demo --json` itself (the CLI, run in this process so that the "modal" factory
    builds the real provider on the fake), with EVALBOT_PROVIDER as the only difference between
    the two runs; the rest of the environment is the test harness's (where state goes, this
    session's Temporal server, task queues of its own, a short poll interval)."""
    if provider == "modal":
        cloud: FakeModal = request.getfixturevalue("cloud")
        providers: list[ModalProvider] = request.getfixturevalue("providers")
    suffix = uuid.uuid4().hex[:8]
    env = {name: None for name in os.environ if name.startswith(("EVALBOT_", "OPENAI_"))} | {
        "EVALBOT_DATA_DIR": str(tmp_path / "evalbot"),
        "EVALBOT_CATALOG_ROOT": str(REPO_ROOT),
        "EVALBOT_TEMPORAL_ADDRESS": temporal_server.address,
        "EVALBOT_RUN_TASK_QUEUE": f"runs-{suffix}",
        "EVALBOT_COLLECT_TASK_QUEUE": f"collect-{suffix}",
        "EVALBOT_SCORE_TASK_QUEUE": f"score-{suffix}",
        "EVALBOT_PROVISION_TASK_QUEUE": f"provision-{suffix}",
        "EVALBOT_POLL_INTERVAL_S": "0.2",
        "EVALBOT_PROVIDER": provider,
    }
    _register_commands()
    result = CliRunner().invoke(
        cli, ["demo", "--json", "--output", str(tmp_path / "demo-output")], env=env
    )

    assert result.exit_code == 0, result.output
    report = ExperimentReport.model_validate_json(result.stdout)
    assert (report.dataset, report.trials, len(report.arms)) == ("bar", 3, 2)
    assert report.progress.complete and report.progress.by_status == {"scored": DEMO_CELLS}
    shown = {
        row.criterion: (str(row.verdict), _rounded(row.base_mean), _rounded(row.head_mean))
        for row in report.comparisons[0].rows
    }
    assert shown == DEMO_EXPECTED
    store = open_store(Settings(data_dir=tmp_path / "evalbot", store={"database_url": None}))
    runs = store.list_runs(report.experiment_id)
    assert len(runs) == DEMO_CELLS and {r.provider for r in runs} == {provider}
    if provider != "modal":
        return
    (made,) = providers
    assert made.images.builds == 2 and made.worlds.uploads == 1
    assert len(cloud.stats.accepted) == DEMO_CELLS + 2  # a sandbox per cell plus the two builds
    assert cloud.stats.max_per_window(1.0) <= 5
    assert made.admission.stats.gave_up == 0
    metas = [json.loads(p.read_text()) for p in cloud.root.glob("sandboxes/*/meta.json")]
    assert len(metas) == DEMO_CELLS + 2
    assert all(meta["terminated_at"] is not None for meta in metas)
