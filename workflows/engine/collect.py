"""Stream a finished sandbox's outputs into the blob store's staging folder, never whole into
memory.

Only regular files are collected; symlinks are skipped (never followed), so a hostile agent cannot
make the collector copy host files. The world's changes are stored as the files that differ from
the pristine world plus a list of deleted paths (see workflows/blobs.py for the layout).

The whole collection runs in one thread, off the worker's event loop (docs/engine.md, "Collect"):
a sandbox whose files are on this host is read there by blocking calls
(`Sandbox.blocking_files`), any other through its async methods, each run on the loop from the
thread (`LoopFiles`). One thread hop per run instead of two or three per file: on a 2-core
worker the hand-offs between threads cost more CPU than the copying of small outputs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TypeVar

from pydantic import ValidationError

from workflows.providers.base import (
    BlockingFiles,
    FileInfo,
    FileKind,
    Sandbox,
    SandboxError,
    SandboxFileError,
)
from workflows.records import Usage

MAX_OUT_FILES = 10_000
MAX_OUT_BYTES = 2 << 30
MAX_USAGE_BYTES = 64 * 1024
ANSWER_FILES = ("answer.md", "answer.json")
SMALL_FILE_BYTES = 1 << 20
CHUNK_BYTES = 1 << 16
T = TypeVar("T")


@dataclass
class Collected:
    usage: Usage = field(default_factory=Usage)
    has_answer: bool = False
    notes: list[str] = field(default_factory=list)


class Stopped(Exception):
    """The collect was cancelled: its thread stops at the next file or chunk."""


class LoopFiles:
    """A sandbox's async file methods, called from the collector's thread and run on the loop.
    Once `stop` is set it starts no call, and `cancel` cancels the one in flight (or, when the
    call started before the thread could note it, the thread does once it sees `stop`): a
    cancelled collect never waits on a remote call that hangs."""

    def __init__(
        self, sandbox: Sandbox, loop: asyncio.AbstractEventLoop, stop: threading.Event
    ) -> None:
        self.sandbox = sandbox
        self.loop = loop
        self.stop = stop
        self._in_flight: concurrent.futures.Future[Any] | None = None

    def _run(self, awaitable: Awaitable[T]) -> T:
        async def wait() -> T:
            return await awaitable

        if self.stop.is_set():
            close = getattr(awaitable, "close", None)  # never awaited: no warning about it
            if close is not None:
                close()
            raise Stopped
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(wait(), self.loop)
        self._in_flight = future
        if self.stop.is_set():  # stopped after the call started but before it was noted here:
            future.cancel()  # `cancel` found nothing in flight, so this thread ends the call
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise Stopped from None

    def cancel(self) -> None:
        """From the loop: the call in flight ends now (the thread then sees `stop`)."""
        if self._in_flight is not None:
            self._in_flight.cancel()

    def read_file(self, path: str, max_bytes: int) -> bytes:
        return self._run(self.sandbox.read_file(path, max_bytes))

    def list_files(self, root: str) -> list[FileInfo]:
        return self._run(self.sandbox.list_files(root))

    def iter_file(self, path: str, chunk_size: int) -> Iterator[bytes]:
        chunks: AsyncIterator[bytes] = self.sandbox.iter_file(path, chunk_size)
        try:
            while True:
                try:
                    yield self._run(anext(chunks))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(chunks, "aclose", None)  # an async generator's: ends its reads
            if aclose is not None:
                self._run(aclose())


async def collect_outputs(sandbox: Sandbox, staging: Path, originals: dict[str, str]) -> Collected:
    """Collect /out and the world's changes into `staging`, in one thread. Cancelled, it waits
    for that thread to stop (at its next file or chunk), so that nothing writes into `staging`
    once this returns."""
    stop = threading.Event()
    files = sandbox.blocking_files() or LoopFiles(sandbox, asyncio.get_running_loop(), stop)
    work = asyncio.ensure_future(
        asyncio.to_thread(collect_blocking, files, staging, originals, stop)
    )
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        stop.set()
        if isinstance(files, LoopFiles):
            files.cancel()
        with contextlib.suppress(Exception):
            await work
        raise


def collect_blocking(
    files: BlockingFiles, staging: Path, originals: dict[str, str], stop: threading.Event
) -> Collected:
    collected = Collected()
    out = staging / "out"
    out.mkdir(parents=True, exist_ok=True)
    _collect_out(files, out, collected, stop)
    _collect_world(files, staging, originals, collected, stop)
    collected.has_answer = _has_answer(out)
    collected.usage = _read_usage(out / "usage.json", collected.notes)
    return collected


def _collect_out(
    files: BlockingFiles, out_dir: Path, collected: Collected, stop: threading.Event
) -> None:
    total, count = 0, 0
    for info in _list(files, "/out", collected):
        relative = _regular_file(info, "/out", collected)
        if relative is None:
            continue
        if count >= MAX_OUT_FILES or total + info.size > MAX_OUT_BYTES:
            collected.notes.append(f"skipped /out/{info.path}: output limit reached")
            continue
        _stream(files, f"/out/{info.path}", out_dir / relative, info.size, stop)
        total, count = total + info.size, count + 1


def _collect_world(
    files: BlockingFiles,
    staging: Path,
    originals: dict[str, str],
    collected: Collected,
    stop: threading.Event,
) -> None:
    """Keep the files whose content differs from the pristine world (new ones included)."""
    changes = staging / "world_changes"
    present: set[str] = set()
    for info in _list(files, "/world", collected):
        relative = _regular_file(info, "/world", collected)
        if relative is None:
            continue
        present.add(info.path)
        source = f"/world/{info.path}"
        original = originals.get(info.path)
        if original is not None and _sha256(files, source, info.size, stop) == original:
            continue  # unchanged: read, never written
        _stream(files, source, changes / relative, info.size, stop)
    deleted = sorted(set(originals) - present)
    (staging / "world_deleted.json").write_text(json.dumps(deleted))


def _stream(files: BlockingFiles, source: str, dest: Path, size: int, stop: threading.Event) -> str:
    """Copy one sandbox file to `dest`; returns its sha256. A file listed as small is read in one
    call and written in one write, larger ones (or one that grew since) chunk by chunk: a file is
    never held whole in memory beyond SMALL_FILE_BYTES."""
    data = _read_small(files, source, size, stop)
    if data is not None:
        _write_all(dest, [data])
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    buffered: list[bytes] = []
    size = 0
    handle: BinaryIO | None = None
    try:
        for chunk in _chunks(files, source, stop):
            digest.update(chunk)
            if handle is None and size + len(chunk) <= SMALL_FILE_BYTES:
                buffered.append(chunk)
                size += len(chunk)
                continue
            if handle is None:
                handle = _open_with(dest, buffered)
            handle.write(chunk)
        if handle is None:
            _write_all(dest, buffered)
    finally:
        if handle is not None:
            handle.close()
    return digest.hexdigest()


def _sha256(files: BlockingFiles, source: str, size: int, stop: threading.Event) -> str:
    data = _read_small(files, source, size, stop)
    if data is not None:
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    for chunk in _chunks(files, source, stop):
        digest.update(chunk)
    return digest.hexdigest()


def _chunks(files: BlockingFiles, source: str, stop: threading.Event) -> Iterator[bytes]:
    chunks = files.iter_file(source, CHUNK_BYTES)
    try:
        for chunk in chunks:
            if stop.is_set():
                raise Stopped
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def _read_small(
    files: BlockingFiles, source: str, size: int, stop: threading.Event
) -> bytes | None:
    """The file in one read if it was listed as small and still is; None means "stream it" (the
    streaming read then reports whatever is wrong with the file)."""
    if stop.is_set():
        raise Stopped
    if size > SMALL_FILE_BYTES:
        return None
    try:
        return files.read_file(source, SMALL_FILE_BYTES)
    except SandboxFileError:
        return None


def _open_with(dest: Path, chunks: list[bytes]) -> BinaryIO:
    """`dest` opened for writing, its folder made first if it is missing (most files of a run
    land in a folder made already: a mkdir each would lock that folder for nothing)."""
    try:
        handle = dest.open("wb")
    except FileNotFoundError:
        dest.parent.mkdir(parents=True, exist_ok=True)
        handle = dest.open("wb")
    handle.writelines(chunks)
    return handle


def _write_all(dest: Path, chunks: list[bytes]) -> None:
    with _open_with(dest, chunks):
        pass


def _has_answer(out: Path) -> bool:
    return any((out / name).is_file() and (out / name).stat().st_size > 0 for name in ANSWER_FILES)


def _list(files: BlockingFiles, root: str, collected: Collected) -> list[FileInfo]:
    try:
        return files.list_files(root)
    except SandboxError as error:
        collected.notes.append(f"could not list {root}: {error}")
        return []


def _safe_relative(path: str) -> Path | None:
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
        return None
    return Path(*parts)


def _regular_file(info: FileInfo, root: str, collected: Collected) -> Path | None:
    if info.kind is FileKind.SYMLINK:
        collected.notes.append(f"skipped symlink {root}/{info.path}")
        return None
    if info.kind is not FileKind.FILE:
        return None
    relative = _safe_relative(info.path)
    if relative is None:
        collected.notes.append(f"skipped unsafe path {root}/{info.path}")
    return relative


def _read_usage(path: Path, notes: list[str]) -> Usage:
    if not path.is_file():
        return Usage()
    if path.stat().st_size > MAX_USAGE_BYTES:
        notes.append("usage.json is too large; usage not recorded")
        return Usage()
    try:
        return Usage.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, ValidationError):
        notes.append("usage.json is not valid; usage not recorded")
        return Usage()
