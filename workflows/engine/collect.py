"""Stream a finished sandbox's outputs into the blob store, never whole into memory.

Only regular files are collected; symlinks are skipped (never followed), so a hostile agent cannot
make the collector copy host files. The world's changes are stored as the files that differ from
the pristine world plus a list of deleted paths (see workflows/blobs.py for the layout).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pydantic import ValidationError

from workflows.providers.base import FileInfo, FileKind, Sandbox, SandboxError, SandboxFileError
from workflows.records import Usage

MAX_OUT_FILES = 10_000
MAX_OUT_BYTES = 2 << 30
MAX_USAGE_BYTES = 64 * 1024
ANSWER_FILES = ("answer.md", "answer.json")
SMALL_FILE_BYTES = 1 << 20


@dataclass
class Collected:
    usage: Usage = field(default_factory=Usage)
    has_answer: bool = False
    notes: list[str] = field(default_factory=list)


def _safe_relative(path: str) -> Path | None:
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts:
        return None
    return Path(*parts)


async def _stream(sandbox: Sandbox, source: str, dest: Path, size: int) -> str:
    """Copy one sandbox file to `dest`; returns its sha256. A file listed as small is read in one
    call and written with one thread hop, larger ones (or one that grew since) chunk by chunk:
    file I/O never blocks the worker's event loop and a file is never held whole in memory beyond
    SMALL_FILE_BYTES."""
    data = await _read_small(sandbox, source, size)
    if data is not None:
        await asyncio.to_thread(_write_all, dest, [data])
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    buffered: list[bytes] = []
    size = 0
    handle: BinaryIO | None = None
    try:
        async for chunk in sandbox.iter_file(source):
            digest.update(chunk)
            if handle is None and size + len(chunk) <= SMALL_FILE_BYTES:
                buffered.append(chunk)
                size += len(chunk)
                continue
            if handle is None:
                handle = await asyncio.to_thread(_open_with, dest, buffered)
            await asyncio.to_thread(handle.write, chunk)
        if handle is None:
            await asyncio.to_thread(_write_all, dest, buffered)
    finally:
        if handle is not None:
            await asyncio.to_thread(handle.close)
    return digest.hexdigest()


async def _sha256(sandbox: Sandbox, source: str, size: int) -> str:
    data = await _read_small(sandbox, source, size)
    if data is not None:
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    async for chunk in sandbox.iter_file(source):
        digest.update(chunk)
    return digest.hexdigest()


async def _read_small(sandbox: Sandbox, source: str, size: int) -> bytes | None:
    """The file in one read if it was listed as small and still is; None means "stream it" (the
    streaming read then reports whatever is wrong with the file)."""
    if size > SMALL_FILE_BYTES:
        return None
    try:
        return await sandbox.read_file(source, SMALL_FILE_BYTES)
    except SandboxFileError:
        return None


def _open_with(dest: Path, chunks: list[bytes]) -> BinaryIO:
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle = dest.open("wb")
    handle.writelines(chunks)
    return handle


def _write_all(dest: Path, chunks: list[bytes]) -> None:
    with _open_with(dest, chunks):
        pass


async def collect_outputs(sandbox: Sandbox, staging: Path, originals: dict[str, str]) -> Collected:
    collected = Collected()
    await _collect_out(sandbox, staging / "out", collected)
    await _collect_world(sandbox, staging, originals, collected)
    out = staging / "out"
    collected.has_answer = await asyncio.to_thread(_has_answer, out)
    collected.usage = await asyncio.to_thread(_read_usage, out / "usage.json", collected.notes)
    return collected


def _has_answer(out: Path) -> bool:
    return any((out / name).is_file() and (out / name).stat().st_size > 0 for name in ANSWER_FILES)


async def _collect_out(sandbox: Sandbox, out_dir: Path, collected: Collected) -> None:
    await asyncio.to_thread(out_dir.mkdir, parents=True, exist_ok=True)
    total, count = 0, 0
    for info in await _list(sandbox, "/out", collected):
        relative = _regular_file(info, "/out", collected)
        if relative is None:
            continue
        if count >= MAX_OUT_FILES or total + info.size > MAX_OUT_BYTES:
            collected.notes.append(f"skipped /out/{info.path}: output limit reached")
            continue
        await _stream(sandbox, f"/out/{info.path}", out_dir / relative, info.size)
        total, count = total + info.size, count + 1


async def _collect_world(
    sandbox: Sandbox,
    staging: Path,
    originals: dict[str, str],
    collected: Collected,
) -> None:
    """Keep the files whose content differs from the pristine world (new ones included)."""
    changes = staging / "world_changes"
    present: set[str] = set()
    for info in await _list(sandbox, "/world", collected):
        relative = _regular_file(info, "/world", collected)
        if relative is None:
            continue
        present.add(info.path)
        source = f"/world/{info.path}"
        original = originals.get(info.path)
        if original is not None and await _sha256(sandbox, source, info.size) == original:
            continue  # unchanged: read, never written
        await _stream(sandbox, source, changes / relative, info.size)
    deleted = sorted(set(originals) - present)
    await asyncio.to_thread((staging / "world_deleted.json").write_text, json.dumps(deleted))


async def _list(sandbox: Sandbox, root: str, collected: Collected) -> list[FileInfo]:
    try:
        return await sandbox.list_files(root)
    except SandboxError as error:
        collected.notes.append(f"could not list {root}: {error}")
        return []


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
