"""The local-folder blob store (the embedded default): `<root>/<key>/...` on this host."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio

from workflows.blobs.base import BlobStoreError, safe_key, safe_name
from workflows.blobs.staging import fresh_staging, reap_staging


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def url(self) -> str:
        return self.root.resolve().as_uri()

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            # a name of its own: workers starting together must not delete each other's probe
            probe = self.root / f".evalbot-check-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise BlobStoreError(
                f"the blob folder {self.root} is not writable ({error.strerror}); "
                "fix its permissions or set EVALBOT_BLOB_URL"
            ) from None

    def prefix(self, key: str) -> Path:
        return self.root / safe_key(key)

    def staging(self, key: str) -> Path:
        """A fresh folder to write into; `commit` moves it into place atomically."""
        return fresh_staging(self.root, key)

    def reap_staging(self) -> list[str]:
        return reap_staging(self.root)

    def commit(self, key: str, staging: Path) -> str:
        final = self.prefix(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        return safe_key(key)

    @contextlib.contextmanager
    def local_copy(self, key: str) -> Iterator[Path]:
        yield self.prefix(key)  # already local: no copy

    def _file(self, key: str, name: str) -> Path:
        return self.prefix(key) / safe_name(name)

    def size(self, key: str, name: str) -> int | None:
        path = self._file(key, name)
        return path.stat().st_size if path.is_file() else None

    def read_range(self, key: str, name: str, start: int, length: int) -> bytes | None:
        path = self._file(key, name)
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            handle.seek(start)
            return handle.read(length)

    async def iter_bytes(self, key: str, name: str, chunk: int = 64 * 1024) -> AsyncIterator[bytes]:
        async with await anyio.open_file(self._file(key, name), "rb") as handle:
            while data := await handle.read(chunk):
                yield data
