"""Prewarmed images of the `local` provider: build one, discard one (docs/prewarm.md).

`prewarm` builds the commit with `setup` from a clean checkout into a new snapshot folder
(snapshots.py); `ResetBuilder` (reset_builder.py) starts later builds from it. `discard`
deletes a snapshot together with the built images derived from it — unless one of those is in use:
bound into a live sandbox, or built for a commit the caller protects (arms of running experiments),
or a reset is reading the snapshot right now. Then it raises PrewarmInUse and deletes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from pathlib import Path

from workflows.prewarm.image_builder import ImageBuilder, SetupRunner, read_ready, resolve_commit
from workflows.prewarm.reset_builder import discard_image
from workflows.prewarm.snapshots import Snapshot, SnapshotIndex, exclusive
from workflows.providers.base import PrewarmedImage, PrewarmInUse, SandboxCreateError
from workflows.providers.common.sandbox_layout import tree_size


class Prewarmer:
    def __init__(self, images: ImageBuilder, snapshots: SnapshotIndex) -> None:
        self.images = images
        self.snapshots = snapshots

    async def prewarm(
        self, source_repo: Path, commit: str, setup: str, run: SetupRunner, *, rebuild: bool
    ) -> PrewarmedImage:
        source = source_repo.resolve()
        if not (source / ".git").exists() and not (source / "HEAD").is_file():
            raise SandboxCreateError(f"{source_repo} is not a git repository")
        sha = await resolve_commit(source, commit)
        newest = await asyncio.to_thread(self.snapshots.list, source)
        if newest and newest[0].commit == sha and not rebuild:
            current = await asyncio.to_thread(self.snapshots.touch, newest[0])
            return PrewarmedImage(
                current.reference, sha, current.build_seconds, current.size_bytes, reused=True
            )
        folder = self.snapshots.new_folder(source, sha)
        started = time.monotonic()
        await self.images.build_clean(source, sha, setup, folder, run)
        seconds = time.monotonic() - started
        size = await asyncio.to_thread(tree_size, folder / "repo")
        snapshot = self.snapshots.record(folder, sha, seconds, size)
        return PrewarmedImage(snapshot.reference, sha, snapshot.build_seconds, size)

    def derived(self, snapshot: Snapshot) -> list[Path]:
        """Built image folders that started from `snapshot`."""
        images = self.images.image_dir / snapshot.folder.parent.name
        if not images.is_dir():
            return []
        found = []
        for folder in images.iterdir():
            record = read_ready(folder) if folder.is_dir() else None
            if record and record.get("base") == snapshot.reference:
                found.append(folder)
        return found

    async def discard(
        self, reference: str, *, protect: Collection[str] = (), live: Collection[str] = ()
    ) -> None:
        """`protect`: commits whose images must stay; `live`: images bound into live sandboxes."""
        snapshot = self.snapshots.get(reference)
        if snapshot is None:
            return
        with exclusive(snapshot):
            derived = await asyncio.to_thread(self.derived, snapshot)
            busy = [f.name[:12] for f in derived if f.name in protect or str(f / "repo") in live]
            if busy:
                message = f"prewarmed image {reference} is in use (images of {', '.join(busy)})"
                raise PrewarmInUse(message)
            for folder in derived:
                await discard_image(folder)
            await self.snapshots.delete(snapshot)
