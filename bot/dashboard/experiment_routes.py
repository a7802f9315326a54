"""The experiments list (with its filters) and an experiment's page: the diff table, and per case
each arm's trials side by side with answer, grades, wall time, cost and a transcript link."""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio
from fastapi import Depends, HTTPException
from fastapi.responses import HTMLResponse, Response

from bot.dashboard.case_index import CaseFilters, case_list_or_400
from bot.dashboard.chart_routes import pictures
from bot.dashboard.deps import (
    SettingsDep,
    StoreDep,
    UserDep,
    catalog_name,
    experiment_or_404,
    signed_in_router,
)
from bot.dashboard.frontier_chart import frontier_svg
from bot.dashboard.live import live_status
from bot.dashboard.pages import page
from bot.dashboard.run_outputs import answer_of, transcript_name
from bot.dashboard.view_cache import CACHE, cached_report_and_table, cached_runs, version_key
from bot.render import render_html
from workflows.blobs import BlobStore
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.report import ExperimentReport
from workflows.report.cells_export import FORMATS, MEDIA_TYPES, ExportError, cell_rows, export_cells
from workflows.report.table import Table
from workflows.store import ExperimentRecord, Store, StoreError

BODY = re.compile(r"<body[^>]*>(.*)</body>", re.S)
LIST_LIMIT = 500

router = signed_in_router()


@dataclass(frozen=True)
class ListFilters:
    """The list's query parameters; an empty one matches anything."""

    repo: str = ""
    pr: str = ""
    dataset: str = ""
    state: str = ""
    trigger: str = ""

    def keep(self, record: ExperimentRecord) -> bool:
        """The filters the store does not apply itself (dataset and state it does)."""
        spec = record.spec
        repo_name = spec.labels.get("github_repo", spec.repo)
        return (
            (not self.repo or self.repo in (repo_name, spec.repo))
            and (not self.pr or spec.labels.get("pull_request") == self.pr)
            and (not self.trigger or spec.trigger == self.trigger)
        )


@router.get("/", response_class=HTMLResponse)
async def experiments(
    store: StoreDep, user: UserDep, filters: Annotated[ListFilters, Depends()]
) -> HTMLResponse:
    records = await _list_experiments(store, filters)
    rows = [record for record in records if filters.keep(record)]
    return page("list.html.j2", user=user, rows=rows, filters=asdict(filters))


@router.get("/experiments/{experiment_id:path}", response_class=HTMLResponse)
async def experiment(
    experiment_id: str,
    store: StoreDep,
    settings: SettingsDep,
    user: UserDep,
    filters: Annotated[CaseFilters, Depends()],
) -> HTMLResponse:
    """The report, progress (live.py) and a page of cases (case_index.py); ids may hold `/`."""
    record = await experiment_or_404(store, experiment_id)
    runs, view = await anyio.to_thread.run_sync(runs_and_view, store, record)
    cases = case_list_or_400(record, runs, settings.catalog_root, filters)
    live = live_status(record, runs, None, datetime.now(UTC))
    return page("experiment.html.j2", user=user, record=record, live=live, **{**view, **cases})


@router.get("/report", response_class=HTMLResponse)
async def report_fragment(experiment: str, store: StoreDep) -> HTMLResponse:
    """The report's table alone: the experiment page reloads it as cells finish."""
    record = await experiment_or_404(store, experiment)
    report, table = await anyio.to_thread.run_sync(cached_report_html, store, record)
    return page("_report.html.j2", report=report, table=table)


@router.get("/export/cells.{fmt}")
async def export(fmt: str, experiment: str, store: StoreDep) -> Response:
    """The experiment's rows, one per run × criterion (docs/dashboard.md), as a download."""
    if fmt not in FORMATS:
        raise HTTPException(404, f"no export format '{fmt}'; use one of {', '.join(FORMATS)}")
    record = await experiment_or_404(store, experiment)
    runs = await anyio.to_thread.run_sync(cached_runs, store, record)
    try:
        data = export_cells(cell_rows(record.spec, runs), fmt)
    except ExportError as error:
        raise HTTPException(501, str(error)) from None
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", experiment)
    disposition = f'attachment; filename="{name}-cells.{fmt}"'
    return Response(data, media_type=MEDIA_TYPES[fmt], headers={"Content-Disposition": disposition})


async def _list_experiments(store: Store, filters: ListFilters) -> list[ExperimentRecord]:
    if filters.dataset:
        catalog_name("dataset", filters.dataset)
    query = functools.partial(
        store.list_experiments,
        dataset=filters.dataset or None,
        status=filters.state or None,
        limit=LIST_LIMIT,
    )
    try:
        return await anyio.to_thread.run_sync(query)
    except StoreError as error:  # e.g. an unknown state
        raise HTTPException(400, str(error)) from None


def runs_and_view(store: Store, record: ExperimentRecord) -> tuple[list[RunResult], dict[str, Any]]:
    """The runs and `experiment_view`, computed again only when the runs changed (view_cache)."""
    key = version_key(store, record)
    runs = cached_runs(store, record)
    built = cached_report_and_table(store, record)  # shared with the chart URLs
    html = cached_report_html(store, record)[1]  # shared with the live report (/report)
    return runs, CACHE.get_or_build(("view", *key), lambda: experiment_view(record, *built, html))


def cached_report_html(store: Store, record: ExperimentRecord) -> tuple[ExperimentReport, str]:
    """The report and its diff table as HTML (bot.render's body), again only when the runs
    changed: what the page shows and a running experiment's page reloads."""
    report, _ = cached_report_and_table(store, record)
    key = ("report-html", *version_key(store, record))
    return report, CACHE.get_or_build(key, lambda: _body(render_html(report)))


def _body(document: str) -> str:
    match = BODY.search(document)
    return match.group(1) if match else ""


def experiment_view(
    record: ExperimentRecord, report: ExperimentReport, table: Table, report_html: str
) -> dict[str, Any]:
    """The experiment page's report, its diff table and pictures; the cases are listed by
    case_index.py and load their answers on demand (case_routes.py)."""
    base = report.baseline
    head = report.comparisons[0].head if report.comparisons else base
    return {
        "report": report,
        "table": report_html,
        "frontier": frontier_svg(report.frontier) if len(report.arms) > 1 else None,
        "pictures": pictures(report, record.spec, table),
        "base": base,
        "head": head,
    }


def side_by_side(
    spec: ExperimentSpec, runs: list[RunResult], base: str, head: str, blobs: BlobStore
) -> list[Any]:
    """Per case: each arm's runs with answer, criteria (grade, rationale), wall time and cost."""
    by_key: dict[tuple[str, str], list[RunResult]] = {}
    for run in sorted(runs, key=lambda r: r.trial):
        by_key.setdefault((run.case_id, run.arm), []).append(run)
    return [
        {
            "case_id": case_id,
            "arms": [
                {"name": arm, "runs": [_run_view(r, blobs) for r in by_key.get((case_id, arm), [])]}
                for arm in (base, head)
            ],
        }
        for case_id in spec.case_ids
    ]


def _run_view(run: RunResult, blobs: BlobStore) -> dict[str, Any]:
    return {
        "run": run,
        "answer": answer_of(blobs, run),
        "cost": run.usage.cost_usd + run.sandbox.cost_usd,
        "transcript": transcript_name(blobs, run) is not None,
    }
