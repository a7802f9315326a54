"""Images of the `modal` provider: published Modal images, one per (repository, commit).

    modal_image_name(repo, sha)    "evalbot-<repo slug>-<12 hex>:<full sha>"   an arm's image
    prewarm_image_name(repo, sha)  "evalbot-<repo slug>-<12 hex>-prewarm:<sha>" a prewarmed image

`build_image(repo, X)` returns X's name (with an origin fragment saying how it was built,
workflows/prewarm/image_label.py) once the image exists. How it is made (docs/modal.md, "Images"):

- **prewarm** (the hourly job, `evalbot prewarm` with the `modal` provider): a full build of main's
  head, published under both names of that commit.
- **reset**: the newest prewarmed image whose commit is an ancestor of X (modal_resets.py finds it
  by name) plus a git bundle of the commits in between, `git checkout X` and the repository's
  `build.incremental`, snapshotted once and published under X's name; every run of the arm reuses
  it. A changed dependency manifest or no incremental step means a full build instead (the same
  rule as the local provider: workflows/prewarm/reset_git.delta_step).
- **full / cold**: check X out on the worker, pack it, unpack it at /repo in a build sandbox
  started from the base image (`modal.base_image`, default `Image.debian_slim()`), run `setup`
  through the in-sandbox runner, snapshot, publish.

Build sandboxes reach only `EVALBOT_BUILD_ALLOW_DOMAINS` (the package registries), never the open
internet, and are terminated whatever happens. Images are looked up with public SDK calls only:
`Image.from_name(name).build(app)` resolves a published name (`Image.hydrate` cannot: the SDK
refuses to hydrate images on demand). Deleting a prewarmed name has no public call; it is one of
the wrappers of modal_private.py.

Concurrent builds of one commit in a process wait for one another; across processes the second
finds the published name, or builds an identical image and publishes it over the first, which is
harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from workflows.prewarm.image_builder import build_failure, checkout, resolve_commit
from workflows.prewarm.image_label import ImageOrigin, with_origin
from workflows.providers.base import (
    ExecResult,
    PrewarmedImage,
    SandboxCreateError,
    SandboxError,
)
from workflows.providers.common import RUNNER
from workflows.providers.modal.modal_files import ModalFiles
from workflows.providers.modal.modal_resets import (
    RESET,
    BuildPlan,
    make_delta_bundle,
    plan_build,
)

log = logging.getLogger(__name__)

BUILD_OUT = "/evalbot/build"
MIB = 1 << 20
UNPACK = (
    "set -e; mkdir -p /repo /evalbot/build; tar -xf /evalbot/repo.tar -C /repo; "
    "rm -f /evalbot/repo.tar"
)
CLEAN = "rm -rf /evalbot"
PREWARM_SUFFIX = "-prewarm"


def image_repository(source_repo: Path) -> str:
    """The name part (before ':') of a repository's images."""
    source = str(source_repo.resolve())
    slug = re.sub(r"[^A-Za-z0-9]+", "-", Path(source).name).strip("-").lower()[:30] or "repo"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return f"evalbot-{slug}-{digest}"


def modal_image_name(source_repo: Path, sha: str) -> str:
    """The published name of the image of `sha` (an arm's image)."""
    return f"{image_repository(source_repo)}:{sha}"


def prewarm_image_name(source_repo: Path, sha: str) -> str:
    """The published name of the prewarmed image of `sha`."""
    return f"{image_repository(source_repo)}{PREWARM_SUFFIX}:{sha}"


def pack(folder: Path, dest: Path) -> None:
    with tarfile.open(dest, "w") as archive:
        archive.add(folder, arcname=".")


def checked_source(source_repo: Path) -> Path:
    source = source_repo.resolve()
    if not (source / ".git").exists() and not (source / "HEAD").is_file():
        raise SandboxCreateError(f"{source_repo} is not a git repository")
    return source


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
    """What the builder uses of the `modal` provider: its SDK, config, app and build sandboxes."""

    @property
    def sdk(self) -> Any: ...

    @property
    def config(self) -> BuildConfig: ...

    async def app(self) -> Any: ...

    async def builder_sandbox(self, sha: str, base: str | None = None) -> BuildSandbox: ...


