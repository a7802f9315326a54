"""Images of the `modal` provider: one published Modal image per (repository, commit).

    name = modal_image_name(repo, sha) = "evalbot-<repo slug>-<12 hex>:<full sha>"

`build_image` returns that name once the image exists. The **prewarm hook**: whoever builds images
ahead of time (the hourly prewarm job) publishes them under `modal_image_name(...)`
(`image.publish(name)`); `build_image` then finds the name and builds nothing. When no image is
published, it builds one the simple way:

1. check the commit out on the worker (workflows/prewarm/image_builder.py: `resolve_commit`,
   `checkout`), pack it as a tar;
2. create a build sandbox from the base image (`modal.base_image`, default `Image.debian_slim()`)
   *with* network, copy the tar in (`filesystem.copy_from_local`) and unpack it at /repo;
3. run `setup` there through the same in-sandbox runner the runs use (timeout, capped logs, state);
   on failure raise SandboxCreateError with the exit status and the last lines of the build log;
4. `snapshot_filesystem()` the sandbox into an Image, `publish` it under the name, terminate the
   build sandbox.

Concurrent builds of one commit in a process wait for one another; across processes the second
finds the published name, or (if both started before either published) builds an identical image
and publishes it over the first, which is harmless.

The builder knows the provider only as an `ImageHost` (its SDK, its config, a build sandbox) and
its sandboxes as `BuildSandbox`es: the provider passes itself in.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from workflows.prewarm.image_builder import build_failure, checkout, resolve_commit
from workflows.providers.base import ExecResult, SandboxCreateError, SandboxError
from workflows.providers.common import RUNNER
from workflows.providers.modal.modal_files import ModalFiles

BUILD_OUT = "/evalbot/build"
MIB = 1 << 20
UNPACK = (
    "set -e; mkdir -p /repo /evalbot/build; tar -xf /evalbot/repo.tar -C /repo; "
    "rm -f /evalbot/repo.tar"
)
CLEAN = "rm -rf /evalbot"


def modal_image_name(source_repo: Path, sha: str) -> str:
    """The published name of the image of `sha` (the prewarm job publishes under it too)."""
    source = str(source_repo.resolve())
    slug = re.sub(r"[^A-Za-z0-9]+", "-", Path(source).name).strip("-").lower()[:30] or "repo"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return f"evalbot-{slug}-{digest}:{sha}"


def pack(folder: Path, dest: Path) -> None:
    with tarfile.open(dest, "w") as archive:
        archive.add(folder, arcname=".")


class BuildConfig(Protocol):
    """The settings of image builds (the provider's ModalConfig)."""

    @property
    def spool_dir(self) -> Path | None: ...

    @property
    def python(self) -> str: ...

    @property
    def build_timeout_s(self) -> int: ...


class BuildSandbox(Protocol):
    """What a build uses of a Modal sandbox (the provider's ModalSandbox)."""

    @property
    def handle(self) -> Any: ...

    @property
    def files(self) -> ModalFiles: ...

    async def run(
        self, command: Sequence[str], *, timeout_s: float, workdir: str
    ) -> ExecResult: ...

    async def read_state(self, path: str) -> dict[str, Any] | None: ...

    async def terminate(self) -> None: ...


class ImageHost(Protocol):
    """What the builder uses of the `modal` provider: its SDK, its config, a build sandbox."""

    @property
    def sdk(self) -> Any: ...

    @property
    def config(self) -> BuildConfig: ...

    async def builder_sandbox(self, sha: str) -> BuildSandbox: ...


class ModalImageBuilder:
    def __init__(self, provider: ImageHost) -> None:
        self.provider = provider
        self.sdk = provider.sdk
        self._locks: dict[str, asyncio.Lock] = {}
        self.builds = 0  # images this instance built (tests read it)

    async def exists(self, name: str) -> bool:
        exc = self.sdk.exception
        try:
            await self.sdk.Image.from_name(name).hydrate.aio()
        except (exc.NotFoundError, exc.InvalidError):
            return False
        return True

    async def build(self, source_repo: Path, commit: str, setup: str) -> str:
        source = source_repo.resolve()
        if not (source / ".git").exists() and not (source / "HEAD").is_file():
            raise SandboxCreateError(f"{source_repo} is not a git repository")
        sha = await resolve_commit(source, commit)
        name = modal_image_name(source, sha)
        if await self.exists(name):
            return name
        async with self._locks.setdefault(name, asyncio.Lock()):
            if not await self.exists(name):
                await self._build(source, sha, setup, name)
        return name

    async def _build(self, source: Path, sha: str, setup: str, name: str) -> None:
        with tempfile.TemporaryDirectory(dir=self.provider.config.spool_dir) as scratch:
            folder = Path(scratch)
            await checkout(source, sha, folder / "repo")
            await asyncio.to_thread(pack, folder / "repo", folder / "repo.tar")
            sandbox = await self.provider.builder_sandbox(sha)
            try:
                await self._prepare(sandbox, folder / "repo.tar")
                if setup.strip():
                    await self._setup(sandbox, setup, sha, folder / "logs")
                await sandbox.run(["sh", "-c", CLEAN], timeout_s=120, workdir="/")
                await self._publish(sandbox, name)
            finally:
                with contextlib.suppress(SandboxError):
                    await asyncio.shield(sandbox.terminate())
        self.builds += 1

    async def _prepare(self, sandbox: BuildSandbox, repo_tar: Path) -> None:
        with sandbox.files.errors("/evalbot/repo.tar"):
            await sandbox.handle.filesystem.copy_from_local.aio(str(repo_tar), "/evalbot/repo.tar")
            await sandbox.handle.filesystem.write_bytes.aio(
                RUNNER.read_bytes(), "/evalbot/runner.py"
            )
        unpacked = await sandbox.run(["sh", "-c", UNPACK], timeout_s=600, workdir="/")
        if unpacked.exit_code != 0:
            detail = unpacked.stderr.decode(errors="replace").strip()[-300:]
            raise SandboxCreateError(
                f"could not unpack the checkout in the build sandbox: {detail}"
            )

    async def _setup(self, sandbox: BuildSandbox, setup: str, sha: str, logs: Path) -> None:
        config = self.provider.config
        argv = [
            config.python, "-I", "-S", "/evalbot/runner.py", "--out", BUILD_OUT, "--cwd", "/repo",
            "--timeout", str(config.build_timeout_s), "--log-limit", str(64 * MIB), "--", setup,
        ]  # fmt: skip
        await sandbox.run(argv, timeout_s=config.build_timeout_s + 120, workdir="/repo")
        state = await sandbox.read_state(f"{BUILD_OUT}/.state.json")
        logs.mkdir()
        for log in ("stdout.log", "stderr.log"):
            with contextlib.suppress(SandboxError), sandbox.files.errors(f"{BUILD_OUT}/{log}"):
                await sandbox.handle.filesystem.copy_to_local.aio(
                    f"{BUILD_OUT}/{log}", str(logs / log)
                )
        if state is None:
            raise SandboxCreateError(f"building {sha[:12]} failed: the build runner did not run")
        failure = build_failure(state, logs)
        if failure:
            raise SandboxCreateError(f"building {sha[:12]} failed: {failure}")

    async def _publish(self, sandbox: BuildSandbox, name: str) -> None:
        with sandbox.files.errors("/"):
            image = await sandbox.handle.snapshot_filesystem.aio()
            await image.publish.aio(name)
