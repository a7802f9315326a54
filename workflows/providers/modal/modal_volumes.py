"""Worlds on Modal Volumes: each world version uploaded once, under a name made of its content hash.

    Volume "evalbot-world-<version>"   version = workflows.catalog.hashing.tree_version(world)
        /world/...                     the world's regular files (what the version hashes)
        /.evalbot-complete             written in the same batch: its presence means "all there"

A run mounts its world's Volume read-only and copies it into the sandbox's own /world when the
sandbox is set up, so the agent works on a private copy: Volumes are shared and last-write-wins, and
nothing a run does reaches the Volume or another run. Two workers uploading the same new version at
once write identical bytes (the name is the content), so the race is harmless.

Like the world version, the Volume holds regular files only: symlinks, empty folders and modes other
than the executable bit are not carried over.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from typing import Any

from workflows.catalog.hashing import tree_files, tree_version
from workflows.providers.base import SandboxCreateError

MARKER = ".evalbot-complete"
PREFIX = "evalbot-world-"


def fingerprint(world_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """Cheap identity of a folder's state (names, sizes, mtimes): when it is unchanged, so is the
    content hash we computed for it, and we do not hash it again."""
    entries = []
    for folder, _, names in os.walk(world_dir):
        for name in names:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            entries.append((os.path.relpath(path, world_dir), info.st_size, info.st_mtime_ns))
    return tuple(sorted(entries))


class WorldVolumes:
    """Finds or uploads the Volume of a world folder. One per provider; safe to share by tasks."""

    def __init__(self, sdk: Any, prefix: str = PREFIX) -> None:
        self.sdk = sdk
        self.prefix = prefix
        self._versions: dict[str, tuple[tuple[tuple[str, int, int], ...], str]] = {}
        self._ready: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self.uploads = 0  # Volumes this instance uploaded (tests and benchmarks read it)

    async def version(self, world_dir: Path) -> str:
        if not world_dir.is_dir():
            raise SandboxCreateError(f"world folder {world_dir} does not exist")
        key = str(world_dir.resolve())
        seen = await asyncio.to_thread(fingerprint, world_dir)
        cached = self._versions.get(key)
        if cached is not None and cached[0] == seen:
            return cached[1]
        version = await asyncio.to_thread(tree_version, world_dir)
        self._versions[key] = (seen, version)
        return version

    async def volume_for(self, world_dir: Path) -> tuple[Any, str]:
        """(read-only Volume handle, world version), uploading the version first if needed."""
        version = await self.version(world_dir)
        name = self.prefix + version
        if name not in self._ready:
            async with self._locks.setdefault(name, asyncio.Lock()):
                if name not in self._ready:
                    await self._ensure(name, world_dir, version)
                    self._ready.add(name)
        return self.sdk.Volume.from_name(name).read_only(), version

    async def _ensure(self, name: str, world_dir: Path, version: str) -> None:
        volume = self.sdk.Volume.from_name(name, create_if_missing=True)
        entries = await volume.listdir.aio("/")
        if any(entry.path.strip("/") == MARKER for entry in entries):
            return
        manifest = json.dumps({"version": version, "source": world_dir.name}).encode()
        files = await asyncio.to_thread(tree_files, world_dir)  # exactly what the version hashes
        async with volume.batch_upload.aio(force=True) as batch:
            for path in files:
                batch.put_file(path, f"/world/{path.relative_to(world_dir).as_posix()}")
            batch.put_file(io.BytesIO(manifest), f"/{MARKER}")
        self.uploads += 1
