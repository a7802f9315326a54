"""Sandbox files through Modal's filesystem API (`sandbox.filesystem`), under the contract's rules.

The contract (base.py, common/sandbox_files.py) allows only paths below /repo, /world, /case and
/out, never follows a symlink, reads regular files only, and streams. Modal's filesystem calls take
any absolute path and follow symlinks, so each call here first `stat`s every component of the path
below and including its root — concurrently, one round trip — and refuses a path that goes through a
symlink or ends at something other than the expected kind. Inside a Modal sandbox a symlink can only
point into the same sandbox, so a swap between the check and the read (the agent racing us) reaches
nothing outside it; the checks keep the behaviour identical to the local providers.

A listing (`list_tree`) already tells the kind of everything under its root, so for
`LISTING_FRESH_S` after it the paths it saw are not `stat`ed again: collecting a run's outputs
(list, then read each file) costs one filesystem call per file instead of one per path component
plus the read. That is the same snapshot the `stat`s would take, a moment earlier.

`iter_file` streams with `copy_to_local` into a spool file and yields it in chunks: neither side
holds the file in memory. Errors are mapped to SandboxFileError (the file) or SandboxError (the
sandbox is gone or Modal failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from workflows.providers.base import (
    FileInfo,
    FileKind,
    SandboxCreateError,
    SandboxError,
    SandboxFileError,
    SandboxRateLimited,
)
from workflows.providers.common.sandbox_files import HostPath

ROOTS = {name: Path("/", name) for name in ("repo", "world", "case", "out")}
READ_ONLY_ROOTS = ("repo",)
LIST_CONCURRENCY = 8
LISTING_FRESH_S = 30.0


def sandbox_path(path: str) -> tuple[str, list[str]]:
    """The canonical path and its prefixes from the root down, e.g. "/out/a/b" ->
    ("/out/a/b", ["/out", "/out/a", "/out/a/b"]); SandboxFileError outside the roots."""
    target = HostPath(path, ROOTS)
    parts = [target.root.name, *target.parts]
    prefixes = ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
    return prefixes[-1], prefixes


def kind_of(info: Any) -> FileKind:
    """Modal's FileInfo to our kind. Its `type` knows file/directory/symlink; the mode (or the
    `ls`-style permissions) tells a regular file from a FIFO, socket or device."""
    type_name = getattr(info.type, "value", str(info.type))
    if type_name == "symlink":
        return FileKind.SYMLINK
    if type_name == "directory":
        return FileKind.DIR
    mode = int(getattr(info, "mode", 0) or 0)
    if stat.S_IFMT(mode):
        return FileKind.FILE if stat.S_ISREG(mode) else FileKind.OTHER
    permissions = str(getattr(info, "permissions", "") or "")
    if len(permissions) == 10:
        return FileKind.FILE if permissions[0] == "-" else FileKind.OTHER
    return FileKind.FILE


class ModalFiles:
    """File operations on one Modal sandbox handle."""

    def __init__(self, sdk: Any, handle: Any, sandbox_id: str, spool_dir: Path | None) -> None:
        self.sdk = sdk
        self.handle = handle
        self.sandbox_id = sandbox_id
        self.spool_dir = spool_dir
        self._listed: dict[str, Any] = {}  # canonical path -> Modal's FileInfo, from a listing
        self._listed_at = -LISTING_FRESH_S

    @property
    def fs(self) -> Any:
        return self.handle.filesystem

    @contextlib.contextmanager
    def errors(self, path: str) -> Iterator[None]:
        """Modal's exceptions as ours (see the module doc)."""
        exc = self.sdk.exception
        file_errors = (
            (exc.SandboxFilesystemNotFoundError, "does not exist"),
            (exc.SandboxFilesystemIsADirectoryError, "is a folder"),
            (
                exc.SandboxFilesystemNotADirectoryError,
                "goes through something that is not a folder",
            ),
            (exc.SandboxFilesystemPermissionError, "is not accessible"),
            (exc.SandboxFilesystemFileTooLargeError, "is too large for Modal to read"),
            (exc.SandboxFilesystemError, "cannot be accessed"),
        )
        try:
            yield
        except exc.Error as error:
            for kind, reason in file_errors:
                if isinstance(error, kind):
                    raise SandboxFileError(f"{path} {reason}") from None
            raise sdk_error(self.sdk, error, f"sandbox {self.sandbox_id}") from None

    # -- checks ---------------------------------------------------------------------------------

    async def stat_or_none(self, path: str) -> Any | None:
        try:
            with self.errors(path):
                return await self.fs.stat.aio(path)
        except SandboxFileError as error:
            if str(error).endswith("does not exist"):
                return None
            raise

    async def check(self, path: str, *, must_exist: bool) -> tuple[str, Any | None]:
        """(canonical path, Modal's FileInfo of it or None if missing); refuses symlinks anywhere
        on the way and components that are not folders."""
        canonical, prefixes = sandbox_path(path)
        infos = await asyncio.gather(*(self._info(p) for p in prefixes))
        for position, info in enumerate(infos):
            if info is None:
                if must_exist:
                    raise SandboxFileError(f"{path} does not exist")
                return canonical, None
            kind = kind_of(info)
            if kind is FileKind.SYMLINK:
                raise SandboxFileError(f"{path} goes through a symlink")
            if position < len(infos) - 1 and kind is not FileKind.DIR:
                raise SandboxFileError(f"{path} goes through something that is not a folder")
        return canonical, infos[-1]

    async def _info(self, path: str) -> Any | None:
        """What a fresh listing saw at `path`, else a `stat`."""
        if time.monotonic() - self._listed_at <= LISTING_FRESH_S and path in self._listed:
            return self._listed[path]
        return await self.stat_or_none(path)

    async def regular_file(self, path: str, max_bytes: int | None) -> str:
        canonical, info = await self.check(path, must_exist=True)
        kind = kind_of(info)
        if kind is FileKind.DIR:
            raise SandboxFileError(f"{path} is a folder")
        if kind is not FileKind.FILE:
            raise SandboxFileError(f"{path} is not a regular file")
        if max_bytes is not None and info is not None and int(info.size) > max_bytes:
            raise SandboxFileError(f"{path} is larger than {max_bytes} bytes")
        return canonical

    # -- operations -----------------------------------------------------------------------------

    async def read(self, path: str, max_bytes: int) -> bytes:
        canonical = await self.regular_file(path, max_bytes)
        with self.errors(path):
            data: bytes = await self.fs.read_bytes.aio(canonical)
        if len(data) > max_bytes:  # it grew since the check
            raise SandboxFileError(f"{path} is larger than {max_bytes} bytes")
        return data

    async def write(self, path: str, data: bytes) -> None:
        canonical, info = await self.check(path, must_exist=False)
        kind = None if info is None else kind_of(info)
        root = canonical.split("/")[1]
        if root in READ_ONLY_ROOTS:
            raise SandboxFileError(f"{path} is read-only (/{root} is shared)")
        if kind is FileKind.DIR:
            raise SandboxFileError(f"{path} is a folder")
        if kind is FileKind.OTHER:
            raise SandboxFileError(f"{path} is not a regular file")
        self._listed.clear()  # what we saw may be changed by the write
        with self.errors(path):
            await self.fs.write_bytes.aio(data, canonical)

    async def iter_chunks(self, path: str, chunk_size: int) -> AsyncIterator[bytes]:
        canonical = await self.regular_file(path, None)
        with tempfile.TemporaryDirectory(dir=self.spool_dir, prefix="evalbot-modal-") as spool:
            local = Path(spool) / "file"
            with self.errors(path):
                await self.fs.copy_to_local.aio(canonical, str(local))
            handle = await asyncio.to_thread(local.open, "rb")
            try:
                while chunk := await asyncio.to_thread(handle.read, chunk_size):
                    yield chunk
            finally:
                handle.close()

    async def list_tree(self, root: str) -> list[FileInfo]:
        canonical, info = await self.check(root, must_exist=True)
        if kind_of(info) is not FileKind.DIR:
            raise SandboxFileError(f"{root} is not a folder")
        found: list[FileInfo] = []
        level = [(canonical, "")]
        limit = asyncio.Semaphore(LIST_CONCURRENCY)
        listed_at = time.monotonic()
        seen: dict[str, Any] = {canonical: info}
        while level:
            listed = await asyncio.gather(*(self._list_one(d, p, limit, seen) for d, p in level))
            level = []
            for entries in listed:
                for info in entries:
                    found.append(info)
                    if info.kind is FileKind.DIR:
                        level.append((f"{canonical}/{info.path}", f"{info.path}/"))
        self._listed, self._listed_at = seen, listed_at
        return sorted(found, key=lambda info: info.path)

    async def _list_one(
        self, folder: str, prefix: str, limit: asyncio.Semaphore, seen: dict[str, Any]
    ) -> list[FileInfo]:
        async with limit:
            with self.errors(folder):
                entries = await self.fs.list_files.aio(folder)
        listed = []
        for entry in entries:
            name = entry.name or PurePosixPath(entry.path).name
            seen[f"{folder}/{name}"] = entry
            kind = kind_of(entry)
            size = 0 if kind is FileKind.DIR else int(entry.size)
            listed.append(FileInfo(prefix + name, kind, size))
        return listed


