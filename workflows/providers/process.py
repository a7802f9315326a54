"""The `process` provider: agents run as plain host processes. NO isolation: trusted code only.

Same folder layout as `local` (common/sandbox_layout.py), but nothing is mounted: the agent finds
its folders through EVALBOT_REPO_DIR / _WORLD_DIR / _CASE_DIR / _OUT_DIR, runs as the worker's user
with the worker's view of the machine, and only the runner's limits apply (wall timeout, log caps,
RLIMIT_FSIZE). Kept cheap (no cgroups, no disks; the native runner started by a spawner, or its
Python runner forked where no C compiler is found: spawner.py, common/native_runner.py) for the
orchestration benchmark. It refuses to do anything unless constructed with `allowed=True`
(settings.sandbox.allow_process_provider).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workflows.prewarm.image_builder import ImageBuilder
from workflows.process_owned import reap_partial
from workflows.providers.base import (
    ExecResult,
    ProviderRefused,
    ResourceLimits,
    ResourceUsage,
    RunSandbox,
    SandboxCreateError,
    SandboxError,
    SandboxNotFound,
    SandboxProvider,
    SandboxSpec,
)
from workflows.providers.common import RUNNER
from workflows.providers.common.folder import FolderSandbox, read_state
from workflows.providers.common.launch import run_bounded, wait_ready
from workflows.providers.common.native_runner import native_launcher, native_runner
from workflows.providers.common.procs import is_alive, kill, wait_gone
from workflows.providers.common.sandbox_layout import (
    Layout,
    build_env,
    check_sandbox_id,
    copy_world_blocking,
    dir_env,
    make_sandbox_dir,
    new_sandbox_id,
    read_meta,
    run_sandboxes,
    sandboxes_of,
    spec_to_meta,
    write_case_files,
    write_meta,
)
from workflows.providers.common.settle import settled
from workflows.providers.spawner import RunnerSpawner

MIB = 1 << 20
TERMINATE_GRACE_S = 5.0
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class ProcessSandbox(FolderSandbox):
    def __init__(
        self, provider: ProcessProvider, sandbox_id: str, layout: Layout, meta: dict[str, Any]
    ) -> None:
        super().__init__(sandbox_id, layout, meta)
        self.provider = provider

    @property
    def limits(self) -> ResourceLimits:
        return ResourceLimits(**self.meta["limits"])

    @property
    def tmp(self) -> Path:
        return self.layout.root / "tmp"

    def env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        base = {**self.provider.base_env, "HOME": str(self.tmp), "TMPDIR": str(self.tmp)}
        folders = {name: str(path) for name, path in self.roots.items()}
        return build_env(base, self.meta["env"], extra or {}, fixed=dir_env(folders))

    def require_alive(self) -> None:
        if not self.layout.meta.is_file():
            raise SandboxError(f"sandbox {self.id} has been terminated")

    async def start(self, command: str, env: dict[str, str] | None = None) -> None:
        if await asyncio.to_thread(self.already_started):
            return
        self.require_alive()
        native = await self.provider.native_runner()
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        limits = self.limits
        argv = [
            "--out", str(self.layout.out), "--cwd", self.meta["image"],
            "--timeout", str(limits.wall_timeout_s),
            "--log-limit", str(limits.stdout_limit_mb * MIB),
            "--fsize", str(limits.file_size_mb * MIB), "--", command,
        ]  # fmt: skip
        spawner, env_vars, log = self.provider.spawner, self.env(env), self.layout.log
        try:
            recorded = self.record_started
            if native is None:  # the spawner forks its imported Python runner
                await spawner.spawn(
                    argv, env=env_vars, log=log, ready_fd=write_fd, started=recorded
                )
            else:  # the spawner starts the native runner through the launcher
                argv = [str(native), "--ready-fd", str(write_fd), *argv]
                await spawner.spawn_exec(
                    argv, env=env_vars, log=log, pass_fds=[write_fd], started=recorded
                )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        if not await wait_ready(read_fd, self.provider.start_timeout_s):
            raise SandboxError(f"the runner of sandbox {self.id} did not start")

    async def exec(self, command: list[str], timeout_s: float = 60) -> ExecResult:
        self.require_alive()
        return await run_bounded(
            command, env=self.env(None), cwd=self.meta["image"], timeout_s=timeout_s
        )

    async def usage(self) -> ResourceUsage:
        state = read_state(self.layout.out) or {}
        rusage = state.get("rusage") or {}
        return ResourceUsage(
            cpu_seconds=float(rusage.get("cpu_seconds", 0.0)),
            peak_memory_mb=float(rusage.get("max_rss_mb", 0.0)),
            wall_seconds=round(self.wall_seconds(), 3),
            disk_limit_hit=bool(state.get("disk_full")),
        )

    async def terminate(self) -> None:
        """Ask the runner to stop (it kills the agent's processes), force it if it will not."""
        runner = await self.known_runner()
        if runner is not None and is_alive(runner["pid"], runner["start_time"]):
            pid, started = runner["pid"], runner["start_time"]
            kill(pid, started, signal.SIGTERM)
            if not await wait_gone(pid, started, TERMINATE_GRACE_S):
                kill(pid, started, signal.SIGKILL)
                await wait_gone(pid, started, TERMINATE_GRACE_S)
        await asyncio.to_thread(shutil.rmtree, self.layout.root, True)


def _build(layout: Layout, spec: SandboxSpec, meta: dict[str, Any]) -> None:
    """The sandbox's folders, its copy of the world, and its metadata (written last); in one
    thread, as each step needs the one before."""
    layout.root.mkdir(parents=True, mode=0o700)
    copy_world_blocking(spec.world_dir, layout.world)
    layout.out.mkdir()
    (layout.root / "tmp").mkdir()
    write_case_files(layout.case, spec.case_files)
    write_meta(layout, meta)


class ProcessProvider(SandboxProvider):
    name = "process"
    quick_provision = True
    host_bound = True

    def __init__(
        self,
        sandbox_dir: Path,
        image_dir: Path,
        *,
        allowed: bool = False,
        python: str = sys.executable,
        base_env: Mapping[str, str] | None = None,
        start_timeout_s: float = 30,
    ) -> None:
        if not allowed:
            raise ProviderRefused(
                "the process provider runs agents without any isolation; enable it on purpose "
                "(EVALBOT_ALLOW_PROCESS_PROVIDER=1), and only for trusted agent code"
            )
        self.sandbox_dir = sandbox_dir.absolute()
        self.images = ImageBuilder(image_dir.absolute())
        self.python = python
        self.base_env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **(base_env or {})}
        self.start_timeout_s = start_timeout_s
        self.spawner = RunnerSpawner(python)
        self._native: Path | None = None
        self._native_looked_for = False
        self._native_lock = threading.Lock()
        self._host_checked = False

    def close(self) -> None:
        self.spawner.close()

    async def native_runner(self) -> Path | None:
        """The native runner (common/native_runner.py), looked for at the first start (in a
        thread: it may compile), the spawner's launcher with it; None where it cannot be made
        (the spawner then forks its Python runner)."""
        if not self._native_looked_for:
            await asyncio.to_thread(self._look_for_native)
        return self._native

    def _look_for_native(self) -> None:
        with self._native_lock:
            if not self._native_looked_for:
                folder = self.sandbox_dir / ".runner"
                self.spawner.launcher = native_launcher(folder)
                self._native = native_runner(folder)
                self._native_looked_for = True

    def check_host(self) -> None:
        """Nothing to refuse; makes the sandbox folder, spread over the disk (a worker's start,
        or the first create: `make_sandbox_dir`), as the local provider's check does."""
        if not self._host_checked:
            make_sandbox_dir(self.sandbox_dir)
            self._host_checked = True

    def reap_orphans(self, grace_s: float = 60.0) -> list[int]:
        """Remove native programs a worker killed mid-build left half-made."""
        reap_partial(self.sandbox_dir / ".runner")
        return []

    async def create(self, spec: SandboxSpec) -> ProcessSandbox:
        if not Path(spec.image).is_dir():
            raise SandboxCreateError(
                f"image {spec.image} is not a built checkout (see build_image)"
            )
        self.check_host()
        sandbox_id = new_sandbox_id(spec.run_id)
        layout = Layout(self.sandbox_dir / sandbox_id)
        meta = {"id": sandbox_id, "provider": self.name, "created_at": time.time()}
        meta |= spec_to_meta(spec) | {"runner": None}
        try:
            await settled(asyncio.to_thread(_build, layout, spec, meta))
        except BaseException as error:
            await settled(asyncio.to_thread(shutil.rmtree, layout.root, True))
            if isinstance(error, OSError):
                raise SandboxCreateError(f"could not create a sandbox: {error}") from None
            raise
        return ProcessSandbox(self, sandbox_id, layout, meta)

    async def sandboxes_of(self, run_id: str) -> list[str]:
        return await asyncio.to_thread(sandboxes_of, self.sandbox_dir, run_id)

    async def run_sandboxes(self) -> list[RunSandbox]:
        """This host's sandboxes (the host's reaping pass at start, docs/engine.md)."""
        return await asyncio.to_thread(run_sandboxes, self.sandbox_dir)

    async def remove_leftover(self, sandbox_id: str) -> None:
        """Also one cut off before its metadata was written (it has no runner yet)."""
        try:
            await (await self.attach(sandbox_id)).terminate()
        except SandboxNotFound:
            folder = self.sandbox_dir / check_sandbox_id(sandbox_id)
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def attach(self, sandbox_id: str) -> ProcessSandbox:
        layout = Layout(self.sandbox_dir / check_sandbox_id(sandbox_id))
        meta = await asyncio.to_thread(read_meta, layout)
        if meta.get("provider") != self.name:
            raise SandboxNotFound(f"sandbox {sandbox_id} was not created by the process provider")
        return ProcessSandbox(self, sandbox_id, layout, meta)

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        return await self.images.build(source_repo, commit, setup, self._run_setup)

    async def _run_setup(self, repo: Path, build_dir: Path, setup: str) -> dict[str, Any]:
        """The setup runs in the checkout as a host process, through the runner."""
        argv = [
            self.python, "-I", "-S", str(RUNNER), "--out", str(build_dir), "--cwd", str(repo),
            "--timeout", "1800", "--log-limit", str(64 * MIB), "--", setup,
        ]  # fmt: skip
        env = {"HOME": str(build_dir), **self.base_env, "EVALBOT_REPO_DIR": str(repo)}
        result = await run_bounded(argv, env=env, cwd=repo, timeout_s=1900)
        state = read_state(build_dir)
        if state is None:
            detail = result.stderr.decode(errors="replace").strip()[-300:]
            raise SandboxCreateError(f"the build runner failed: {detail or 'no output'}")
        return state
