"""GET /metrics on the bot's app, through prometheus_client: deliveries and the bot's experiments
counted as they happen, experiments by state from the experiments table, and never a query on the
runs table, however many rows it has. Only for the metrics token; the multiprocess folder sums
`serve --processes N`."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import event

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from bot.metrics import MULTIPROC_ENV, AppMetrics, MeteredLauncher, scrape_registry
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import NUMBER, REPO, pr_comment
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import make_spec, scored_run
from workflows.settings import Settings
from workflows.store import Store

METRICS_TOKEN = "prometheus-scrape-token"
AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}
RUNS_TABLE = re.compile(r"\bruns\b", re.I)


@pytest.fixture
def bot_settings(bot_settings: Settings) -> Settings:
    return bot_settings.with_changes(dashboard={"metrics_token": SecretStr(METRICS_TOKEN)})


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong-token"}, 401), (_basic("prom", "wrong"), 401),
     ({"Authorization": f"Token {METRICS_TOKEN}"}, 401), ({"Authorization": "Basic %%%"}, 401),
     (AUTH, 200), (_basic("prometheus", METRICS_TOKEN), 200)],
    ids=["none", "wrong-bearer", "wrong-basic", "other-scheme", "bad-basic", "bearer", "basic"],
)  # fmt: skip
def test_metrics_need_the_metrics_token(
    app: AppServer, headers: dict[str, str], status: int
) -> None:
    response = httpx.get(f"{app.url}/metrics", headers=headers)
    assert response.status_code == status
    assert ("evalbot_webhook_deliveries" in response.text) == (status == 200)


def test_without_a_configured_token_metrics_refuse_everyone(
    bot_settings: Settings, store: Store
) -> None:
    settings = bot_settings.with_changes(dashboard={"metrics_token": None})
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as server:
        refused = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer x"})
    assert refused.status_code == 401 and "EVALBOT_DASHBOARD_METRICS_TOKEN" in refused.text


def _value(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{series} missing from:\n{text}")


def test_deliveries_and_started_experiments_are_counted(
    app: AppServer, sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = pr_comment("/eval tiny --trials 1")
    payload["comment"]["id"] = github.add_comment(REPO, NUMBER, "/eval tiny", "Codertocat")["id"]
    assert sender.deliver("issue_comment", payload).json()["action"] == "started"
    assert sender.deliver("ping", {"zen": "hi"}).status_code == 200
    assert sender.deliver("issue_comment", payload, signature="sha256=00").status_code == 401
    assert sender.deliver("made-up-event", {}).status_code == 204
    text = httpx.get(f"{app.url}/metrics", headers=AUTH).text
    assert len(launcher.started) == 1
    assert _value(text, 'evalbot_bot_experiments_total{action="started"}') == 1
    deliveries = "evalbot_webhook_deliveries_total"
    assert _value(text, f'{deliveries}{{code="200",event="issue_comment"}}') == 1
    assert _value(text, f'{deliveries}{{code="401",event="issue_comment"}}') == 1
    assert _value(text, f'{deliveries}{{code="200",event="ping"}}') == 1
    assert _value(text, f'{deliveries}{{code="204",event="other"}}') == 1  # no series per name


def test_experiments_by_state_come_from_the_experiments_table(app: AppServer, store: Store) -> None:
    spec = make_spec(n_cases=1, trials=1)
    store.save_experiment(spec)
    other = spec.model_copy(update={"experiment_id": "exp-2"})
    store.save_experiment(other)
    store.set_experiment_status("exp-2", "completed")
    text = httpx.get(f"{app.url}/metrics", headers=AUTH).text
    assert _value(text, 'evalbot_experiments{state="running"}') == 1
    assert _value(text, 'evalbot_experiments{state="completed"}') == 1


def _runs_queries_during_scrape(store: Store, n_runs: int) -> list[str]:
    spec = make_spec(n_cases=n_runs, trials=1).model_copy(update={"experiment_id": f"exp-{n_runs}"})
    store.save_experiment(spec)
    for i in range(n_runs):
        store.save_run(scored_run(spec, i, "main", 0, {"a": 1.0}, cost=0.25))
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    metrics = AppMetrics(store.engine, multiprocess=False)
    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        text = metrics.scrape().decode()
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    assert "evalbot_experiments{" in text  # the scrape did query the store
    return [s for s in statements if s.lstrip().upper().startswith("SELECT")]


def test_a_scrape_never_reads_the_runs_table(store: Store) -> None:
    few = _runs_queries_during_scrape(store, 2)
    many = _runs_queries_during_scrape(store, 60)
    assert len(few) == len(many) == 1, many  # one GROUP BY on experiments, whatever the runs
    assert not [s for s in few + many if RUNS_TABLE.search(s)], many


async def test_the_metered_launcher_counts_only_what_happened(launcher: FakeLauncher) -> None:
    metrics = AppMetrics(None, multiprocess=False)
    metered = MeteredLauncher(launcher, metrics)
    assert await metered.cancel("gh/o/r/pr1/tiny/abc") is False  # nothing running: not counted
    spec = make_spec(n_cases=1, trials=1)
    await metered.start(spec, {})
    assert await metered.cancel(spec.experiment_id) is True
    count = metrics.registry.get_sample_value
    assert count("evalbot_bot_experiments_total", {"action": "started"}) == 1
    assert count("evalbot_bot_experiments_total", {"action": "cancelled"}) == 1


COUNT_IN_CHILD = """
import sys
from bot.metrics import AppMetrics
metrics = AppMetrics(None)
for _ in range(int(sys.argv[1])):
    metrics.deliveries.labels("ping", "200").inc()
"""


def test_processes_count_into_one_multiprocess_folder(tmp_path: Path) -> None:
    """`serve --processes N`: what each process counted is summed by any scrape."""
    env = {**os.environ, MULTIPROC_ENV: str(tmp_path)}
    for n in (2, 3):
        subprocess.run([sys.executable, "-c", COUNT_IN_CHILD, str(n)], env=env, check=True,
                       timeout=60)  # fmt: skip
    os.environ[MULTIPROC_ENV] = str(tmp_path)
    try:
        registry = scrape_registry(None, None)
    finally:
        del os.environ[MULTIPROC_ENV]
    total = registry.get_sample_value(
        "evalbot_webhook_deliveries_total", {"event": "ping", "code": "200"}
    )
    assert total == 5
