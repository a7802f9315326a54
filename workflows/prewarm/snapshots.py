"""Prewarmed images of the `local` provider: read-only snapshot folders, newest first per repo.

    <image_dir>/prewarmed/<repo key>/<sha12>-<hex>/repo         checkout + build outputs
    <image_dir>/prewarmed/<repo key>/<sha12>-<hex>/build/       the build's logs and state
    <image_dir>/prewarmed/<repo key>/<sha12>-<hex>/image.json   written last: commit, times, size
    <image_dir>/prewarmed/<repo key>/<sha12>-<hex>.lock         shared while a reset uses it

A snapshot is never written to after image.json exists: resets mount it as the lower layer of an
overlay (or copy it). Its folder path is the prewarmed image's reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from workflows.prewarm.image_builder import repo_key
from workflows.providers.base import PrewarmInUse

RECORD = "image.json"


@dataclass(frozen=True)
class Snapshot:
    folder: Path
    commit: str
    created_at: float
    build_seconds: float
    size_bytes: int
    checked_at: float  # when a prewarm run last found it current (its commit still the head)

    @property
    def repo(self) -> Path:
        return self.folder / "repo"

    @property
    def reference(self) -> str:
        return str(self.folder)

    @property
    def lock(self) -> Path:
        return self.folder.with_name(f"{self.folder.name}.lock")


class SnapshotIndex:
    def __init__(self, root: Path) -> None:
        self.root = root

    def repo_dir(self, source: Path) -> Path:
        return self.root / repo_key(source)

    def new_folder(self, source: Path, sha: str) -> Path:
        return self.repo_dir(source) / f"{sha[:12]}-{secrets.token_hex(4)}"

    def record(self, folder: Path, commit: str, build_seconds: float, size: int) -> Snapshot:
        now = time.time()
        snapshot = Snapshot(folder, commit, now, round(build_seconds, 3), size, now)
        self._write(snapshot)
        return snapshot

    def touch(self, snapshot: Snapshot) -> Snapshot:
        """Mark the snapshot current (a prewarm run found its commit still the head)."""
        fresh = Snapshot(**(asdict(snapshot) | {"checked_at": time.time()}))
        self._write(fresh)
        return fresh

    def _write(self, snapshot: Snapshot) -> None:
        data = {k: v for k, v in asdict(snapshot).items() if k != "folder"}
        temp = snapshot.folder / f".{RECORD}.{secrets.token_hex(4)}.tmp"
        temp.write_text(json.dumps(data))
        os.replace(temp, snapshot.folder / RECORD)

    def list(self, source: Path) -> list[Snapshot]:
        """Complete snapshots of `source`, newest first."""
        folder = self.repo_dir(source)
        found = [self.load(entry) for entry in folder.iterdir()] if folder.is_dir() else []
        return sorted((s for s in found if s), key=lambda s: s.created_at, reverse=True)

    def load(self, folder: Path) -> Snapshot | None:
        try:
            data = json.loads((folder / RECORD).read_text())
            created = float(data["created_at"])
            checked = float(data.get("checked_at", created))
            return Snapshot(folder, str(data["commit"]), created, float(data["build_seconds"]),
                            int(data["size_bytes"]), checked)  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def get(self, reference: str) -> Snapshot | None:
        """The snapshot a reference names, if it is one of ours and still there."""
        folder = Path(reference)
        if folder.parent.parent != self.root or not folder.is_dir():
            return None
        return self.load(folder)

    async def delete(self, snapshot: Snapshot) -> None:
        await asyncio.to_thread(shutil.rmtree, snapshot.folder, True)
        snapshot.lock.unlink(missing_ok=True)


def _lock_fd(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


@contextlib.asynccontextmanager
async def using(snapshot: Snapshot) -> AsyncIterator[None]:
    """A shared lock while a reset reads the snapshot: `discard` cannot take it meanwhile."""
    fd = _lock_fd(snapshot.lock)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(0.05)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive(snapshot: Snapshot) -> Iterator[None]:
    """The exclusive lock, or PrewarmInUse at once if a reset holds it."""
    fd = _lock_fd(snapshot.lock)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PrewarmInUse(
                f"prewarmed image {snapshot.reference} is being reset from"
            ) from None
        yield
    finally:
        os.close(fd)
