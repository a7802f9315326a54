"""`GET /dashboard/live?experiment=ID`: where the experiment stands, as JSON (live.py); the
experiment page polls it every few seconds while the experiment runs (static/experiment.js)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse

from bot.dashboard.deps import StoreDep, signed_in_router
from bot.dashboard.live import live_status
from bot.dashboard.view_cache import cached_runs
from workflows.engine.types import Progress

PROGRESS_TIMEOUT_S = 2.0

router = signed_in_router()


@router.get("/live")
async def live(experiment: str, request: Request, store: StoreDep) -> JSONResponse:
    record = await anyio.to_thread.run_sync(store.get_experiment, experiment)
    if record is None:
        raise HTTPException(404, f"no experiment '{experiment}'")
    runs = await anyio.to_thread.run_sync(cached_runs, store, record)
    progress = None if record.status.is_terminal else await _progress(request, experiment)
    body = live_status(record, runs, progress, datetime.now(UTC))
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


async def _progress(request: Request, experiment_id: str) -> Progress | None:
    """The workflow's own counts (queued, running), if a launcher is there and answers quickly."""
    launcher: Any = getattr(request.app.state, "launcher", None)
    if launcher is None:
        return None
    with anyio.move_on_after(PROGRESS_TIMEOUT_S):
        try:
            progress: Progress | None = await launcher.status(experiment_id)
            return progress
        except Exception:
            return None
    return None
