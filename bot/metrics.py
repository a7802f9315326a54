"""`GET /metrics` in the Prometheus text format (version 0.0.4).

Everything comes from the store, so every web process answers alike and a restart loses nothing:
experiments by state, cells by state, judge errors, spend (agent and sandbox, USD), and sandbox
provisioning latency. Provisioning happens in the workers, not here, so each run carries its
latency into the store (`RunResult.provision_s`, measured by the `provision` activity); the
histogram covers every stored run that has one. It is cumulative like a Prometheus counter, so
`rate()` and `histogram_quantile()` give recent latency (docs/dashboard.md). One query each, cheap
at any size. Aggregates only, but spend and volumes are nobody else's business: every request needs
the metrics token (settings.dashboard.metrics_token) as `Authorization: Bearer TOKEN` or as the
password of Basic auth (Prometheus' `authorization` or `basic_auth`); without one configured,
/metrics refuses everyone.
"""

from __future__ import annotations

import base64
import hmac

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import Connection, case, func, select
from sqlalchemy.engine import Engine

from workflows.settings import Settings
from workflows.store import Store
from workflows.store.engine import make_engine
from workflows.store.tables import experiments, runs

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PROVISION = "evalbot_sandbox_provision_seconds"


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else f"{int(value)}.0"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(engine: Engine) -> str:
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
        provisioning = _provisioning_lines(connection)
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
        f"# HELP {PROVISION} Sandbox provisioning latency of stored runs (RunResult.provision_s).",
        f"# TYPE {PROVISION} histogram",
        *provisioning,
    ]
    return "\n".join(lines) + "\n"


def _provisioning_lines(connection: Connection) -> list[str]:
    """Cumulative buckets, sum and count over stored runs with a provisioning time, in one query
    (COUNT skips the NULLs: runs that never had a sandbox, or stored before migration 0006)."""
    seconds = runs.c.provision_s
    within = [func.count(case((seconds <= bound, 1))) for bound in BUCKETS]
    row = connection.execute(
        select(func.count(seconds), func.coalesce(func.sum(seconds), 0.0), *within)
    ).one()
    count, total, counts = int(row[0]), float(row[1]), [int(n) for n in row[2:]]
    lines = [
        f'{PROVISION}_bucket{{le="{_num(b)}"}} {n}' for b, n in zip(BUCKETS, counts, strict=True)
    ]
    lines += [
        f'{PROVISION}_bucket{{le="+Inf"}} {count}',
        f"{PROVISION}_sum {_num(total)}",
        f"{PROVISION}_count {count}",
    ]
    return lines


def metrics_router(given_store: object, settings: Settings) -> APIRouter:
    engine = (
        given_store.engine
        if isinstance(given_store, Store)
        else make_engine(settings.resolved_database_url)
    )
    router = APIRouter()

    @router.get("/metrics")
    def metrics(request: Request) -> PlainTextResponse:
        if not metrics_authorized(settings, request.headers.get("authorization", "")):
            return PlainTextResponse(
                "/metrics needs the metrics token (EVALBOT_DASHBOARD_METRICS_TOKEN) as a Bearer "
                "token or Basic password",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer, Basic realm="evalbot metrics"'},
            )
        return PlainTextResponse(render_metrics(engine), media_type=CONTENT_TYPE)

    return router


def metrics_authorized(settings: Settings, header: str) -> bool:
    """The Authorization header carries the metrics token (Bearer, or Basic with any user)."""
    token = settings.dashboard.metrics_token
    if token is None or not token.get_secret_value():
        return False
    scheme, _, value = header.partition(" ")
    sent = value.strip()
    if scheme.lower() == "basic":
        try:
            sent = base64.b64decode(sent, validate=True).decode().partition(":")[2]
        except (ValueError, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(sent.encode(), token.get_secret_value().encode())
