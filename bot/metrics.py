"""`GET /metrics` in the Prometheus text format (version 0.0.4).

From the store (one grouped query each, so cheap at any size): experiments by state, cells by
state, judge errors, spend (agent and sandbox, USD). From this process: sandbox provisioning
latency, a histogram fed by `observe_provisioning(seconds)` — wherever provisioning runs in this
process (the embedded worker); a separate worker process exposes its own. Aggregates only: no
experiment, case or transcript content, so the endpoint needs no sign-in.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine

from workflows.store import Store
from workflows.store.tables import experiments, runs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Histogram:
    def __init__(self, buckets: Iterable[float] = BUCKETS) -> None:
        self.buckets = tuple(sorted(buckets))
        self.counts = [0] * len(self.buckets)
        self.total = 0
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self.total += 1
            self.sum += value
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    self.counts[i] += 1

    def lines(self, name: str) -> list[str]:
        with self._lock:
            out = [
                f'{name}_bucket{{le="{_num(b)}"}} {c}'
                for b, c in zip(self.buckets, self.counts, strict=True)
            ]
            out += [
                f'{name}_bucket{{le="+Inf"}} {self.total}',
                f"{name}_sum {_num(self.sum)}",
                f"{name}_count {self.total}",
            ]
        return out


PROVISIONING = Histogram()


def observe_provisioning(seconds: float) -> None:
    PROVISIONING.observe(seconds)


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else f"{int(value)}.0"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(engine: Engine, provisioning: Histogram = PROVISIONING) -> str:
    with engine.connect() as connection:
        by_experiment_state = connection.execute(
            select(experiments.c.status, func.count()).group_by(experiments.c.status)
        ).all()
        by_cell_state = connection.execute(
            select(
                runs.c.status, func.count(), func.coalesce(func.sum(runs.c.cost_usd), 0.0)
            ).group_by(runs.c.status)
        ).all()
        sandbox_rows = connection.execute(
            select(runs.c.sandbox_usage).where(runs.c.sandbox_usage.is_not(None))
        ).all()
    lines = [
        "# HELP evalbot_experiments Experiments by state.",
        "# TYPE evalbot_experiments gauge",
    ]
    lines += [
        f'evalbot_experiments{{state="{_label(s)}"}} {n}' for s, n in sorted(by_experiment_state)
    ]
    lines += [
        "# HELP evalbot_cells Finished cells (stored runs) by state.",
        "# TYPE evalbot_cells gauge",
    ]
    lines += [f'evalbot_cells{{state="{_label(s)}"}} {n}' for s, n, _ in sorted(by_cell_state)]
    judge_errors = sum(n for s, n, _ in by_cell_state if s == "judge_error")
    agent_spend = sum(float(c) for _, _, c in by_cell_state)
    sandbox_spend = sum(float((row[0] or {}).get("cost_usd", 0.0)) for row in sandbox_rows)
    lines += [
        "# HELP evalbot_judge_errors_total Runs whose grading failed (judge_error).",
        "# TYPE evalbot_judge_errors_total counter",
        f"evalbot_judge_errors_total {judge_errors}",
        "# HELP evalbot_spend_usd_total Money spent by stored runs, by kind.",
        "# TYPE evalbot_spend_usd_total counter",
        f'evalbot_spend_usd_total{{kind="agent"}} {_num(agent_spend)}',
        f'evalbot_spend_usd_total{{kind="sandbox"}} {_num(sandbox_spend)}',
        "# HELP evalbot_sandbox_provision_seconds Sandbox provisioning latency in this process.",
        "# TYPE evalbot_sandbox_provision_seconds histogram",
        *provisioning.lines("evalbot_sandbox_provision_seconds"),
    ]
    return "\n".join(lines) + "\n"


def metrics_router(given_store: object, database_url: str) -> APIRouter:
    url = given_store.url if isinstance(given_store, Store) else database_url
    engine = create_engine(url)
    router = APIRouter()

    @router.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(render_metrics(engine), media_type=CONTENT_TYPE)

    return router
