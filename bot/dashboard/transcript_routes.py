"""A run's transcript (`out/transcript.jsonl`, or .md/.txt), streamed in chunks."""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from bot.dashboard.deps import StoreDep, signed_in_router
from bot.dashboard.run_outputs import stream_file, transcript_path

router = signed_in_router()


@router.get("/runs/{run_id:path}/transcript")
async def transcript(run_id: str, store: StoreDep) -> StreamingResponse:
    run = store.get_run(run_id)
    path = transcript_path(run) if run is not None else None
    if path is None:
        raise HTTPException(404, "no transcript for this run")
    return StreamingResponse(stream_file(path), media_type="text/plain; charset=utf-8")
