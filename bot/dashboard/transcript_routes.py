"""A run's transcript: a timeline page read by byte ranges, and the raw file streamed (`?raw=1`).

`out/transcript.jsonl` is shown as a timeline (transcript_events.py), a page of lines at a time
(transcript_pages.py): `offset` and `line` say where a page starts, `kind` and `q` filter on the
server (scanning at most a budget of bytes, then offering to continue), and
`/transcript/events` returns the next page's rows for the page's "Load more". A transcript.md/.txt,
and `?raw=1` for any, is streamed as text in 64 KiB chunks (docs/dashboard.md, "Transcripts").
"""

from __future__ import annotations

import functools
import urllib.parse
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import Depends, HTTPException, Query
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from bot.dashboard.deps import BlobsDep, StoreDep, UserDep, signed_in_router
from bot.dashboard.pages import page
from bot.dashboard.run_outputs import stream_file, transcript_name
from bot.dashboard.transcript_events import EventView, event_view, parse, timestamp_of
from bot.dashboard.transcript_pages import Page, read_page
from workflows.blobs import BlobStore
from workflows.records import RunResult

PAGE_LINES = 100
KINDS = ("message", "tool_call", "tool_result", "search", "error", "event", "invalid")

router = signed_in_router()


@dataclass(frozen=True)
class Where:
    """Where a page starts and what it keeps (the page's query parameters)."""

    offset: Annotated[int, Query(ge=0)] = 0
    line: Annotated[int, Query(ge=1)] = 1
    kind: str = ""
    q: Annotated[str, Query(max_length=200)] = ""

    def query(self, **changes: Any) -> str:
        values = {"offset": self.offset, "line": self.line, "kind": self.kind, "q": self.q}
        values.update(changes)
        return urllib.parse.urlencode({k: v for k, v in values.items() if v not in ("", None)})


@router.get("/runs/{run_id:path}/transcript/events", response_class=HTMLResponse)
async def transcript_events(
    run_id: str, store: StoreDep, blobs: BlobsDep, where: Annotated[Where, Depends()]
) -> HTMLResponse:
    """The rows of one page (an HTML fragment), for "Load more"."""
    run, name = await _transcript(store, blobs, run_id)
    view = await anyio.to_thread.run_sync(_page_view, blobs, run, name, where)
    return page("_transcript_rows.html.j2", **view)


@router.get("/runs/{run_id:path}/transcript", response_model=None)
async def transcript(
    run_id: str,
    store: StoreDep,
    blobs: BlobsDep,
    user: UserDep,
    where: Annotated[Where, Depends()],
    raw: bool = False,
) -> Response:
    run, name = await _transcript(store, blobs, run_id)
    if raw or not name.endswith(".jsonl"):
        chunks = stream_file(blobs, run.outputs_ref, name)
        return StreamingResponse(chunks, media_type="text/plain; charset=utf-8")
    view = await anyio.to_thread.run_sync(_page_view, blobs, run, name, where)
    return page("transcript.html.j2", user=user, run=run, kinds=KINDS, **view)


async def _transcript(store: Any, blobs: BlobStore, run_id: str) -> tuple[RunResult, str]:
    run = await anyio.to_thread.run_sync(store.get_run, run_id)
    name = await anyio.to_thread.run_sync(transcript_name, blobs, run) if run is not None else None
    if run is None or name is None:
        raise HTTPException(404, "no transcript for this run")
    return run, name


def _page_view(blobs: BlobStore, run: RunResult, name: str, where: Where) -> dict[str, Any]:
    """The page's rows and links (blocking: blob reads)."""
    if where.kind and where.kind not in KINDS:
        raise HTTPException(400, f"no event kind '{where.kind}'; use one of {', '.join(KINDS)}")
    t0 = _start_time(blobs, run.outputs_ref, name)
    size = blobs.size(run.outputs_ref, name) or 0
    needle = where.q.lower().encode()
    keep = functools.partial(_quick_keep, needle=needle, kind=where.kind)
    found = read_page(
        blobs, run.outputs_ref, name, offset=where.offset, number=where.line,
        want=PAGE_LINES, keep=keep,
    )  # fmt: skip
    events = [event_view(x.number, x.offset, x.data, size=x.size, t0=t0) for x in found.lines]
    if where.kind:
        events = [e for e in events if where.kind in e.kinds.split()]
    base = f"/dashboard/runs/{urllib.parse.quote(run.run_id)}/transcript"
    return {
        "events": events,
        "where": where,
        "size": size,
        "base": base,
        "next": _next(base, where, found),
        "scanned": found.scanned,
    }


def _next(base: str, where: Where, found: Page) -> dict[str, str] | None:
    if found.next_offset is None:
        return None
    query = where.query(offset=found.next_offset, line=found.next_number)
    return {"page": f"{base}?{query}", "rows": f"{base}/events?{query}"}


def _quick_keep(data: bytes, *, needle: bytes, kind: str) -> bool:
    """A cheap test on the raw line before it is parsed (the kind is checked again after)."""
    if needle and needle not in data.lower():
        return False
    if kind == "error":
        return b"error" in data.lower() or b"exception" in data.lower() or b"fail" in data.lower()
    return True


def _start_time(blobs: BlobStore, key: str, name: str) -> float | None:
    """The first event's timestamp (one short ranged read), for time offsets on any page."""
    first = read_page(blobs, key, name, want=1, max_line=64 * 1024, scan_budget=64 * 1024)
    if not first.lines:
        return None
    value, _problem = parse(first.lines[0].data)
    return timestamp_of(value)


__all__ = ["EventView", "router"]
