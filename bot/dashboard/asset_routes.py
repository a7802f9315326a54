"""The viewer's script and stylesheet files (bot/dashboard/static/), for signed-in pages only.

The Content-Security-Policy allows no inline script or style (security.py), so the pages' small
scripts are files served here: no build step, no third-party code.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import Response

from bot.dashboard.deps import signed_in_router

STATIC = Path(__file__).parent / "static"
MEDIA_TYPES = {
    "viewer.css": "text/css; charset=utf-8",
    "transcript.js": "text/javascript; charset=utf-8",
    "experiment.js": "text/javascript; charset=utf-8",
}

router = signed_in_router()


@router.get("/assets/{name}")
async def asset(name: str) -> Response:
    if name not in MEDIA_TYPES:
        raise HTTPException(404, f"no asset '{name}'")
    return Response((STATIC / name).read_bytes(), media_type=MEDIA_TYPES[name])
