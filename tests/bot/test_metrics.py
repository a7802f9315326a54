"""GET /metrics on the bot's app: Prometheus text with experiments and cells by state, judge
errors, spend and the provisioning latency histogram, all from the store (the workers store each
run's provisioning time; the web process never provisions anything). Only for the metrics token."""

from __future__ import annotations

import base64
import re

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from bot.metrics import render_metrics
from tests.bot.conftest import AppServer
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import RunStatus, SandboxUsage
from workflows.settings import Settings
from workflows.store import Store

METRICS_TOKEN = "prometheus-scrape-token"
AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}
LINE = re.compile(r'^[a-z_]+(\{[a-z]+="[^"]*"\})? -?[0-9.e+-]+$')


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
    assert ("evalbot_judge_errors_total" in response.text) == (status == 200)


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


def test_metrics_count_states_judge_errors_and_spend(app: AppServer, store: Store) -> None:
    spec = make_spec(n_cases=3, trials=1)
    store.save_experiment(spec)
    store.save_run(scored_run(spec, 0, "main", 0, {"a": 1.0}, cost=0.25).model_copy(
        update={"sandbox": SandboxUsage(cost_usd=0.5)}))  # fmt: skip
    store.save_run(scored_run(spec, 1, "main", 0, {"a": 1.0}, cost=0.25))
    store.save_run(errored_run(spec, 2, "main", 0, RunStatus.JUDGE_ERROR, "judge down"))
    other = spec.model_copy(update={"experiment_id": "exp-2"})
    store.save_experiment(other)
    store.set_experiment_status("exp-2", "completed")

    response = httpx.get(f"{app.url}/metrics", headers=AUTH)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    for line in text.splitlines():
        assert line.startswith("# ") or LINE.match(line), line
    assert _value(text, 'evalbot_experiments{state="running"}') == 1
    assert _value(text, 'evalbot_experiments{state="completed"}') == 1
    assert _value(text, 'evalbot_cells{state="scored"}') == 2
    assert _value(text, 'evalbot_cells{state="judge_error"}') == 1
    assert _value(text, "evalbot_judge_errors_total") == 1
    assert _value(text, 'evalbot_spend_usd_total{kind="agent"}') == 0.25 + 0.25 + 0.02
    assert _value(text, 'evalbot_spend_usd_total{kind="sandbox"}') == 0.5
    assert _value(text, "evalbot_sandbox_provision_seconds_count") == 0  # none stored a time
    assert "Answer" not in text and "judge down" not in text  # aggregates only


def _provisioned(store: Store, seconds: list[float | None]) -> None:
    spec = make_spec(n_cases=len(seconds), trials=1)
    store.save_experiment(spec)
    for i, value in enumerate(seconds):
        run = scored_run(spec, i, "main", 0, {"a": 1.0}, cost=0.0)
        store.save_run(run.model_copy(update={"provision_s": value}))


def test_provisioning_histogram_is_built_from_stored_runs(app: AppServer, store: Store) -> None:
    _provisioned(store, [0.05, 0.3, 0.3, 4.0, 200.0, None])  # None: no sandbox was made
    text = httpx.get(f"{app.url}/metrics", headers=AUTH).text
    name = "evalbot_sandbox_provision_seconds"
    buckets = {
        "0.05": 1, "0.1": 1, "0.25": 1, "0.5": 3, "1.0": 3, "2.5": 3, "5.0": 4, "10.0": 4,
        "30.0": 4, "60.0": 4, "120.0": 4, "+Inf": 5,
    }  # fmt: skip
    for le, count in buckets.items():
        assert _value(text, f'{name}_bucket{{le="{le}"}}') == count, le
    assert _value(text, f"{name}_count") == 5
    assert _value(text, f"{name}_sum") == pytest.approx(204.65)
    assert f"# TYPE {name} histogram" in text


@pytest.mark.postgres
def test_provisioning_histogram_on_postgresql(postgres_url: str) -> None:
    with Store(postgres_url) as store:
        store.migrate()
        _provisioned(store, [0.05, 0.7, None])
    engine = create_engine(postgres_url)
    try:
        text = render_metrics(engine)
    finally:
        engine.dispose()
    name = "evalbot_sandbox_provision_seconds"
    assert _value(text, f'{name}_bucket{{le="0.05"}}') == 1
    assert _value(text, f'{name}_bucket{{le="0.5"}}') == 1
    assert _value(text, f'{name}_bucket{{le="1.0"}}') == 2
    assert _value(text, f'{name}_bucket{{le="+Inf"}}') == 2
    assert _value(text, f"{name}_sum") == pytest.approx(0.75)