class ModalImageBuilder:
    def __init__(self, provider: ImageHost) -> None:
        self.provider = provider
        self.sdk = provider.sdk
        self._locks: dict[str, asyncio.Lock] = {}
        self._built: dict[str, str] = {}  # name -> reference with its origin, built here
        self.builds = 0  # images this instance built (tests read it)
        self.resets = 0  # of which were resets from a prewarmed image

    async def exists(self, name: str) -> bool:
        """Whether `name` is published: resolving it is the only public way to ask."""
        exc = self.sdk.exception
        app = await self.provider.app()
        try:
            await self.sdk.Image.from_name(name).build.aio(app)
        except (exc.NotFoundError, exc.InvalidError):
            return False
        return True

    # -- an arm's image ----------------------------------------------------------------------

    async def build(self, source_repo: Path, commit: str, setup: str) -> str:
        source = checked_source(source_repo)
        sha = await resolve_commit(source, commit)
        name = modal_image_name(source, sha)
        if name in self._built or await self.exists(name):
            return self._built.get(name, name)
        async with self._locks.setdefault(name, asyncio.Lock()):
            if name in self._built or await self.exists(name):
                return self._built.get(name, name)
            started = time.monotonic()
            plan = await plan_build(source, sha, self.prewarmed)
            origin = await self._build_planned(source, sha, setup, name, plan)
            self._built[name] = with_origin(name, origin(time.monotonic() - started))
        return self._built[name]

    async def prewarmed(self, source: Path, sha: str) -> bool:
        return await self.exists(prewarm_image_name(source, sha))

    async def _build_planned(
        self, source: Path, sha: str, setup: str, name: str, plan: BuildPlan
    ) -> Callable[[float], ImageOrigin]:
        base = prewarm_image_name(source, plan.base) if plan.base else None
        reason = plan.reason
        if base is not None and plan.kind in ("prewarmed", "reset"):
            try:
                await self._reset(source, sha, plan, base, name)
            except SandboxCreateError as error:
                log.warning("reset of %s failed, building it from scratch: %s", sha[:12], error)
                plan, reason = plan.as_full(), "reset-failed"
            else:
                return plan.origin(reason)
        await self._full_build(source, sha, setup, [name])
        return plan.origin(reason)

    # -- prewarmed images --------------------------------------------------------------------

    async def prewarm(
        self, source_repo: Path, commit: str, setup: str, *, rebuild: bool = False
    ) -> PrewarmedImage:
        source = checked_source(source_repo)
        sha = await resolve_commit(source, commit)
        prewarm_name = prewarm_image_name(source, sha)
        if not rebuild and await self.exists(prewarm_name):
            return PrewarmedImage(prewarm_name, sha, 0.0, reused=True)
        started = time.monotonic()
        async with self._locks.setdefault(prewarm_name, asyncio.Lock()):
            await self._full_build(
                source, sha, setup, [prewarm_name, modal_image_name(source, sha)]
            )
        return PrewarmedImage(prewarm_name, sha, round(time.monotonic() - started, 3))

    # -- building ----------------------------------------------------------------------------

    async def _full_build(self, source: Path, sha: str, setup: str, names: list[str]) -> None:
        with tempfile.TemporaryDirectory(dir=self.provider.config.spool_dir) as scratch:
            folder = Path(scratch)
            await checkout(source, sha, folder / "repo")
            await asyncio.to_thread(pack, folder / "repo", folder / "repo.tar")
            sandbox = await self.provider.builder_sandbox(sha)
            try:
                await self._upload(sandbox, folder / "repo.tar", "/evalbot/repo.tar")
                await self._step(sandbox, UNPACK, "unpack the checkout in the build sandbox")
                if setup.strip():
                    await self._setup(sandbox, setup, sha, folder / "logs")
                await self._publish(sandbox, names)
            finally:
                await _terminate(sandbox)
        self.builds += 1

    async def _reset(self, source: Path, sha: str, plan: BuildPlan, base: str, name: str) -> None:
        with tempfile.TemporaryDirectory(dir=self.provider.config.spool_dir) as scratch:
            folder = Path(scratch)
            sandbox = await self.provider.builder_sandbox(sha, base)
            try:
                if plan.base != sha:
                    assert plan.base is not None
                    bundle = await make_delta_bundle(source, plan.base, sha, folder)
                    await self._upload(sandbox, bundle, "/evalbot/delta.bundle")
                    await self._step(sandbox, RESET.format(sha=sha), f"check out {sha[:12]}")
                if plan.command:
                    await self._setup(sandbox, plan.command, sha, folder / "logs")
                await self._publish(sandbox, [name])
            finally:
                await _terminate(sandbox)
        self.builds += 1
        self.resets += 1

    async def _upload(self, sandbox: BuildSandbox, local: Path, remote: str) -> None:
        with sandbox.files.errors(remote):
            await sandbox.handle.filesystem.make_directory.aio("/evalbot")
            await sandbox.handle.filesystem.copy_from_local.aio(str(local), remote)
            await sandbox.handle.filesystem.write_bytes.aio(
                RUNNER.read_bytes(), "/evalbot/runner.py"
            )

    async def _step(self, sandbox: BuildSandbox, script: str, what: str) -> None:
        done = await sandbox.run(["sh", "-c", script], timeout_s=600, workdir="/")
        if done.exit_code != 0:
            detail = done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.exit_code}"
            raise SandboxCreateError(f"could not {what}: {detail}")

    async def _setup(self, sandbox: BuildSandbox, setup: str, sha: str, logs: Path) -> None:
        config = self.provider.config
        argv = [
            config.python, "-I", "-S", "/evalbot/runner.py", "--out", BUILD_OUT, "--cwd", "/repo",
            "--timeout", str(config.build_timeout_s), "--log-limit", str(64 * MIB), "--", setup,
        ]  # fmt: skip
        await sandbox.run(["mkdir", "-p", BUILD_OUT], timeout_s=60, workdir="/")
        await sandbox.run(argv, timeout_s=config.build_timeout_s + 120, workdir="/repo")
        state = await sandbox.read_state(f"{BUILD_OUT}/.state.json")
        logs.mkdir(exist_ok=True)
        for log_name in ("stdout.log", "stderr.log"):
            with contextlib.suppress(SandboxError), sandbox.files.errors(f"{BUILD_OUT}/{log_name}"):
                await sandbox.handle.filesystem.copy_to_local.aio(
                    f"{BUILD_OUT}/{log_name}", str(logs / log_name)
                )
        if state is None:
            raise SandboxCreateError(f"building {sha[:12]} failed: the build runner did not run")
        failure = build_failure(state, logs)
        if failure:
            raise SandboxCreateError(f"building {sha[:12]} failed: {failure}")

    async def _publish(self, sandbox: BuildSandbox, names: list[str]) -> None:
        await sandbox.run(["sh", "-c", CLEAN], timeout_s=120, workdir="/")
        timeout = self.provider.config.build_timeout_s
        with sandbox.files.errors("/"):
            image = await sandbox.handle.snapshot_filesystem.aio(timeout=timeout)
            for name in names:
                await image.publish.aio(name)


async def _terminate(sandbox: BuildSandbox) -> None:
    with contextlib.suppress(SandboxError):
        await asyncio.shield(sandbox.terminate())
