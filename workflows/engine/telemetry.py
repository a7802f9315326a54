"""The worker's metrics (`EngineMetrics`), counted as things happen: a scrape reads counters in
memory and never queries the store (docs/deploy.md, "Metrics").

Each instance has a registry of its own, so nothing is global: the worker builds one and hands it
to its activities (workflows/engine/worker.py), tests build their own. The names are the contract
with infra/prometheus.yml and infra/grafana/evalbot-dashboard.json
(tests/infra/test_metrics_names.py checks them against a real scrape).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from workflows.records import RunResult

# provision: milliseconds (local) to minutes (a cold Modal image); execute: the agent's run
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
STAGES = ("provision", "execute", "collect", "teardown")
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class EngineMetrics:
    """Counters, histograms and gauges of one worker process, in `self.registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.experiments_started = Counter(
            "evalbot_experiments_started", "Experiments whose workflow began (stored).", registry=r
        )
        self.experiments_finished = Counter(
            "evalbot_experiments_finished", "Experiments that ended, by status.", ["status"],
            registry=r,
        )  # fmt: skip
        self.runs = Counter(
            "evalbot_runs", "Run results stored (new or changed), by status.", ["status"],
            registry=r,
        )  # fmt: skip
        self.spend = Counter(
            "evalbot_spend_usd", "Money spent by the runs stored here, by kind (agent, sandbox).",
            ["kind"], registry=r,
        )  # fmt: skip
        self.stage_seconds = Histogram(
            "evalbot_stage_duration_seconds", "Stage activity latency, by stage and outcome.",
            ["stage", "outcome"], buckets=STAGE_BUCKETS, registry=r,
        )  # fmt: skip
        self.provider_errors = Counter(
            "evalbot_provider_errors", "Sandbox provider errors, by provider and error class.",
            ["provider", "error"], registry=r,
        )  # fmt: skip
        self.judge_calls = Counter(
            "evalbot_judge_calls",
            "LLM judge requests, by outcome (ok, malformed, unavailable; cached: no request).",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.queue_backlog = Gauge(
            "evalbot_task_queue_backlog", "Tasks waiting in a Temporal task queue (approximate).",
            ["task_queue", "kind"], registry=r,
        )  # fmt: skip
        for stage in STAGES:  # every series exists from the first scrape (rate() needs a zero)
            for outcome in ("ok", "error"):
                self.stage_seconds.labels(stage, outcome)

    def stored_runs(self) -> int:
        """Run results this process stored (new or changed), whatever their status."""
        return round(
            sum(
                sample.value
                for family in self.runs.collect()
                for sample in family.samples
                if sample.name == "evalbot_runs_total"
            )
        )

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Observe the duration of the enclosed stage, labelled ok or error."""
        began = time.monotonic()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        finally:
            self.stage_seconds.labels(name, outcome).observe(time.monotonic() - began)

    def run_stored(self, result: RunResult) -> None:
        """A result was stored (inserted or changed: a retried save of the same result is not)."""
        self.runs.labels(result.status.value).inc()
        if result.usage.cost_usd:
            self.spend.labels("agent").inc(result.usage.cost_usd)
        if result.sandbox.cost_usd:
            self.spend.labels("sandbox").inc(result.sandbox.cost_usd)

    def provider_error(self, provider: str, error: BaseException | str) -> None:
        kind = error if isinstance(error, str) else type(error).__name__
        self.provider_errors.labels(provider, kind).inc()

    def judge_call(self, outcome: str) -> None:
        self.judge_calls.labels(outcome).inc()


class Metered(Protocol):
    metrics: EngineMetrics


def timed(stage: str) -> Callable[[F], F]:
    """Observe an activity method's duration in `self.metrics` as stage `stage`. Put it under
    `@activity.defn`: the signature and type hints Temporal reads are the method's own."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        async def timed_method(self: Metered, *args: Any) -> Any:
            with self.metrics.stage(stage):
                return await method(self, *args)

        return cast(F, timed_method)

    return wrap
