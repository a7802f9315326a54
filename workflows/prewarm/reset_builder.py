"""Reset to commit: `build_image` of the `local` provider, starting from a prewarmed image.

For commit X: take the newest prewarmed snapshot whose commit is an ancestor of X, start from it
copy-on-write (layers.py), fetch and check out X, run `build.incremental`. Fall back to
`build.setup` from a clean checkout when the dependency manifest changed (manifest.py), when
no incremental step is declared, or when the incremental step fails; with no prewarmed ancestor at
all it is a cold build. The result is cached per commit like any image (image_builder.py), so
every trial and experiment reuses it, and its reference says how it was made (image_label.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workflows.prewarm.image_builder import (
    ImageBuilder,
    SetupRunner,
    build_failure,
    file_lock,
    read_ready,
    repo_key,
    resolve_commit,
    write_ready,
)
from workflows.prewarm.image_label import ImageOrigin, with_origin
from workflows.prewarm.layers import Layer, ensure_mounted, start_from, unmount
from workflows.prewarm.reset_git import checkout_in_place, delta_step, newest_ancestor
from workflows.prewarm.snapshots import Snapshot, SnapshotIndex, using
from workflows.providers.base import SandboxCreateError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    kind: str  # prewarmed | reset | full | cold (see image_label.py)
    base: Snapshot | None = None
    newest_age_s: float | None = None
    command: str | None = None  # the incremental step of a reset
    reason: str = ""


def reference_of(folder: Path, record: dict[str, Any]) -> str:
    image = str(folder / "repo")
    if record.get("kind") is None:
        return image  # built before images said how they were built
    origin = ImageOrigin(
        kind=str(record["kind"]),
        build_s=float(record.get("build_s", 0.0)),
        base=str(record.get("base_commit") or ""),
        newest_age_s=record.get("newest_age_s"),
        reason=str(record.get("reason") or ""),
    )
    return with_origin(image, origin)


def origin_record(plan: Plan, build_s: float, reason: str | None = None) -> dict[str, Any]:
    return {
        "kind": plan.kind,
        "build_s": round(build_s, 3),
        # the snapshot an overlay or copy stands on (discarding it discards this image too)
        "base": plan.base.reference if plan.base and plan.kind in ("prewarmed", "reset") else None,
        "base_commit": plan.base.commit if plan.base else None,
        "newest_age_s": plan.newest_age_s,
        "reason": plan.reason if reason is None else reason,
    }


def own(paths: list[Path], uid: int, gid: int) -> None:
    for path in paths:
        try:
            os.lchown(path, uid, gid)
        except FileNotFoundError:
            continue  # a deletion (whiteout) or already gone


def readable(paths: list[Path]) -> None:
    """Every sandbox user must read the image (as images.make_readable, for these paths only)."""
    for path in paths:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(mode):
            os.chmod(path, mode | 0o555)  # noqa: S103 - read-only image
        elif stat.S_ISREG(mode):
            os.chmod(path, mode | 0o444 | (0o111 if mode & 0o100 else 0))


async def discard_image(folder: Path) -> None:
    """Remove a built image folder (unmounting its overlay first)."""
    await unmount(folder / "repo")
    await asyncio.to_thread(shutil.rmtree, folder, True)


class ResetBuilder:
    def __init__(
        self,
        images: ImageBuilder,
        snapshots: SnapshotIndex,
        *,
        owner: tuple[int, int] | None = None,
        cow: str = "auto",
    ) -> None:
        self.images = images
        self.snapshots = snapshots
        self.owner = owner  # who builds: files the reset creates are given to this uid/gid
        self.cow = cow

    async def build(
        self,
        source_repo: Path,
        commit: str,
        setup: str,
        run_clean: SetupRunner,
        run_in_place: SetupRunner,
    ) -> str:
        source = source_repo.resolve()
        if not (source / ".git").exists() and not (source / "HEAD").is_file():
            raise SandboxCreateError(f"{source_repo} is not a git repository")
        sha = await resolve_commit(source, commit)
        folder = self.images.image_dir / repo_key(source) / sha
        reference = await self._reuse(folder)
        if reference is not None:
            return reference
        async with file_lock(folder.with_name(f"{sha}.lock")):
            reference = await self._reuse(folder)
            if reference is None:
                await self._build(source, sha, setup, folder, run_clean, run_in_place)
                reference = reference_of(folder, read_ready(folder) or {})
        return reference

    async def _reuse(self, folder: Path) -> str | None:
        record = await asyncio.to_thread(read_ready, folder)
        if record is None:
            return None
        if not await ensure_mounted(folder, record):
            await discard_image(folder)  # its prewarmed image is gone: build it again
            return None
        return reference_of(folder, record)

    async def plan(self, source: Path, sha: str) -> Plan:
        snapshots = await asyncio.to_thread(self.snapshots.list, source)
        age = time.time() - max(s.checked_at for s in snapshots) if snapshots else None
        base = await newest_ancestor(source, sha, snapshots)
        if base is None:
            return Plan("cold", newest_age_s=age)
        if base.commit == sha:
            return Plan("prewarmed", base, age)
        step = await delta_step(source, base.commit, sha)
        return Plan(step.kind, base, age, command=step.command, reason=step.reason)

    async def _build(
        self,
        source: Path,
        sha: str,
        setup: str,
        folder: Path,
        run_clean: SetupRunner,
        run_in_place: SetupRunner,
    ) -> None:
        started = time.monotonic()
        plan = await self.plan(source, sha)
        reason = None
        if plan.base is not None and plan.kind in ("prewarmed", "reset"):
            try:
                async with using(plan.base):
                    await self._reset(source, sha, setup, folder, plan, run_in_place, started)
                return
            except SandboxCreateError as error:
                log.warning("reset of %s failed, building it from scratch: %s", sha[:12], error)
                await discard_image(folder)
                plan, reason = Plan("full", plan.base, plan.newest_age_s), "reset-failed"

        def describe() -> dict[str, Any]:
            return origin_record(plan, time.monotonic() - started, reason)

        await self.images.build_clean(source, sha, setup, folder, run_clean, describe)

    async def _reset(
        self,
        source: Path,
        sha: str,
        setup: str,
        folder: Path,
        plan: Plan,
        run: SetupRunner,
        started: float,
    ) -> None:
        assert plan.base is not None
        await discard_image(folder)  # a half-built leftover
        layer = await start_from(plan.base.repo, folder, self.cow)
        try:
            if plan.base.commit != sha:
                await checkout_in_place(layer.merged, source, sha)
            await self._run(layer, folder, plan, run)
        except BaseException:
            await unmount(layer.merged)
            raise
        record = layer.as_record() | origin_record(plan, time.monotonic() - started)
        await asyncio.to_thread(write_ready, folder, source, sha, setup, record)

    async def _run(self, layer: Layer, folder: Path, plan: Plan, run: SetupRunner) -> None:
        changed = await asyncio.to_thread(lambda: list(layer.changed()))
        if self.owner is not None:
            await asyncio.to_thread(own, changed, *self.owner)
        if plan.command:
            build_dir = folder / "build"
            build_dir.mkdir(exist_ok=True)
            state = await run(layer.merged, build_dir, plan.command)
            failure = build_failure(state, build_dir)
            if failure:
                raise SandboxCreateError(f"the incremental build failed: {failure}")
            changed = await asyncio.to_thread(lambda: list(layer.changed()))
        await asyncio.to_thread(readable, changed)
