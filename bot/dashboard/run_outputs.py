"""What the dashboard reads from a run's outputs folder (`RunResult.outputs_ref`): a preview of its
answer and its transcript, streamed; never a whole large file in memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from workflows.records import RunResult

ANSWER_PREVIEW_BYTES = 16 * 1024
CHUNK = 64 * 1024
TRANSCRIPT_FILES = ("transcript.jsonl", "transcript.md", "transcript.txt")


def read_preview(path: Path, limit: int = ANSWER_PREVIEW_BYTES) -> str:
    """At most `limit` bytes of a file, never the whole of a large one."""
    if not path.is_file():
        return ""
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + ("\n…(truncated)" if len(data) > limit else "")


def answer_of(run: RunResult) -> str:
    if not run.outputs_ref:
        return ""
    out = Path(run.outputs_ref) / "out"
    for name in ("answer.md", "answer.json"):
        text = read_preview(out / name)
        if text:
            return text
    return ""


def transcript_path(run: RunResult) -> Path | None:
    if not run.outputs_ref:
        return None
    for name in TRANSCRIPT_FILES:
        path = Path(run.outputs_ref) / "out" / name
        if path.is_file():
            return path
    return None


async def stream_file(path: Path) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as handle:
        while chunk := await handle.read(CHUNK):
            yield chunk