def sdk_error(sdk: Any, error: BaseException, what: str) -> SandboxError:
    """A Modal exception (not a file problem) as one of ours."""
    exc = sdk.exception
    if isinstance(error, exc.ResourceExhaustedError):
        return SandboxRateLimited(f"{what}: Modal asked us to slow down ({error})")
    if isinstance(error, exc.NotFoundError | exc.SandboxTerminatedError):
        return SandboxError(f"{what} is gone (terminated or expired): {error}")
    return SandboxError(f"{what}: Modal failed ({type(error).__name__}: {error})")


def creation_error(sdk: Any, error: BaseException, what: str) -> SandboxError:
    """A Modal exception while creating something, as one sentence naming the object and the
    fix. An infrastructure error (SandboxCreateError), never the agent's."""
    exc = sdk.exception
    if isinstance(error, exc.ResourceExhaustedError):
        return sdk_error(sdk, error, what)
    if isinstance(error, exc.AuthError):
        fix = "give the worker a valid MODAL_TOKEN_ID/MODAL_TOKEN_SECRET (modal token new)"
        return SandboxCreateError(f"{what}: Modal rejected the token ({error}); {fix}")
    if isinstance(error, exc.NotFoundError) and "Secret" in str(error):
        fix = "sync the group into Modal Secrets (EVALBOT_SECRETS_SINK=modal, docs/secrets.md)"
        return SandboxCreateError(f"{what}: {error}; {fix}")
    if isinstance(error, exc.PermissionDeniedError):
        fix = "check what the token's workspace and environment allow"
        return SandboxCreateError(f"{what}: Modal refused ({error}); {fix}")
    return SandboxCreateError(f"{what}: Modal failed ({type(error).__name__}: {error})")
