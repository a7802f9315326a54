"""A run's transcript (`out/transcript.jsonl`, or .md/.txt), streamed in chunks from the blob
store (docs/store.md, "Blobs")."""

from __future__ import annotations

import anyio
from fastapi import HTTPException
from fastapi.responses import StreamingResponse

from bot.dashboard.deps import BlobsDep, StoreDep, signed_in_router
from bot.dashboard.run_outputs import stream_file, transcript_name

router = signed_in_router()


@router.get("/runs/{run_id:path}/transcript")
async def transcript(run_id: str, store: StoreDep, blobs: BlobsDep) -> StreamingResponse:
    run = store.get_run(run_id)
    name = await anyio.to_thread.run_sync(transcript_name, blobs, run) if run is not None else None
    if run is None or name is None:
        raise HTTPException(404, "no transcript for this run")
    chunks = stream_file(blobs, run.outputs_ref, name)
    return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")
