"""Collecting a finished sandbox: every /out file copied byte for byte (small ones in one write,
large ones chunk by chunk), and of the world only what changed."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from workflows.catalog.hashing import tree_hashes
from workflows.engine.collect import SMALL_FILE_BYTES, collect_outputs
from workflows.providers.base import FileInfo, SandboxSpec
from workflows.providers.process import ProcessProvider, ProcessSandbox


async def test_out_is_copied_whole_and_only_world_changes_are_kept(tmp_path: Path) -> None:
    world = tmp_path / "world"
    (world / "docs").mkdir(parents=True)
    for name in ("same.md", "edited.md", "removed.md"):
        (world / "docs" / name).write_text(f"pristine {name}\n")
    (tmp_path / "repo").mkdir()
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    spec = SandboxSpec(
        run_id="e/c/a/0", image=str(tmp_path / "repo"), world_dir=world, case_files={}
    )
    sandbox = await provider.create(spec)

    big = os.urandom(SMALL_FILE_BYTES * 2 + 123)  # crosses from buffering to streaming
    await sandbox.write_file("/out/answer.md", b"the answer\n")
    await sandbox.write_file("/out/logs/big.bin", big)
    await sandbox.write_file("/out/usage.json", json.dumps({"cost_usd": 0.5}).encode())
    await sandbox.write_file("/world/docs/edited.md", b"edited by the agent\n")
    await sandbox.write_file("/world/docs/new.md", b"created by the agent\n")
    (sandbox.layout.world / "docs" / "removed.md").unlink()

    staging = tmp_path / "staging"
    collected = await collect_outputs(sandbox, staging, tree_hashes(world))

    assert (staging / "out" / "answer.md").read_bytes() == b"the answer\n"
    assert (staging / "out" / "logs" / "big.bin").read_bytes() == big
    changes = staging / "world_changes"
    assert sorted(p.relative_to(changes).as_posix() for p in changes.rglob("*.md")) == [
        "docs/edited.md",
        "docs/new.md",
    ]
    assert (changes / "docs" / "edited.md").read_bytes() == b"edited by the agent\n"
    assert json.loads((staging / "world_deleted.json").read_text()) == ["docs/removed.md"]
    assert collected.has_answer
    assert collected.usage.cost_usd == 0.5


async def a_sandbox_with_outputs(tmp_path: Path) -> tuple[ProcessSandbox, dict[str, str]]:
    world = tmp_path / "world"
    world.mkdir()
    (world / "kept.md").write_text("pristine\n")
    (tmp_path / "repo").mkdir()
    provider = ProcessProvider(tmp_path / "sandboxes", tmp_path / "images", allowed=True)
    spec = SandboxSpec(
        run_id="e/c/a/1", image=str(tmp_path / "repo"), world_dir=world, case_files={}
    )
    sandbox = await provider.create(spec)
    await sandbox.write_file("/out/answer.md", b"42\n")
    await sandbox.write_file("/out/transcript.jsonl", os.urandom(SMALL_FILE_BYTES * 3))
    await sandbox.write_file("/world/kept.md", b"changed\n")
    return sandbox, tree_hashes(world)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_a_sandbox_without_host_files_is_collected_the_same_through_the_loop(
    tmp_path: Path,
) -> None:
    """Modal's sandboxes have no blocking file access: the collector's thread calls their async
    methods on the loop (LoopFiles) and must store exactly what the host path stores."""
    sandbox, originals = await a_sandbox_with_outputs(tmp_path)
    assert sandbox.blocking_files() is not None
    direct = await collect_outputs(sandbox, tmp_path / "direct", originals)
    listed: list[str] = []
    list_files = sandbox.list_files

    async def counted_list(root: str) -> list[FileInfo]:
        listed.append(root)
        return await list_files(root)

    sandbox.blocking_files = lambda: None  # type: ignore[method-assign]
    sandbox.list_files = counted_list  # type: ignore[method-assign]
    bridged = await collect_outputs(sandbox, tmp_path / "bridged", originals)
    assert listed == ["/out", "/world"]  # through the async methods, on the loop
    assert tree(tmp_path / "bridged") == tree(tmp_path / "direct")
    assert sorted(tree(tmp_path / "direct")) == [
        "out/answer.md",
        "out/transcript.jsonl",
        "world_changes/kept.md",
        "world_deleted.json",
    ]
    assert (bridged.has_answer, bridged.notes) == (direct.has_answer, direct.notes) == (True, [])


async def test_a_cancelled_collect_writes_nothing_after_it_returns(tmp_path: Path) -> None:
    """The collection runs in a thread that asyncio cannot cancel: cancelling the collect must
    stop that thread before the cancellation returns, or a retry's fresh staging folder would
    get this attempt's files."""
    sandbox, originals = await a_sandbox_with_outputs(tmp_path)
    chunks_read = 0
    streaming = asyncio.Event()
    original_iter = sandbox.iter_file

    async def slow_iter(path: str, chunk_size: int = 1 << 16) -> AsyncIterator[bytes]:
        nonlocal chunks_read
        async for chunk in original_iter(path, chunk_size):
            chunks_read += 1
            if chunks_read == 20:  # of the transcript's 48
                streaming.set()
            await asyncio.sleep(0.01)
            yield chunk

    sandbox.blocking_files = lambda: None  # type: ignore[method-assign]
    sandbox.iter_file = slow_iter  # type: ignore[method-assign]
    staging = tmp_path / "staging"
    collecting = asyncio.create_task(collect_outputs(sandbox, staging, originals))
    waiting = asyncio.create_task(streaming.wait())
    await asyncio.wait({waiting, collecting}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    assert streaming.is_set(), "the collect never streamed the transcript"
    collecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await collecting
    written = tree(staging)
    read_then = chunks_read
    await asyncio.sleep(0.3)
    assert tree(staging) == written
    assert chunks_read == read_then
    assert "world_deleted.json" not in written  # it stopped before the world


async def test_a_cancelled_collect_does_not_wait_on_a_remote_call_that_hangs(
    tmp_path: Path,
) -> None:
    """Through the loop (Modal), the collector's thread waits on each call: a cancelled collect
    cancels the call in flight instead of waiting for it, however long it would hang."""
    sandbox, originals = await a_sandbox_with_outputs(tmp_path)
    listing = asyncio.Event()

    async def hanging_list(root: str) -> list[FileInfo]:
        listing.set()
        await asyncio.sleep(60)  # a broken build fails after 10 s and frees its thread here
        return []

    sandbox.blocking_files = lambda: None  # type: ignore[method-assign]
    sandbox.list_files = hanging_list  # type: ignore[method-assign]
    collecting = asyncio.create_task(collect_outputs(sandbox, tmp_path / "staging", originals))
    await asyncio.wait_for(listing.wait(), 30)
    collecting.cancel()
    done, _ = await asyncio.wait({collecting}, timeout=10)
    assert collecting in done, "the cancelled collect still waits on the hanging call"
    assert collecting.cancelled()


async def test_a_collect_cancelled_before_its_thread_notes_the_call_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the test above can lose on a loaded machine: the call starts on the loop and the
    collect is cancelled before the collector's thread has noted the call as in flight, so the
    cancel finds nothing to cancel. The thread then sees `stop` and ends the call itself."""
    sandbox, originals = await a_sandbox_with_outputs(tmp_path)
    listing = asyncio.Event()
    cancel_handled = threading.Event()

    async def hanging_list(root: str) -> list[FileInfo]:
        listing.set()
        await asyncio.sleep(60)  # a broken build fails after 10 s and frees its thread here
        return []

    start_call = asyncio.run_coroutine_threadsafe

    def descheduled_after_start(coroutine: Any, loop: asyncio.AbstractEventLoop) -> Any:
        started = start_call(coroutine, loop)
        cancel_handled.wait(30)  # the thread runs again only once the cancel has been handled
        return started

    monkeypatch.setattr(asyncio, "run_coroutine_threadsafe", descheduled_after_start)
    sandbox.blocking_files = lambda: None  # type: ignore[method-assign]
    sandbox.list_files = hanging_list  # type: ignore[method-assign]
    collecting = asyncio.create_task(collect_outputs(sandbox, tmp_path / "staging", originals))
    await asyncio.wait_for(listing.wait(), 30)
    collecting.cancel()
    await asyncio.sleep(0.1)  # the collect sets `stop`, finds no call in flight, waits
    cancel_handled.set()
    done, _ = await asyncio.wait({collecting}, timeout=10)
    assert collecting in done, "the cancelled collect still waits on the hanging call"
    assert collecting.cancelled()
