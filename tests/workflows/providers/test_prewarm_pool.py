"""The warm pool of the `local` provider: a claim makes a working sandbox with the spec's world,
case and disk limit; the pool refills; specs it cannot fit are created the ordinary way; workers
share the pool; draining leaves nothing behind."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.workflows.providers.kits import Kit, run_to_end, tree
from workflows.providers.local import LocalProvider, LocalSandbox

pytestmark = pytest.mark.timeout(120)

FREE_SPACE = "import json, os; s = os.statvfs('/out'); print(s.f_bavail * s.f_frsize >> 20)"


@pytest.fixture
async def pooled(local_kit: Kit, tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = LocalProvider(
        tmp_path / "sandboxes", local_kit.base / "images", start_timeout_s=20, warm_pool_size=2
    )
    assert provider.pool is not None
    yield provider
    await provider.pool.drain()


async def answer_and_free_mb(sandbox: LocalSandbox) -> int:
    """Run the trivial agent, then report the free room on /out in MiB."""
    state = await run_to_end(sandbox, f'python3 answer.py > /dev/null && python3 -c "{FREE_SPACE}"')
    assert state["exit_code"] == 0, await sandbox.read_file("/out/stderr.log")
    assert await sandbox.read_file("/out/answer.md")
    return int(await sandbox.read_file("/out/stdout.log"))


async def test_a_claim_is_a_complete_sandbox_and_the_pool_refills(
    local_kit: Kit, pooled: LocalProvider
) -> None:
    assert pooled.pool is not None
    assert await pooled.pool.fill() == 2
    ready = pooled.pool.ready()
    sandbox = await pooled.create(local_kit.spec(run_id="exp/pooled/a/0"))  # default limits
    try:
        assert sandbox.id in ready  # claimed, not made
        assert sandbox.meta["run_id"] == "exp/pooled/a/0"
        # its id names the pool, not the run: its run is found through its metadata
        assert await pooled.sandboxes_of("exp/pooled/a/0") == [sandbox.id]
        assert await pooled.sandboxes_of("exp/pooled/a/1") == []
        assert tree(sandbox.layout.world) == tree(local_kit.world)
        assert json.loads(await sandbox.read_file("/case/case.json"))["id"] == "case-1"
        assert 1020 <= await answer_and_free_mb(sandbox) <= 1026  # the spec's disk_mb (1024)
    finally:
        await sandbox.terminate()
    assert pooled.pool._refill is not None
    await pooled.pool._refill
    assert len(pooled.pool.ready()) == 2 and sandbox.id not in pooled.pool.ready()
    assert not os.path.ismount(sandbox.layout.root)


async def test_what_the_pool_cannot_fit_is_created_as_usual(
    local_kit: Kit, pooled: LocalProvider
) -> None:
    assert pooled.pool is not None
    await pooled.pool.fill()
    before = pooled.pool.ready()
    big = await pooled.create(local_kit.spec(disk_mb=5000))
    try:
        assert big.id not in before and big.id.startswith("exp-case-arm-0-")
        assert pooled.pool.ready() == before
    finally:
        await big.terminate()


async def test_workers_share_the_pool_and_draining_leaves_nothing(
    local_kit: Kit, pooled: LocalProvider, tmp_path: Path
) -> None:
    assert pooled.pool is not None
    await pooled.pool.fill()
    ready = pooled.pool.ready()
    other = LocalProvider(
        tmp_path / "sandboxes", local_kit.base / "images", start_timeout_s=20, warm_pool_size=1
    )
    sandbox = await other.create(local_kit.spec())
    await sandbox.terminate()
    assert sandbox.id in ready
    assert other.pool is not None and other.pool._refill is not None
    other.pool._refill.cancel()
    await pooled.pool.drain()
    assert pooled.pool.ready() == []
    leftovers = [p for p in (tmp_path / "sandboxes").iterdir() if not p.name.startswith(".")]
    assert [p for p in leftovers if os.path.ismount(p)] == []


async def test_a_shell_that_cannot_be_attached_is_removed_not_left_mounted(
    local_kit: Kit, pooled: LocalProvider, tmp_path: Path
) -> None:
    """A shell whose metadata is unreadable is dropped by the next claim, and its disk, mount,
    cgroups and uid go with it (before, only the pool's entry did)."""
    assert pooled.pool is not None
    await pooled.pool.fill()
    broken = pooled.pool.ready()[0]
    shell = await pooled.attach(broken)
    shell.layout.meta.write_text("{not json")
    assert os.path.ismount(shell.layout.root)

    claimed: list[LocalSandbox] = []
    while broken in pooled.pool.ready():  # claims take the ready shells in order
        claimed.append(await pooled.create(local_kit.spec(f"exp/case/arm/{len(claimed)}")))

    assert not os.path.ismount(shell.layout.root) and not shell.layout.root.exists()
    assert not shell.disk_image.exists() and not shell.cgroups.exists()
    assert pooled.slots.uid_of(broken) is None  # its uid claim is freed
    for sandbox in claimed:
        await sandbox.terminate()
