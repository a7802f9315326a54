"""The experiments list (with its filters) and an experiment's page: the diff table, and per case
each arm's trials side by side with answer, grades, wall time, cost and a transcript link."""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import anyio
from fastapi import Depends, HTTPException
from fastapi.responses import HTMLResponse, Response

from bot.dashboard.deps import BlobsDep, StoreDep, UserDep, catalog_name, signed_in_router
from bot.dashboard.frontier_chart import frontier_svg
from bot.dashboard.pages import page
from bot.dashboard.run_outputs import answer_of, transcript_name
from bot.render import render_html
from workflows.blobs import BlobStore
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.report import build_report
from workflows.report.cells_export import FORMATS, MEDIA_TYPES, ExportError, cell_rows, export_cells
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


@router.get("/experiments/{experiment_id}", response_class=HTMLResponse)
async def experiment(
    experiment_id: str, store: StoreDep, blobs: BlobsDep, user: UserDep
) -> HTMLResponse:
    record = store.get_experiment(experiment_id)
    if record is None:
        raise HTTPException(404, f"no experiment '{experiment_id}'")
    runs = await anyio.to_thread.run_sync(store.list_runs, experiment_id)
    view = await anyio.to_thread.run_sync(experiment_view, record, runs, blobs)  # blob reads
    return page("experiment.html.j2", user=user, record=record, **view)


@router.get("/export/cells.{fmt}")
async def export(fmt: str, experiment: str, store: StoreDep) -> Response:
    """The experiment's rows, one per run × criterion (docs/dashboard.md), as a download."""
    if fmt not in FORMATS:
        raise HTTPException(404, f"no export format '{fmt}'; use one of {', '.join(FORMATS)}")
    record = store.get_experiment(experiment)
    if record is None:
        raise HTTPException(404, f"no experiment '{experiment}'")
    runs = await anyio.to_thread.run_sync(store.list_runs, experiment)
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


def experiment_view(
    record: ExperimentRecord, runs: list[RunResult], blobs: BlobStore
) -> dict[str, Any]:
    """The experiment page's report, its diff table (bot.render's HTML body) and cases."""
    report = build_report(record.spec, runs)
    match = BODY.search(render_html(report))
    base = report.baseline
    head = report.comparisons[0].head if report.comparisons else base
    return {
        "report": report,
        "table": match.group(1) if match else "",
        "frontier": frontier_svg(report.frontier) if len(report.arms) > 1 else None,
        "cases": side_by_side(record.spec, runs, base, head, blobs),
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
