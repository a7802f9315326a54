"""Network namespaces reused from sandbox to sandbox (local/network_pool.py, launch.c's
`--hold-network` and `--network`): a started sandbox has a namespace of its own with only its
loopback; two live sandboxes never share one; a namespace serves the next sandbox only once
the one before is torn down, with nothing of it left listening; one whose sandbox another worker
tore down is taken back; and nothing ever starts with the host's network instead."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tests.workflows.providers.kits import Kit, run_to_end
from workflows.providers.base import SandboxError
from workflows.providers.common.folder import FolderSandbox
from workflows.providers.common.native_runner import find_compiler
from workflows.providers.local import LocalProvider
from workflows.providers.local.local_provider import LocalSandbox
from workflows.providers.local.network_pool import NetworkPool
from workflows.providers.spawner import RunnerSpawner

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root, like the provider"),
    pytest.mark.skipif(find_compiler() is None, reason="no C compiler here"),
]

PORT = 47823
LISTEN = (
    'python3 -c "import socket, time; s = socket.socket(); '
    f"s.bind(('127.0.0.1', {PORT})); s.listen(); open('/out/up', 'w').write('up'); "
    'time.sleep(60)"'
)
CONNECT = (
    'python3 -c "import socket; s = socket.socket(); '
    f"print(s.connect_ex(('127.0.0.1', {PORT})))\" > /out/connect.txt"
)


def namespace_of(fd_or_pid: str) -> str:
    return os.readlink(f"/proc/{fd_or_pid}/ns/net")


def descriptor_namespace(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


async def runner_namespace(sandbox: FolderSandbox) -> str:
    runner = await sandbox.known_runner()
    assert runner is not None
    return namespace_of(str(runner["pid"]))


async def wait_for(sandbox: FolderSandbox, path: str) -> None:
    for _ in range(200):
        try:
            await sandbox.read_file(path)
            return
        except (SandboxError, FileNotFoundError, OSError):
            await asyncio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


async def connect_result(local_kit: Kit) -> tuple[str, str]:
    """(what connecting to PORT gave inside a new sandbox, its namespace)."""
    sandbox = await local_kit.provider.create(local_kit.spec())
    assert isinstance(sandbox, FolderSandbox)
    try:
        await sandbox.start(f"{CONNECT}; sleep 30")
        await wait_for(sandbox, "/out/connect.txt")
        said = (await sandbox.read_file("/out/connect.txt")).decode().strip()
        return said, await runner_namespace(sandbox)
    finally:
        await sandbox.terminate()


async def test_a_sandbox_has_a_pooled_namespace_with_only_a_loopback(local_kit: Kit) -> None:
    provider = local_kit.provider
    assert isinstance(provider, LocalProvider)
    provider.check_host()
    assert provider.networks is not None
    sandbox = await provider.create(local_kit.spec())
    try:
        state = await run_to_end(sandbox, "cat /proc/net/dev > /out/dev.txt")
        devices = (await sandbox.read_file("/out/dev.txt")).decode().splitlines()[2:]
        log = sandbox.layout.log.read_text()
    finally:
        await sandbox.terminate()
    assert state["exit_code"] == 0
    assert [line.split(":")[0].strip() for line in devices] == ["lo"]
    assert "launch:" not in log  # joined, nothing fell back


async def test_live_sandboxes_never_share_and_the_next_finds_nothing_left(local_kit: Kit) -> None:
    """A listens on the loopback. B, started while A lives, cannot reach it (another namespace).
    Once A is torn down, its namespace serves the next sandbox, which finds nothing listening."""
    provider = local_kit.provider
    assert isinstance(provider, LocalProvider)
    provider.check_host()
    assert provider.networks is not None
    listener = await provider.create(local_kit.spec())
    assert isinstance(listener, FolderSandbox)
    try:
        await listener.start(LISTEN)
        await wait_for(listener, "/out/up")
        listening_in = await runner_namespace(listener)
        while_alive = await connect_result(local_kit)
    finally:
        await listener.terminate()
    idle, _ = provider.networks.sizes
    afterwards = [await connect_result(local_kit) for _ in range(idle)]
    host = namespace_of("self")
    assert listening_in != host and while_alive[1] not in (host, listening_in)
    assert while_alive[0] != "0"  # refused: not A's loopback
    reused = [said for said, namespace in afterwards if namespace == listening_in]
    assert reused, "A's namespace never served another sandbox"
    assert reused[0] != "0"  # nothing of A is left listening in it


async def test_a_namespace_whose_sandbox_is_gone_is_taken_back(
    tmp_path: Path, native_programs: tuple[Path, Path]
) -> None:
    """A sandbox another worker tore down never comes back by `release`: when none is idle, the
    pool takes back those whose sandbox is gone, and makes a new one for the others."""
    gone: set[str] = set()
    pool = NetworkPool(native_programs[1], lambda sandbox_id: sandbox_id in gone)
    try:
        first = await pool.claim("a")
        assert first is not None
        second = await pool.claim("b")  # a is not gone: a new namespace
        gone.add("a")
        third = await pool.claim("c")  # none idle: a's is taken back
        again = await pool.claim("c")  # c's own, whatever else is idle
        assert second is not None and third is not None and again is not None
        seen = [descriptor_namespace(fd) for fd in (first, second, third, again)]
        for fd in (first, second, third, again):
            os.close(fd)
        assert seen[0] != seen[1] and seen[2] == seen[0] and seen[3] == seen[2]
        assert pool.sizes == (0, 2)
        pool.release("b")
        assert pool.sizes == (1, 1)
    finally:
        pool.close()
    assert pool.sizes == (0, 0)


async def test_a_pool_whose_holder_cannot_run_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pool = NetworkPool(tmp_path / "no-launcher", lambda sandbox_id: False)
    assert await pool.claim("a") is None
    assert any("its own network namespace" in r.getMessage() for r in caplog.records)
    caplog.clear()
    assert await pool.claim("b") is None
    assert not caplog.records


def test_the_launcher_starts_nothing_when_it_cannot_join(
    tmp_path: Path, native_programs: tuple[Path, Path]
) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        [str(native_programs[1]), "--network", "99", "--", "touch", str(marker)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 70
    assert "could not join the sandbox's network namespace" in done.stderr
    assert not marker.exists()


async def test_a_spawner_without_the_launcher_refuses_a_network(
    tmp_path: Path, native_programs: tuple[Path, Path]
) -> None:
    """Only the launcher joins a namespace; a forking spawner would start bubblewrap with the
    host's network, so it starts nothing."""
    pool = NetworkPool(native_programs[1], lambda sandbox_id: False)
    spawner = RunnerSpawner("/usr/bin/python3")
    marker, log = tmp_path / "ran", tmp_path / "log"
    network = await pool.claim("a")
    assert network is not None
    try:
        with pytest.raises(SandboxError, match="only the launcher"):
            await spawner.spawn_exec(
                ["touch", str(marker)], env={"PATH": "/usr/bin:/bin"}, log=log, network=network
            )
    finally:
        os.close(network)
        spawner.close()
        pool.close()
    await asyncio.sleep(0.2)
    assert not marker.exists()


async def test_a_teardown_whose_kill_fails_keeps_the_namespace_from_others(
    local_kit: Kit, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace goes back to the pool on the kill's evidence only: a teardown that could not
    kill every process gives it to no other sandbox."""
    provider = local_kit.provider
    assert isinstance(provider, LocalProvider)
    provider.check_host()
    assert provider.networks is not None
    sandbox = await provider.create(local_kit.spec())
    assert isinstance(sandbox, LocalSandbox)
    await sandbox.start("sleep 30")
    idle_before, _ = provider.networks.sizes

    async def would_not_die(self: object, timeout_s: float = 10.0) -> bool:
        return False

    monkeypatch.setattr(type(sandbox.cgroups), "kill_all", would_not_die)
    with pytest.raises(SandboxError, match="would not die"):
        await sandbox.terminate()
    idle_after_failure, _ = provider.networks.sizes
    monkeypatch.undo()
    await sandbox.terminate()
    assert idle_after_failure == idle_before
    assert provider.networks.sizes[0] == idle_before + 1
