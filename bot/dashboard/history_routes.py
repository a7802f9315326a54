"""A dataset's history: main's score over commits (workflows.score_history) as a chart and a
table, with release tags and the main evaluations whose own comparison found a regression."""

from __future__ import annotations

import anyio
from fastapi.responses import HTMLResponse

from bot.dashboard.charts import ChartPoint, history_svg
from bot.dashboard.deps import PREFIX, StoreDep, UserDep, catalog_name, signed_in_router
from bot.dashboard.pages import page
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.report import build_report
from workflows.score_history import HistoryPoint, is_main_evaluation, score_history
from workflows.stats import Verdict
from workflows.store import Store

router = signed_in_router()


@router.get("/datasets/{dataset}/history", response_class=HTMLResponse)
async def history(dataset: str, store: StoreDep, user: UserDep) -> HTMLResponse:
    catalog_name("dataset", dataset)
    charted = await anyio.to_thread.run_sync(chart_points, store, dataset)
    return page(
        "history.html.j2",
        user=user,
        dataset=dataset,
        points=charted,
        criteria=sorted({name for c in charted for name in c.point.criteria}),
        chart=history_svg(charted),
    )


def chart_points(store: Store, dataset: str) -> list[ChartPoint]:
    """Each history point, linked to its experiment and marked if it regressed or is a release."""
    return [_chart_point(store, point) for point in score_history(store, dataset)]


def _chart_point(store: Store, point: HistoryPoint) -> ChartPoint:
    record = store.get_experiment(point.experiment_id)
    runs = store.list_runs(point.experiment_id)
    regressed = record is not None and is_main_evaluation(record) and _regressed(record.spec, runs)
    return ChartPoint(
        point=point,
        url=f"{PREFIX}/experiments/{point.experiment_id}",
        regression=regressed,
        release=point.labels.get("release", ""),
    )


def _regressed(spec: ExperimentSpec, runs: list[RunResult]) -> bool:
    if len(spec.arms) < 2:
        return False
    report = build_report(spec, runs)
    return bool(report.comparisons) and report.comparisons[0].verdict is Verdict.REGRESSED
