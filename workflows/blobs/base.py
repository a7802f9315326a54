"""What every blob store offers (docs/store.md, "Blobs"): keys, never host paths.

A run's outputs live under one key, `safe_key(run_id)`; the store records that key in
`RunResult.outputs_ref`. Layout under a key (what the collect stage writes, the graders read):

    <key>/out/...                 the agent's /out, regular files only, streamed
    <key>/world_changes/...       world files the run created or changed
    <key>/world_deleted.json      JSON list of world files the run deleted

Names below a key are '/'-separated relative paths ("out/answer.md"), on every backend.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

SAFE_PART = re.compile(r"[^A-Za-z0-9._=-]")


class BlobStoreError(RuntimeError):
    """The blob store cannot be used: one sentence naming the store and the fix."""


def safe_key(run_id: str) -> str:
    """A relative key for a run id: each '/'-separated part sanitized, no '.' or '..' parts."""
    parts = [SAFE_PART.sub("_", part) for part in run_id.split("/") if part]
    return "/".join(p if p not in {".", ".."} else p.replace(".", "_") for p in parts)


def safe_name(name: str) -> str:
    """A name below a key, checked: relative, no '.' or '..' parts (ValueError otherwise)."""
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in {"", ".", ".."} for p in parts):
        raise ValueError(f"not a blob name: {name!r}")
    return name


class BlobStore(Protocol):
    """A run's outputs under one key. Writes go through a local staging folder (the collect
    stage streams into it and redacts it), `commit` publishes it; reads never need the writer's
    host."""

    @property
    def url(self) -> str:
        """Where the blobs live, for messages (`file:///…` or `s3://bucket/prefix`)."""
        ...

    def check(self) -> None:
        """Raise BlobStoreError (one sentence) unless the store can be written and read."""
        ...

    def staging(self, key: str) -> Path:
        """A fresh local folder to write a run's outputs into."""
        ...

    def reap_staging(self) -> list[str]:
        """At a worker's start: remove the staging left by worker processes that are gone."""
        ...

    def commit(self, key: str, staging: Path) -> str:
        """Publish `staging` under `key` (replacing what was there); returns the key to store."""
        ...

    def local_copy(self, key: str) -> AbstractContextManager[Path]:
        """A local folder holding the key's files while the context lasts (for graders)."""
        ...

    def size(self, key: str, name: str) -> int | None:
        """The size of one file under `key`, or None if there is no such file."""
        ...

    def read_range(self, key: str, name: str, start: int, length: int) -> bytes | None:
        """At most `length` bytes of a file from `start` (a ranged read), None if missing."""
        ...

    def iter_bytes(self, key: str, name: str, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
        """The whole file, streamed in chunks."""
        ...
