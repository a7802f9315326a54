"""The blob store for large outputs: a local folder by default, one prefix per run.

Layout of a run's prefix (what the collect stage writes and the graders read):

    <prefix>/out/...                 the agent's /out, regular files only, streamed
    <prefix>/world_changes/...       world files the run created or changed
    <prefix>/world_deleted.json      JSON list of world files the run deleted
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

SAFE_PART = re.compile(r"[^A-Za-z0-9._=-]")


def safe_key(run_id: str) -> str:
    """A relative path for a run id: each '/'-separated part sanitized, no '.' or '..' parts."""
    parts = [SAFE_PART.sub("_", part) for part in run_id.split("/") if part]
    return "/".join(p if p not in {".", ".."} else p.replace(".", "_") for p in parts)


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def prefix(self, key: str) -> Path:
        return self.root / safe_key(key)

    def staging(self, key: str) -> Path:
        """A fresh folder to write into; `commit` moves it into place atomically."""
        staging = self.root / ".staging" / safe_key(key)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        return staging

    def commit(self, key: str, staging: Path) -> Path:
        final = self.prefix(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        return final
