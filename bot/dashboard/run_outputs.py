"""What the dashboard reads from a run's outputs (`RunResult.outputs_ref`, a key in the blob
store): a preview of its answer (one ranged read) and its transcript (streamed); never a whole
large file in memory, and never a path on the host that ran the run."""

from __future__ import annotations

from collections.abc import AsyncIterator

from workflows.blobs import BlobStore
from workflows.records import RunResult

ANSWER_PREVIEW_BYTES = 16 * 1024
CHUNK = 64 * 1024
ANSWER_FILES = ("out/answer.md", "out/answer.json")
TRANSCRIPT_FILES = ("out/transcript.jsonl", "out/transcript.md", "out/transcript.txt")


def read_preview(blobs: BlobStore, key: str, name: str, limit: int = ANSWER_PREVIEW_BYTES) -> str:
    """At most `limit` bytes of a file (a ranged read), never the whole of a large one."""
    data = blobs.read_range(key, name, 0, limit + 1)
    if not data:
        return ""
    text = data[:limit].decode("utf-8", errors="replace")
    return text + ("\n…(truncated)" if len(data) > limit else "")


def answer_of(blobs: BlobStore, run: RunResult) -> str:
    if not run.outputs_ref:
        return ""
    for name in ANSWER_FILES:
        text = read_preview(blobs, run.outputs_ref, name)
        if text:
            return text
    return ""


def transcript_name(blobs: BlobStore, run: RunResult) -> str | None:
    """The name of the run's transcript under its key, or None."""
    if not run.outputs_ref:
        return None
    for name in TRANSCRIPT_FILES:
        if blobs.size(run.outputs_ref, name) is not None:
            return name
    return None


def stream_file(blobs: BlobStore, key: str, name: str) -> AsyncIterator[bytes]:
    return blobs.iter_bytes(key, name, CHUNK)
