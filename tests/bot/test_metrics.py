"""GET /metrics on the bot's app: Prometheus text with experiments and cells by state, judge
errors, spend and the provisioning latency histogram, all from the store (the workers store each
run's provisioning time; the web process never provisions anything)."""

from __future__ import annotations

import re

import httpx
import pytest
from sqlalchemy import create_engine

from bot.metrics import render_metrics
from tests.bot.conftest import AppServer
from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import RunStatus, SandboxUsage
from workflows.store import Store

LINE = re.compile(r'^[a-z_]+(\{[a-z]+="[^"]*"\})? -?[0-9.e+-]+$')


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

    response = httpx.get(f"{app.url}/metrics")
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
    text = httpx.get(f"{app.url}/metrics").text
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
