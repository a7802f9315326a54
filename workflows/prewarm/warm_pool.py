"""The warm pool of the `local` provider: sandboxes made ahead of time, so provisioning is a claim.

A pooled sandbox (a "shell") holds everything `create` makes that does not depend on the run: its
sparse disk formatted and mounted, its cgroups, its uid, /etc, an empty /out. Claiming one adds
only what does: the world copy, the case files, the spec's limits and metadata. A `local` sandbox
does not start from an image (the image is bound at /repo when the runner starts), so one pool
serves every image and repository.

Shells are made a little larger than the disk the last claim needed (sparse: room costs nothing). A
shell fits a spec whose disk needs between half its size and all of it; the claim then reserves, in
a root-only file outside the sandbox's folders, the free room beyond the spec's `disk_mb` once the
world is in, so the disk limit holds as for any sandbox. A spec no shell fits is created the
ordinary way. Shells are listed as marker files in `<sandbox_dir>/.pool/`; removing the marker
claims the shell, so several workers can share a pool. After every claim the pool refills itself
in the background up to its size.

The pool knows its provider only as a `PoolHost` (what it calls to make, fill and attach a
sandbox) and its sandboxes as `PooledSandbox`es: the `local` provider passes itself in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from workflows.providers.base import (
    ResourceLimits,
    SandboxCreateError,
    SandboxError,
    SandboxSpec,
)
from workflows.providers.common.sandbox_layout import (
    POOL_RUN_ID,
    Layout,
    new_sandbox_id,
    spec_to_meta,
)

log = logging.getLogger(__name__)

MIB = 1 << 20
HEADROOM_MB = 64  # shells have this much more room than the last claim needed (worlds vary)
RESERVE = ".pool-reserve"  # in the disk's root: not bound into the sandbox


class ShellCgroups(Protocol):
    def exists(self) -> bool: ...

    def create(self, limits: ResourceLimits) -> None: ...


class PooledSandbox(Protocol):
    """What the pool uses of a sandbox (the `local` provider's LocalSandbox)."""

    id: str
    layout: Layout
    meta: dict[str, Any]

    @property
    def cgroups(self) -> ShellCgroups: ...

    async def terminate(self) -> None: ...


S = TypeVar("S", bound=PooledSandbox)


class PoolHost(Protocol[S]):
    """What the pool uses of its provider (the `local` provider): it makes, fills, attaches."""

    @property
    def sandbox_dir(self) -> Path: ...

    def new_sandbox(self, sandbox_id: str, spec_meta: dict[str, Any]) -> S: ...

    async def make_shell(self, sandbox: S, size_mb: int, limits: ResourceLimits) -> None: ...

    async def provision(self, sandbox: S, step: Awaitable[None]) -> None: ...

    async def attach(self, sandbox_id: str) -> S: ...

    async def fill(self, sandbox: S, spec: SandboxSpec) -> None: ...

    async def remove_leftover(self, sandbox_id: str) -> None: ...


class WarmPool(Generic[S]):
    def __init__(self, provider: PoolHost[S], size: int, disk_mb: int) -> None:
        """`disk_mb`: the size of the first shells (later ones follow what claims needed)."""
        self.provider = provider
        self.size = size
        self.disk_mb = disk_mb
        self.folder = provider.sandbox_dir / ".pool"
        self._lock = asyncio.Lock()
        self._refill: asyncio.Task[int] | None = None

    def ready(self) -> list[str]:
        """Ids of the shells waiting to be claimed, oldest first."""
        if not self.folder.is_dir():
            return []
        markers = sorted(self.folder.iterdir(), key=lambda m: m.stat().st_mtime_ns)
        return [m.name for m in markers]

    async def fill(self) -> int:
        """Make shells until `size` are ready; returns how many are."""
        async with self._lock:
            while len(self.ready()) < self.size:
                await self._make()
            return len(self.ready())

    def refill_soon(self) -> None:
        if self._refill is None or self._refill.done():
            self._refill = asyncio.get_running_loop().create_task(self.fill())

    async def _make(self) -> None:
        provider = self.provider
        meta = {"pool": True, "pool_disk_mb": self.disk_mb, "image": ""}
        sandbox = provider.new_sandbox(new_sandbox_id(POOL_RUN_ID), meta)
        shell = provider.make_shell(sandbox, self.disk_mb, ResourceLimits())  # writes its meta
        await provider.provision(sandbox, shell)
        # No await from here on: a refill cancelled (drain) after the shell is whole and before
        # it is listed would leave it mounted with nobody to find it.
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / sandbox.id).touch()

    async def claim(self, spec: SandboxSpec, size_mb: int) -> S | None:
        """A ready shell made into the spec's sandbox; None when none fits (create one then)."""
        self.disk_mb = size_mb + HEADROOM_MB  # refills match what runs need now
        try:
            for sandbox_id in self.ready():
                sandbox = await self._take(sandbox_id, size_mb)
                if sandbox is not None:
                    await self.provider.provision(sandbox, self._fill(sandbox, spec))
                    return sandbox
            return None
        finally:
            self.refill_soon()

    async def _take(self, sandbox_id: str, size_mb: int | None = None) -> S | None:
        """Claim a shell that fits `size_mb` (any, if None); None if it does not fit or another
        worker took it. A shell that lost its disk or cgroups (a reboot) is dropped."""
        try:
            sandbox: S | None = await self.provider.attach(sandbox_id)
        except SandboxError:
            sandbox = None
        usable = sandbox is not None and sandbox.cgroups.exists()
        if usable and sandbox is not None and not fits(sandbox.meta, size_mb):
            return None  # it fits another workload: leave it
        try:
            (self.folder / sandbox_id).unlink()  # the claim: one worker wins
        except FileNotFoundError:
            return None
        if not usable:
            log.warning(
                "dropping pooled sandbox %s: its disk, metadata or cgroups are gone", sandbox_id
            )
            with contextlib.suppress(SandboxError):
                if sandbox is not None:
                    await sandbox.terminate()
                else:  # it cannot be attached: remove its disk, mount and uid by its id
                    await self.provider.remove_leftover(sandbox_id)
            return None
        return sandbox

    async def _fill(self, sandbox: S, spec: SandboxSpec) -> None:
        sandbox.meta |= spec_to_meta(spec) | {"pool": False, "claimed": True}
        sandbox.cgroups.create(spec.limits)
        await self.provider.fill(sandbox, spec)
        await asyncio.to_thread(reserve, sandbox.layout.root, spec.limits.disk_mb)

    async def drain(self) -> None:
        """Terminate every ready shell (shutdown, tests)."""
        if self._refill is not None:
            self._refill.cancel()
            with contextlib.suppress(asyncio.CancelledError, SandboxError):
                await self._refill
        async with self._lock:
            for sandbox_id in self.ready():
                sandbox = await self._take(sandbox_id)
                if sandbox is not None:
                    await sandbox.terminate()


def fits(meta: dict[str, Any], size_mb: int | None) -> bool:
    shell_mb = int(meta.get("pool_disk_mb", 0))
    return size_mb is None or size_mb <= shell_mb <= 2 * size_mb


def reserve(root: Path, disk_mb: int) -> None:
    """Take all free room above `disk_mb` MiB into a root-only file the sandbox cannot see."""
    stats = os.statvfs(root)
    excess = stats.f_bavail * stats.f_frsize - disk_mb * MIB
    if excess <= 0:
        return
    fd = os.open(root / RESERVE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, excess)
    except OSError as error:
        raise SandboxCreateError(f"could not size a pooled sandbox's disk: {error}") from None
    finally:
        os.close(fd)
