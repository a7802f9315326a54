"""Judgements on disk, keyed by a hash of (judge model, prompt version, settings, inputs).

One small JSON file per judgement under `<root>/<key[:2]>/<key>.json`, written to a temporary
file and renamed into place, so concurrent threads or workers never read half a file. A file
that cannot be read is a miss. Entries hold the score, rationale and token counts, no secrets.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CachedSample:
    score: float
    rationale: str
    input_tokens: int = 0
    output_tokens: int = 0


def cache_key(parts: dict[str, Any]) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class VerdictCache:
    def __init__(self, root: Path | None) -> None:
        self.root = root

    def _path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedSample | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return CachedSample(
                score=float(data["score"]),
                rationale=str(data["rationale"]),
                input_tokens=int(data.get("input_tokens", 0)),
                output_tokens=int(data.get("output_tokens", 0)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, sample: CachedSample, **context: str) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({**asdict(sample), **context}, ensure_ascii=False)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(payload)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
