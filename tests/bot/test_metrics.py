"""GET /metrics on the bot's app: Prometheus text with experiments and cells by state, judge
errors, spend and the provisioning latency histogram."""

from __future__ import annotations

import re

import httpx

from bot.metrics import Histogram, observe_provisioning
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
    observe_provisioning(0.2)

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
    assert _value(text, "evalbot_sandbox_provision_seconds_count") >= 1
    assert "Answer" not in text and "judge down" not in text  # aggregates only


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram((0.1, 1.0))
    for value in (0.05, 0.5, 5.0):
        histogram.observe(value)
    assert histogram.lines("h") == [
        'h_bucket{le="0.1"} 1', 'h_bucket{le="1.0"} 2', 'h_bucket{le="+Inf"} 3',
        "h_sum 5.55", "h_count 3",
    ]  # fmt: skip
