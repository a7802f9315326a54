"""What `local` and `process` sandboxes share: a host folder (sandbox_layout.py), safe files."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

from workflows.providers.base import FileInfo, Sandbox, SandboxError, SandboxFileError
from workflows.providers.common import sandbox_files
from workflows.providers.common.procs import is_alive, start_time
from workflows.providers.common.sandbox_layout import Layout, read_meta, write_meta

READ_ONLY_ROOTS = ("repo",)  # the image is shared by every sandbox of the commit


class FolderSandbox(Sandbox):
    def __init__(self, sandbox_id: str, layout: Layout, meta: dict[str, Any]) -> None:
        self.id = sandbox_id
        self.layout = layout
        self.meta = meta

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.meta.get("labels") or {}).items()}

    # -- hooks ----------------------------------------------------------------------------------

    def owner(self) -> tuple[int, int] | None:
        """uid/gid given to files the host writes into /world and /out (None: leave as is)."""
        return None

    # -- files ----------------------------------------------------------------------------------

    @functools.cached_property
    def roots(self) -> dict[str, Path]:
        """Sandbox root name -> host folder (fixed when the sandbox is created)."""
        return self.layout.roots(Path(self.meta["image"]))

    def target(self, path: str) -> sandbox_files.HostPath:
        return sandbox_files.HostPath(path, self.roots)

    async def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        return await asyncio.to_thread(self.host_files.read_file, path, max_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        target = self.target(path)
        root = path.lstrip("/").split("/", 1)[0]
        if root in READ_ONLY_ROOTS:
            raise SandboxFileError(f"{path} is read-only (/{root} is shared)")
        owner = self.owner() if root in ("world", "out") else None
        await asyncio.to_thread(sandbox_files.write_bytes, target, data, owner)

    async def iter_file(self, path: str, chunk_size: int = 1 << 16) -> AsyncIterator[bytes]:
        chunks = self.host_files.iter_file(path, chunk_size)
        try:
            while chunk := await asyncio.to_thread(next, chunks, b""):
                yield chunk
        finally:
            await asyncio.to_thread(chunks.close)

    async def list_files(self, root: str) -> list[FileInfo]:
        return await asyncio.to_thread(self.host_files.list_files, root)

    @functools.cached_property
    def host_files(self) -> HostFiles:
        return HostFiles(self)

    def blocking_files(self) -> HostFiles:
        return self.host_files

    # -- runner bookkeeping ---------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        return read_state(self.layout.out)

    def wall_seconds(self) -> float:
        state = self.state() or {}
        started, finished = state.get("started_at"), state.get("finished_at")
        if not isinstance(started, int | float):
            return 0.0
        end = finished if isinstance(finished, int | float) else time.time()
        return max(0.0, float(end) - float(started))

    def runner(self) -> dict[str, int] | None:
        """The runner's pid and start time, re-read (another worker may have started it)."""
        runner = read_meta(self.layout).get("runner")
        return runner if isinstance(runner, dict) else None

    def record_started(self, pid: int) -> None:
        """The runner just started as `pid`: recorded with its start time, which tells it from a
        later process given the same pid (procs.is_alive)."""
        self.meta["runner"] = {"pid": pid, "start_time": start_time(pid) or 0}
        write_meta(self.layout, self.meta)

    async def known_runner(self) -> dict[str, int] | None:
        """The runner as recorded in the metadata this handle holds (a pid and its start time
        never change), else as re-read from disk; None if none was recorded or the sandbox is
        gone."""
        runner = self.meta.get("runner")
        if isinstance(runner, dict):
            return runner
        try:
            return await asyncio.to_thread(self.runner)
        except SandboxError:
            return None

    async def runner_alive(self) -> bool:
        runner = await self.known_runner()
        return runner is not None and is_alive(runner["pid"], runner["start_time"])

    def already_started(self) -> bool:
        """True if a runner was started (alive or not); raises if it died without a state file."""
        runner = self.runner()
        if runner is None:
            return False
        if not is_alive(runner["pid"], runner["start_time"]) and self.state() is None:
            raise SandboxError(f"the runner of sandbox {self.id} exited without writing its state")
        return True


class HostFiles:
    """A folder sandbox's files by blocking calls (Sandbox.blocking_files): what its async
    methods do in a thread each, here in the caller's thread."""

    def __init__(self, sandbox: FolderSandbox) -> None:
        self.sandbox = sandbox

    def read_file(self, path: str, max_bytes: int) -> bytes:
        return sandbox_files.read_bytes(self.sandbox.target(path), max_bytes)

    def iter_file(self, path: str, chunk_size: int) -> Generator[bytes, None, None]:
        return sandbox_files.iter_chunks(self.sandbox.target(path), chunk_size)

    def list_files(self, root: str) -> list[FileInfo]:
        return sandbox_files.list_tree(self.sandbox.target(root))


def read_state(out_dir: Path) -> dict[str, Any] | None:
    """The runner's state file in `out_dir`, or None if missing, unreadable or being replaced."""
    try:
        raw = sandbox_files.read_bytes(
            sandbox_files.HostPath("/out/.state.json", {"out": out_dir}), 1 << 16
        )
        state = json.loads(raw)
    except (SandboxError, ValueError):
        return None
    return state if isinstance(state, dict) else None
