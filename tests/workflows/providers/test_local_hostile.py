"""Hostile agents (tests/fakes/agents/) in `local` sandboxes: each is contained, quickly, and the
host is untouched afterwards (no processes, cgroups, mounts or files left behind). Every test runs
three times: with this host's cgroups, in no-cgroup mode (rlimits), and with the Python runner of
hosts without a C compiler (`mode_kit`, conftest.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.workflows.providers.kits import Kit, host_pids_matching, run_to_end, wait_state
from workflows.prewarm.image_label import image_path
from workflows.providers.base import FileKind
from workflows.providers.common import RUNNER
from workflows.providers.local import LocalSandbox
from workflows.providers.local.cgroups import CONTROLLERS, CgroupSet

pytestmark = pytest.mark.timeout(120)

Run = Callable[..., Awaitable[tuple[LocalSandbox, dict[str, Any]]]]


def uid_processes(uid: int) -> list[int]:
    """Live processes of `uid` (zombies hold nothing; this host's init reaps them lazily)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if f"\nUid:\t{uid}\t" in status and "\nState:\tZ" not in status:
                found.append(int(entry.name))
    return found


async def assert_host_clean(kit: Kit, sandbox: LocalSandbox) -> None:
    for _ in range(50):  # the last zombies are reaped a moment later
        if not uid_processes(sandbox.uid):
            break
        await asyncio.sleep(0.05)
    assert uid_processes(sandbox.uid) == []
    assert not sandbox.cgroups.exists()
    if isinstance(sandbox.cgroups, CgroupSet):
        for controller in CONTROLLERS:
            assert not sandbox.cgroups.path(controller).exists()
    assert not os.path.ismount(sandbox.layout.root)
    assert not sandbox.layout.root.exists()
    assert not sandbox.disk_image.exists()
    assert sandbox.provider.slots.uid_of(sandbox.id) is None  # its uid claim is freed


@pytest.fixture
async def run_hostile(mode_kit: Kit) -> AsyncIterator[Run]:
    """Run a command to the end in a fresh sandbox; terminate it and check the host afterwards."""
    made: list[LocalSandbox] = []

    async def run(command: str, **limits: Any) -> tuple[LocalSandbox, dict[str, Any]]:
        sandbox = await mode_kit.provider.create(mode_kit.spec(**limits))
        assert isinstance(sandbox, LocalSandbox)
        made.append(sandbox)
        return sandbox, await run_to_end(sandbox, command, timeout_s=60)

    yield run
    for sandbox in made:
        await sandbox.terminate()
        await assert_host_clean(mode_kit, sandbox)


def with_cgroups(sandbox: LocalSandbox) -> bool:
    return sandbox.provider.backend.mode != "none"


async def result_of(sandbox: LocalSandbox) -> Any:
    return json.loads(await sandbox.read_file("/out/result.json", max_bytes=64 << 20))


async def out_text(sandbox: LocalSandbox) -> bytes:
    """Everything the agent left in /out, concatenated."""
    text = b""
    for info in await sandbox.list_files("/out"):
        if info.kind is FileKind.FILE:
            text += await sandbox.read_file(f"/out/{info.path}", max_bytes=64 << 20)
    return text


async def test_no_network_not_even_the_hosts_loopback(run_hostile: Run) -> None:
    accepted: list[bytes] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        sandbox, state = await run_hostile(f"python3 agents/network.py 127.0.0.1 {port}")
        await asyncio.sleep(0.1)
    attempts = await result_of(sandbox)
    assert state["exit_code"] == 0
    assert f"127.0.0.1:{port}" in attempts and len(attempts) == 4
    assert all(outcome.startswith("failed") for outcome in attempts.values()), attempts
    assert accepted == []


async def test_host_environment_and_home_folders_stay_hidden(
    run_hostile: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_marker, file_marker = f"env-{secrets.token_hex(8)}", f"file-{secrets.token_hex(8)}"
    monkeypatch.setenv("EVALBOT_HOSTILE_MARKER", env_marker)  # the worker's own environment
    fake_root = tmp_path / "fake-root"
    (fake_root / ".ssh").mkdir(parents=True)
    (fake_root / ".ssh" / "id_ed25519").write_text(f"PRIVATE KEY {file_marker}\n")
    sandbox, state = await run_hostile(f"python3 agents/snoop.py {fake_root} {tmp_path}")
    assert state["exit_code"] == 0
    seen = await result_of(sandbox)
    everything = await out_text(sandbox)
    assert env_marker.encode() not in everything
    assert file_marker.encode() not in everything
    assert set(seen["env"]) <= {
        "PATH", "HOME", "TMPDIR", "LANG", "USER", "LOGNAME", "PWD", "SHLVL", "_",
        "EVALBOT_TEST_SECRET", "EVALBOT_REPO_DIR", "EVALBOT_WORLD_DIR", "EVALBOT_CASE_DIR",
        "EVALBOT_OUT_DIR",
    }  # fmt: skip
    assert not any(path.startswith(("/root/", "/home/", "/work/")) for path in seen["files"])
    assert seen["files"][str(fake_root)].startswith("<")  # an error, not content
    assert seen["files"]["/proc/1/environ"].startswith("<")  # the runner is not readable


async def test_writes_outside_out_and_world_fail(run_hostile: Run, mode_kit: Kit) -> None:
    runner_before = hashlib.sha256(RUNNER.read_bytes()).hexdigest()
    image_before = sorted(p.name for p in Path(image_path(mode_kit.image)).iterdir())
    sandbox, _ = await run_hostile("python3 agents/escape_writes.py")
    attempts = await result_of(sandbox)
    private = attempts.pop("/tmp/private.txt")
    assert private == "written"  # its own tmpfs, gone with the sandbox
    assert attempts and all(outcome.startswith("failed") for outcome in attempts.values()), attempts
    assert hashlib.sha256(RUNNER.read_bytes()).hexdigest() == runner_before
    assert sorted(p.name for p in Path(image_path(mode_kit.image)).iterdir()) == image_before
    assert not any(info.path.startswith("escaped") for info in await sandbox.list_files("/case"))
    assert not Path("/escaped.txt").exists() and not Path("/tmp/private.txt").exists()


async def test_fork_bomb_is_contained_by_the_pids_limit(mode_kit: Kit) -> None:
    sandbox = await mode_kit.provider.create(mode_kit.spec(pids=48, wall_timeout_s=3))
    assert isinstance(sandbox, LocalSandbox)
    try:
        started = time.monotonic()
        await sandbox.start("python3 agents/fork_bomb.py")
        await asyncio.sleep(1.0)  # the bomb is at its limit by now
        assert len(sandbox.cgroups.pids()) <= 48
        for _ in range(20):  # the host can still fork
            done = await asyncio.create_subprocess_exec("true")
            assert await done.wait() == 0
        state = await wait_state(sandbox, timeout_s=20)
        assert state["termination"] == "timeout"
        assert time.monotonic() - started < 10
        # without cgroups a refused fork is not reported (RLIMIT_NPROC; docs/sandbox.md)
        assert (await sandbox.usage()).pids_limit_hit == with_cgroups(sandbox)
    finally:
        await sandbox.terminate()
    await assert_host_clean(mode_kit, sandbox)


async def test_memory_hog_is_killed_by_the_memory_limit(run_hostile: Run) -> None:
    started = time.monotonic()
    sandbox, state = await run_hostile("python3 agents/memory_hog.py", memory_mb=128)
    usage = await sandbox.usage()
    if with_cgroups(sandbox):  # the kernel's OOM killer, counted in the cgroup
        assert 9 in (state["signal"], state["exit_code"] - 128) and state["termination"] is None
    else:  # RLIMIT_AS: the allocation fails, the agent says so (MemoryError) and exits
        assert state["exit_code"] == 1 and state["termination"] is None
        assert b"MemoryError" in await sandbox.read_file("/out/stderr.log")
    assert usage.oom_killed
    assert usage.peak_memory_mb <= 128 + 1
    assert (await result_of(sandbox))["allocated_mb"] < 256
    assert time.monotonic() - started < 20


async def test_one_gigabyte_of_stdout_stops_at_the_log_cap(run_hostile: Run) -> None:
    started = time.monotonic()
    sandbox, state = await run_hostile("python3 agents/flood_stdout.py", stdout_limit_mb=2)
    assert state["termination"] == "output_limit"
    sizes = {info.path: info.size for info in await sandbox.list_files("/out")}
    assert sizes["stdout.log"] == 2 << 20
    assert time.monotonic() - started < 15


async def test_agent_that_never_exits_is_killed_with_its_daemon(run_hostile: Run) -> None:
    started, marker = time.monotonic(), secrets.token_hex(6)  # ours, not another test's daemon
    sandbox, state = await run_hostile(f"python3 agents/never_exits.py {marker}", wall_timeout_s=1)
    assert state["termination"] == "timeout"
    assert time.monotonic() - started < 8
    for _ in range(50):
        if not sandbox.cgroups.pids():
            break
        await asyncio.sleep(0.02)
    assert sandbox.cgroups.pids() == []  # the runner finished: nothing is left in the sandbox
    assert host_pids_matching(f"evalbot-daemon {marker}") == []
    assert not await sandbox.runner_alive()


async def test_disk_filler_hits_the_disk_cap_not_the_host_disk(run_hostile: Run) -> None:
    sandbox, state = await run_hostile("python3 agents/disk_filler.py", disk_mb=24)
    assert state["exit_code"] == 3
    assert b"No space left on device" in await sandbox.read_file("/out/stdout.log")
    written = sum(i.size for i in await sandbox.list_files("/out") if i.path.startswith("filler/"))
    assert 16 << 20 <= written <= 40 << 20
    assert (await sandbox.usage()).disk_limit_hit


async def test_one_big_file_hits_the_file_size_limit(run_hostile: Run) -> None:
    sandbox, state = await run_hostile(
        "head -c 1073741824 /dev/zero > /out/big.bin", file_size_mb=8, disk_mb=64
    )
    assert state["exit_code"] == 128 + 25  # the shell reports its child's SIGXFSZ
    sizes = {info.path: info.size for info in await sandbox.list_files("/out")}
    assert sizes["big.bin"] == 8 << 20
    assert not (await sandbox.usage()).disk_limit_hit


async def test_agent_cannot_create_user_namespaces(run_hostile: Run) -> None:
    sandbox, state = await run_hostile("unshare --user --map-root-user true")
    assert state["exit_code"] != 0
    assert b"Operation not permitted" in await sandbox.read_file("/out/stderr.log")


async def test_sandboxes_run_as_distinct_unprivileged_users(mode_kit: Kit) -> None:
    first = await mode_kit.provider.create(mode_kit.spec())
    second = await mode_kit.provider.create(mode_kit.spec())
    try:
        ids = [await box.exec(["id", "-u"]) for box in (first, second)]
        uids = {int(result.stdout) for result in ids}
        assert len(uids) == 2 and all(uid >= 100_000 for uid in uids)
        fields = "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status"
        status = await first.exec(["sh", "-c", fields])
        assert status.stdout.split() == [
            b"CapEff:", b"0000000000000000", b"NoNewPrivs:", b"1", b"Seccomp:", b"2",
        ]  # fmt: skip
    finally:
        for box in (first, second):
            await box.terminate()


async def test_the_runner_and_its_agent_hold_no_privilege_at_all(run_hostile: Run) -> None:
    """The runner drops to the sandbox's uid itself (no setpriv on the start path): the agent and
    the runner (pid 1) have every capability set empty, every uid and gid the sandbox's, no
    supplementary group, no_new_privs and the seccomp filter. The same fields for both, read by
    the agent; a capability left in any set, or a uid left root, fails this."""
    fields = "CapInh|CapPrm|CapEff|CapBnd|CapAmb|Uid|Gid|Groups|NoNewPrivs|Seccomp"
    read = f"grep -E '^({fields}):' /proc/self/status; grep -E '^({fields}):' /proc/1/status"
    sandbox, state = await run_hostile(read)
    assert state["exit_code"] == 0
    lines = (await sandbox.read_file("/out/stdout.log")).decode().splitlines()
    uid = sandbox.uid
    wanted = {
        "CapInh": "0000000000000000", "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
        "CapAmb": "0000000000000000", "Uid": f"{uid}\t{uid}\t{uid}\t{uid}",
        "Gid": f"{uid}\t{uid}\t{uid}\t{uid}", "Groups": "", "NoNewPrivs": "1", "Seccomp": "2",
    }  # fmt: skip
    pairs = [tuple(part.strip() for part in line.split(":", 1)) for line in lines]
    agent, runner = dict(pairs[: len(wanted)]), dict(pairs[len(wanted) :])
    assert len(pairs) == 2 * len(wanted)  # each field once per process
    assert (agent, runner) == (wanted, wanted)


async def test_agent_cannot_kill_or_trace_the_runner(run_hostile: Run) -> None:
    attack = "kill -KILL 1; kill -STOP 1; sleep 0.3; cat /proc/1/environ; echo survived"
    sandbox, state = await run_hostile(attack)
    assert (state["exit_code"], state["termination"]) == (0, None)  # the runner lived to tell
    assert await sandbox.read_file("/out/stdout.log") == b"survived\n"
    assert b"Permission denied" in await sandbox.read_file("/out/stderr.log")


async def test_without_cgroups_the_limits_are_rlimits(mode_kit: Kit) -> None:
    """No-cgroup mode sets RLIMIT_AS/NPROC/CPU on the agent; with cgroups they stay unlimited."""
    spec = mode_kit.spec(memory_mb=200, pids=33, cpu=2.0, wall_timeout_s=10)
    sandbox = await mode_kit.provider.create(spec)
    assert isinstance(sandbox, LocalSandbox)
    try:
        await run_to_end(sandbox, "cat /proc/self/limits")
        limits = (await sandbox.read_file("/out/stdout.log")).decode()
    finally:
        await sandbox.terminate()
    rows = {line[:26].strip(): line[26:].split()[:2] for line in limits.splitlines()[1:]}
    if with_cgroups(sandbox):
        assert rows["Max address space"] == ["unlimited", "unlimited"]
        return
    assert rows["Max address space"] == [str(200 << 20)] * 2
    assert rows["Max processes"] == ["33", "33"]
    assert rows["Max cpu time"] == [str(2 * 10 + 5), str(2 * 10 + 10)]  # cpu x wall + grace
