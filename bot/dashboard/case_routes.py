"""The experiment page's case list as fragments: `GET /dashboard/cases?experiment=ID&show=&tag=
&q=&page=`, a page of case summaries (case_index.py), and `GET /dashboard/case?experiment=ID&case=
CASE`, one case's arms side by side with answers and grades, loaded when its row is opened."""

from __future__ import annotations

from typing import Annotated

import anyio
from fastapi import Depends, HTTPException
from fastapi.responses import HTMLResponse

from bot.dashboard.case_index import CaseFilters, arms_compared, case_list_or_400
from bot.dashboard.deps import BlobsDep, SettingsDep, StoreDep, experiment_or_404, signed_in_router
from bot.dashboard.experiment_routes import side_by_side
from bot.dashboard.pages import page
from bot.dashboard.view_cache import cached_runs
from workflows.records import RunResult
from workflows.store import ExperimentRecord, Store

router = signed_in_router()


@router.get("/cases", response_class=HTMLResponse)
async def cases(
    experiment: str,
    store: StoreDep,
    settings: SettingsDep,
    filters: Annotated[CaseFilters, Depends()],
) -> HTMLResponse:
    record = await experiment_or_404(store, experiment)
    runs = await anyio.to_thread.run_sync(cached_runs, store, record)
    view = case_list_or_400(record, runs, settings.catalog_root, filters)
    return page("_cases.html.j2", **view)


@router.get("/case", response_class=HTMLResponse)
async def case(experiment: str, case: str, store: StoreDep, blobs: BlobsDep) -> HTMLResponse:
    record = await experiment_or_404(store, experiment)
    if case not in record.spec.case_ids:
        raise HTTPException(404, f"experiment '{experiment}' has no case '{case}'")
    runs = await anyio.to_thread.run_sync(_case_runs, store, record, case)
    base, head = arms_compared(record)
    one = record.spec.model_copy(update={"case_ids": (case,)})
    detail = await anyio.to_thread.run_sync(side_by_side, one, runs, base, head, blobs)
    return page("_case.html.j2", case=detail[0], base=base, head=head)


def _case_runs(store: Store, record: ExperimentRecord, case: str) -> list[RunResult]:
    """The case's runs, one lookup per cell (never the whole experiment's runs)."""
    cells = [c for c in record.spec.cells() if c.case_id == case]
    found = (store.get_run(c.run_id) for c in cells)
    return [run for run in found if run is not None]
