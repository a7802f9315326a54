"""The metric names infra/prometheus.yml and infra/grafana/evalbot-dashboard.json use exist in real
scrapes: the web app's /metrics, a worker's listener (EVALBOT_METRICS_WORKER_ADDRESS, its backlog
gauge read from a real Temporal dev server) and the Temporal SDK's Prometheus exporter
(EVALBOT_METRICS_TEMPORAL_ADDRESS) after a workflow and an activity ran. Renaming a metric without
the dashboard, or the other way round, fails here."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.worker import Worker

from bot import composition
from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import (  # noqa: F401 (fixtures)
    AppServer,
    Sender,
    bot_settings,
    github,
    launcher,
    store,
)
from tests.bot.payloads import NUMBER, REPO, pr_comment
from tests.fakes.echo_workflow import Echo, echo
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import make_spec
from workflows.engine.devserver import DevServer
from workflows.engine.telemetry import EngineMetrics
from workflows.ports import free_port
from workflows.records import RunStatus
from workflows.settings import Settings
from workflows.store import Store

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "infra" / "grafana" / "evalbot-dashboard.json"
SCRAPE_CONFIG = ROOT / "infra" / "prometheus.yml"
NAME = re.compile(r"\b(?:evalbot|temporal)_[a-z0-9_]+\b")
TOKEN = "scrape-token"


def used_names() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    names = {name for expr in exprs for name in NAME.findall(expr)}
    return names | set(NAME.findall(SCRAPE_CONFIG.read_text()))


def sample_names(text: str) -> set[str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in lines}


def app_scrape(settings: Settings, runs_store: Store, fake_github: FakeGitHub) -> str:
    settings = settings.with_changes(dashboard={"metrics_token": SecretStr(TOKEN)})
    runs_store.save_experiment(make_spec(n_cases=1, trials=1))  # experiments by state: a row
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with AppServer(create_app(settings, FakeLauncher(), runs_store, github=clients)) as app:
        with httpx.Client(base_url=app.url, timeout=30) as client:
            payload = pr_comment("/eval tiny --trials 1")
            comment = fake_github.add_comment(REPO, NUMBER, "/eval tiny", "Codertocat")
            payload["comment"]["id"] = comment["id"]
            assert Sender(client).deliver("issue_comment", payload).status_code == 200
        response = httpx.get(f"{app.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    return response.text


def exercised(metrics: EngineMetrics) -> EngineMetrics:
    """Every labelled series the workers make, once (a series appears on its first use)."""
    metrics.experiments_started.inc()
    metrics.experiments_finished.labels("completed").inc()
    metrics.runs.labels(RunStatus.SCORED.value).inc()
    metrics.spend.labels("agent").inc(0.1)
    metrics.provider_error("local", "RunnerLost")
    metrics.judge_call("ok")
    with metrics.stage("provision"):
        pass
    return metrics


async def worker_and_sdk_scrapes(server: DevServer, tmp_path: Path) -> tuple[str, str]:
    worker_port, sdk_port = free_port(), free_port()
    settings = Settings(
        data_dir=tmp_path,
        temporal={"address": server.address, "run_task_queue": f"q-{uuid.uuid4().hex[:8]}"},
        metrics={
            "worker_address": f"127.0.0.1:{worker_port}",
            "queue_depth_interval_s": 0.2,
        },
    )
    runtime = composition.temporal_runtime(f"127.0.0.1:{sdk_port}")
    client = await Client.connect(server.address, runtime=runtime)
    metrics = exercised(EngineMetrics())
    queue = settings.temporal.run_task_queue
    async with composition.worker_metrics(settings, metrics, client, run_workers=True):
        async with Worker(client, task_queue=queue, workflows=[Echo], activities=[echo]):
            assert await client.execute_workflow(Echo.run, "hi", id=queue, task_queue=queue)
        async with httpx.AsyncClient() as http:
            worker_text = (await http.get(f"http://127.0.0.1:{worker_port}/metrics")).text
            sdk_text = (await http.get(f"http://127.0.0.1:{sdk_port}/metrics")).text
    return worker_text, sdk_text


async def test_every_metric_the_dashboard_and_scrape_config_use_exists(
    temporal_server: DevServer,
    tmp_path: Path,
    bot_settings: Settings,  # noqa: F811
    store: Store,  # noqa: F811
    github: FakeGitHub,  # noqa: F811
) -> None:
    worker_text, sdk_text = await worker_and_sdk_scrapes(temporal_server, tmp_path)
    assert 'evalbot_task_queue_backlog{kind="activity",task_queue="' in worker_text
    scraped = sample_names(app_scrape(bot_settings, store, github))
    scraped |= sample_names(worker_text) | sample_names(sdk_text)
    used = used_names()
    assert len(used) >= 15, used  # the files were read
    assert used <= scraped, sorted(used - scraped)
