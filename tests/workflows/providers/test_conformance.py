"""The contract of workflows/providers/base.py, run against every provider in kits.KIT_MAKERS."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.workflows.providers.kits import (
    REPO_ROOT,
    STATE,
    Kit,
    git,
    host_pids_matching,
    run_to_end,
    tree,
    wait_state,
)
from workflows.file_systems import file_system_of, spreads_subfolders
from workflows.prewarm.image_label import image_path
from workflows.providers.base import (
    FileKind,
    Sandbox,
    SandboxCreateError,
    SandboxError,
    SandboxFileError,
    SandboxNotFound,
)

pytestmark = pytest.mark.timeout(120)

NewSandbox = Callable[..., Awaitable[Sandbox]]


@pytest.fixture
async def new_sandbox(kit: Kit) -> AsyncIterator[NewSandbox]:
    """Create sandboxes from the kit's spec (limits as keywords); all terminated afterwards."""
    made: list[Sandbox] = []

    async def create(**limits: Any) -> Sandbox:
        sandbox = await kit.provider.create(kit.spec(**limits))
        made.append(sandbox)
        return sandbox

    yield create
    for sandbox in made:
        await sandbox.terminate()


# -- create -------------------------------------------------------------------------------------


async def test_create_places_case_world_and_folders(kit: Kit, new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    case = json.loads(await sandbox.read_file("/case/case.json"))
    assert case["prompt"] == "What is 6 x 7?"
    assert await sandbox.read_file("/case/attachments/note.txt") == b"note"
    world = {info.path for info in await sandbox.list_files("/world") if info.kind is FileKind.FILE}
    assert world == set(tree(kit.world))
    assert await sandbox.read_file("/repo/built.txt") == b"built\n"  # the setup ran in the image
    assert await sandbox.list_files("/out") == []
    assert not await sandbox.runner_alive()


async def test_sandboxes_on_this_machine_are_spread_over_the_disk(
    kit: Kit, new_sandbox: NewSandbox
) -> None:
    """Each sandbox's folder goes to a block group of its own where ext4 can do that
    (workflows/file_systems.py): the folder of sandboxes carries the attribute, and a sandbox's
    own folders do not (below a sandbox, files stay together)."""
    if not kit.provider.host_bound:
        pytest.skip("the provider's sandboxes are not on this machine")
    if file_system_of(str(kit.base)).kind != "ext4":
        pytest.skip("only ext4 has the attribute")
    sandbox = await new_sandbox()
    folder = kit.base / "sandboxes"
    assert spreads_subfolders(folder)
    assert not spreads_subfolders(folder / sandbox.id)


async def test_agent_sees_its_folders_and_env(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    script = (
        'cat "$EVALBOT_CASE_DIR/case.json"; echo; echo "$EVALBOT_TEST_SECRET"; '
        'pwd -P; echo "$EVALBOT_REPO_DIR"'
    )
    result = await sandbox.exec(["sh", "-c", script])
    case, secret, cwd, repo_dir = result.stdout.decode().splitlines()
    assert json.loads(case)["id"] == "case-1"
    assert secret == "s3cret-value"
    assert cwd == os.path.realpath(repo_dir) if not repo_dir.startswith("/repo") else cwd == "/repo"
    repo = await sandbox.exec(["sh", "-c", 'cat "$EVALBOT_REPO_DIR/built.txt"'])
    assert repo.stdout == b"built\n"


async def test_create_rejects_a_missing_image(kit: Kit) -> None:
    bad = replace(kit.spec(), image=str(kit.base / "no-such-image"))
    with pytest.raises(SandboxCreateError, match="no-such-image"):
        await kit.provider.create(bad)


async def test_create_rejects_case_files_escaping_case(kit: Kit) -> None:
    bad = replace(kit.spec(), case_files={"../x": b""})
    with pytest.raises(SandboxCreateError, match="inside /case"):
        await kit.provider.create(bad)


# -- start and the state file -------------------------------------------------------------------


async def test_start_keeps_the_state_file(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    before = time.time()
    # long enough to read the state and ask after the runner on a loaded machine (other test
    # processes beside this one)
    await sandbox.start("sleep 3; python3 answer.py; echo oops >&2")
    running = json.loads(await sandbox.read_file(STATE))
    assert running["status"] == "running"
    assert running["pid"] > 0 and running["finished_at"] is None
    assert before - 1 <= running["started_at"] <= time.time()
    assert await sandbox.runner_alive()
    state = await wait_state(sandbox)
    assert (state["exit_code"], state["signal"], state["termination"]) == (0, None, None)
    assert state["finished_at"] >= state["started_at"] + 2.9
    assert (await sandbox.read_file("/out/answer.md")).startswith(b"42 for ")
    assert await sandbox.read_file("/out/stdout.log") == b"answered\n"
    assert await sandbox.read_file("/out/stderr.log") == b"oops\n"
    for _ in range(100):
        if not await sandbox.runner_alive():
            break
        await asyncio.sleep(0.02)
    assert not await sandbox.runner_alive()


@pytest.mark.parametrize(
    ("command", "exit_code", "signal"),
    [("exit 7", 7, None), ("kill -9 $$", None, 9), ("no-such-program-xyz", 127, None)],
)
async def test_exit_status_is_reported(
    new_sandbox: NewSandbox, command: str, exit_code: int | None, signal: int | None
) -> None:
    state = await run_to_end(await new_sandbox(), command)
    assert (state["exit_code"], state["signal"], state["termination"]) == (exit_code, signal, None)


async def test_start_twice_starts_one_runner(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    await sandbox.start("echo once >> $EVALBOT_OUT_DIR/runs.txt; sleep 0.3")
    first = json.loads(await sandbox.read_file(STATE))
    await sandbox.start("echo twice >> $EVALBOT_OUT_DIR/runs.txt")
    await wait_state(sandbox)
    assert json.loads(await sandbox.read_file(STATE))["pid"] == first["pid"]
    assert await sandbox.read_file("/out/runs.txt") == b"once\n"


async def test_timeout_kills_the_whole_tree(kit: Kit, new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox(wall_timeout_s=1)
    started, marker = time.monotonic(), secrets.token_hex(6)  # ours, not another test's daemon
    state = await run_to_end(sandbox, f"python3 agents/never_exits.py {marker}", timeout_s=15)
    assert state["termination"] == "timeout"
    assert state["signal"] == 9
    assert time.monotonic() - started < 6
    if kit.host_processes:
        await asyncio.sleep(0.1)
        assert host_pids_matching(f"evalbot-daemon {marker}") == []


async def test_output_beyond_the_cap_kills_the_agent(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox(stdout_limit_mb=1)
    state = await run_to_end(sandbox, "yes evalbot", timeout_s=20)
    assert state["termination"] == "output_limit"
    log = [info for info in await sandbox.list_files("/out") if info.path == "stdout.log"]
    assert log[0].size == 1 << 20


async def test_leftover_processes_are_killed_when_the_agent_exits(
    kit: Kit, new_sandbox: NewSandbox
) -> None:
    sandbox = await new_sandbox()
    state = await run_to_end(sandbox, "(setsid sleep 313 &); sleep 313.5 & echo done")
    assert (state["exit_code"], state["termination"]) == (0, None)
    if kit.host_processes:
        await asyncio.sleep(0.1)
        assert host_pids_matching("sleep 313") == []


async def test_usage_measures_cpu_and_wall(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    busy = "python3 -c 'import time; t=time.process_time()\nwhile time.process_time()-t<0.5: pass'"
    await run_to_end(sandbox, busy)
    usage = await sandbox.usage()
    assert usage.cpu_seconds >= 0.4
    assert usage.wall_seconds >= 0.5
    assert usage.peak_memory_mb > 1
    assert not usage.oom_killed and not usage.pids_limit_hit and not usage.disk_limit_hit


# -- exec ---------------------------------------------------------------------------------------


async def test_exec_returns_status_and_output(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    result = await sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")


async def test_exec_output_is_bounded(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    result = await sandbox.exec(["sh", "-c", "head -c 5000000 /dev/zero"])
    assert result.exit_code == 0
    assert len(result.stdout) == 1 << 20


async def test_exec_timeout_is_an_error(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    started = time.monotonic()
    with pytest.raises(SandboxError, match="did not finish"):
        await sandbox.exec(["sleep", "30"], timeout_s=0.5)
    assert time.monotonic() - started < 5


# -- files --------------------------------------------------------------------------------------


async def test_write_read_and_list_files(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    await sandbox.write_file("/out/deep/er/note.txt", b"hello")
    await sandbox.write_file("/world/docs/contract.txt", b"rewritten")
    assert await sandbox.read_file("/out/deep/er/note.txt") == b"hello"
    listing = {(info.path, info.kind, info.size) for info in await sandbox.list_files("/out")}
    assert listing == {
        ("deep", FileKind.DIR, 0),
        ("deep/er", FileKind.DIR, 0),
        ("deep/er/note.txt", FileKind.FILE, 5),
    }
    agent_view = await sandbox.exec(["sh", "-c", 'cat "$EVALBOT_WORLD_DIR/docs/contract.txt"'])
    assert agent_view.stdout == b"rewritten"
    written = await sandbox.exec(["sh", "-c", 'echo more >> "$EVALBOT_OUT_DIR/deep/er/note.txt"'])
    assert written.exit_code == 0  # files the host wrote stay writable for the agent


@pytest.mark.parametrize(
    "path",
    ["/etc/passwd", "relative/path", "/out/../etc/passwd", "/", "/proc/self/environ", "/out\0x"],
)
async def test_paths_outside_the_roots_are_refused(new_sandbox: NewSandbox, path: str) -> None:
    sandbox = await new_sandbox()
    with pytest.raises(SandboxFileError):
        await sandbox.read_file(path)
    with pytest.raises(SandboxFileError):
        await sandbox.write_file(path, b"x")


async def test_repo_is_read_only_to_the_host_api(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    with pytest.raises(SandboxFileError, match="read-only"):
        await sandbox.write_file("/repo/built.txt", b"tampered")
    assert await sandbox.read_file("/repo/built.txt") == b"built\n"


async def test_symlinks_are_never_followed(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    passwd = Path("/etc/passwd").read_bytes()
    plant = 'cd "$EVALBOT_OUT_DIR" && ln -s /etc/passwd passwd && ln -s / root && mkfifo pipe'
    assert (await sandbox.exec(["sh", "-c", plant])).exit_code == 0
    for path in ("/out/passwd", "/out/root/etc/passwd", "/out/pipe"):
        with pytest.raises(SandboxFileError):
            await sandbox.read_file(path)
    with pytest.raises(SandboxFileError):
        await sandbox.write_file("/out/passwd", b"overwrite")
    with pytest.raises(SandboxFileError):
        await sandbox.list_files("/out/root")
    kinds = {info.path: info.kind for info in await sandbox.list_files("/out")}
    assert kinds == {"passwd": FileKind.SYMLINK, "root": FileKind.SYMLINK, "pipe": FileKind.OTHER}
    assert Path("/etc/passwd").read_bytes() == passwd


async def test_read_file_refuses_files_over_the_limit(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    await sandbox.write_file("/out/big.txt", b"x" * 1000)
    assert len(await sandbox.read_file("/out/big.txt", max_bytes=1000)) == 1000
    with pytest.raises(SandboxFileError, match="larger than 999"):
        await sandbox.read_file("/out/big.txt", max_bytes=999)
    with pytest.raises(SandboxFileError, match="does not exist"):
        await sandbox.read_file("/out/missing.txt")


async def test_iter_file_streams_in_chunks(new_sandbox: NewSandbox) -> None:
    sandbox = await new_sandbox()
    make = 'head -c 3000000 /dev/urandom > "$EVALBOT_OUT_DIR/t.jsonl"'
    assert (await sandbox.exec(["sh", "-c", make])).exit_code == 0
    digest, sizes = hashlib.sha256(), []
    async for chunk in sandbox.iter_file("/out/t.jsonl", chunk_size=1 << 16):
        digest.update(chunk)
        sizes.append(len(chunk))
    assert max(sizes) <= 1 << 16 and sum(sizes) == 3_000_000
    host = await sandbox.exec(["sh", "-c", 'sha256sum "$EVALBOT_OUT_DIR/t.jsonl"'])
    assert host.stdout.split()[0].decode() == digest.hexdigest()


# -- terminate and attach -----------------------------------------------------------------------


async def test_terminate_is_idempotent_and_final(kit: Kit) -> None:
    sandbox = await kit.provider.create(kit.spec())
    await sandbox.start("sleep 60 # evalbot-terminate-me")
    assert await sandbox.runner_alive()
    await sandbox.terminate()
    assert not await sandbox.runner_alive()
    await sandbox.terminate()
    with pytest.raises(SandboxNotFound):
        await kit.provider.attach(sandbox.id)
    with pytest.raises(SandboxError):
        await sandbox.read_file(STATE)
    if kit.host_processes:
        assert host_pids_matching("evalbot-terminate-me") == []


async def test_attach_from_a_fresh_provider_finds_the_runner(
    kit: Kit, new_sandbox: NewSandbox
) -> None:
    sandbox = await new_sandbox()
    await sandbox.start("sleep 1; python3 answer.py")
    again = await kit.make().attach(sandbox.id)
    assert again.id == sandbox.id
    assert await again.runner_alive()
    assert json.loads(await again.read_file(STATE))["status"] == "running"
    state = await wait_state(again)
    assert state["exit_code"] == 0
    assert (await again.read_file("/out/answer.md")).startswith(b"42")


@pytest.mark.parametrize("sandbox_id", ["no-such-sandbox-0123456789ab", "../../etc", "", "A" * 300])
async def test_attach_unknown_ids(kit: Kit, sandbox_id: str) -> None:
    with pytest.raises(SandboxNotFound):
        await kit.provider.attach(sandbox_id)


async def test_runner_survives_the_worker_that_started_it(kit: Kit) -> None:
    """A worker process starts a run and exits; a fresh one attaches and sees it finish. The run
    waits for the test to release it, so it is still running when the fresh worker looks, however
    slowly the machine went (a fixed sleep had finished by then under load)."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path[:0] = [{str(REPO_ROOT)!r}]
        from tests.workflows.providers.kits import KIT_MAKERS, Kit
        from pathlib import Path
        async def main():
            make = KIT_MAKERS[{kit.name!r}](Path({str(kit.base)!r}))
            kit = Kit({kit.name!r}, Path({str(kit.base)!r}), make, Path({str(kit.repo)!r}),
                      {kit.image!r}, Path({str(kit.world)!r}))
            sandbox = await kit.provider.create(kit.spec())
            await sandbox.start(
                "for i in $(seq 600); do [ -e $EVALBOT_OUT_DIR/release ] && break; "
                "sleep 0.1; done; python3 answer.py"
            )
            print(sandbox.id)
        asyncio.run(main())
        """
    )
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(worker.communicate(), 60)
    assert worker.returncode == 0, stderr.decode()
    sandbox = await kit.make().attach(stdout.decode().strip())
    try:
        assert await sandbox.runner_alive()
        await sandbox.write_file("/out/release", b"")
        assert (await wait_state(sandbox))["exit_code"] == 0
        assert (await sandbox.read_file("/out/answer.md")).startswith(b"42")
    finally:
        await sandbox.terminate()


# -- worlds -------------------------------------------------------------------------------------


async def test_worlds_are_private_copies(kit: Kit, new_sandbox: NewSandbox) -> None:
    pristine = tree(kit.world)
    first, second = await new_sandbox(), await new_sandbox()
    vandalize = (
        'cd "$EVALBOT_WORLD_DIR" && echo changed > docs/contract.txt && rm docs/memo.txt '
        "&& echo new > new.txt && chmod 600 records.csv"
    )
    assert (await first.exec(["sh", "-c", vandalize])).exit_code == 0
    changed = {i.path for i in await first.list_files("/world") if i.kind is FileKind.FILE}
    assert changed == {"docs/contract.txt", "new.txt", "records.csv"}
    untouched = {i.path for i in await second.list_files("/world") if i.kind is FileKind.FILE}
    assert untouched == set(pristine)
    for name, content in pristine.items():
        assert await second.read_file(f"/world/{name}") == content
    assert tree(kit.world) == pristine


# -- images -------------------------------------------------------------------------------------


async def test_build_image_builds_each_commit_once(kit: Kit) -> None:
    git(kit.repo, "commit", "-q", "--allow-empty", "-m", f"empty {time.time_ns()}")
    commit = git(kit.repo, "rev-parse", "HEAD")
    setup = "echo built >> count.txt; sleep 0.3"
    images = await asyncio.gather(
        *(kit.provider.build_image(kit.repo, commit, setup) for _ in range(3))
    )
    assert len(set(images)) == 1 and images[0] != kit.image
    fresh = kit.make()  # finds the image; how it was built may be known only to its builder
    assert image_path(await fresh.build_image(kit.repo, commit, setup)) == image_path(images[0])
    sandbox = await kit.provider.create(replace(kit.spec(), image=images[0]))
    try:
        assert await sandbox.read_file("/repo/count.txt") == b"built\n"
    finally:
        await sandbox.terminate()


async def test_build_failure_reports_the_log(kit: Kit) -> None:
    git(kit.repo, "commit", "-q", "--allow-empty", "-m", f"broken {time.time_ns()}")
    setup = "echo compiling the agent; echo 'fatal: missing dependency frobnicate' >&2; exit 3"
    with pytest.raises(SandboxCreateError, match=r"(?s)code 3.*missing dependency frobnicate"):
        await kit.provider.build_image(kit.repo, "main", setup)


@pytest.mark.parametrize("commit", ["0" * 40, "--upload-pack=touch /tmp/x", "no-such-branch"])
async def test_build_rejects_unknown_commits(kit: Kit, commit: str) -> None:
    with pytest.raises(SandboxCreateError):
        await kit.provider.build_image(kit.repo, commit, "true")


async def test_a_create_cancelled_at_any_point_leaves_nothing_behind(kit: Kit) -> None:
    """A provision cancelled mid-create (say, its experiment was cancelled by a new push) leaves
    no sandbox, even when the cancel lands while a step runs in a thread that cannot be stopped."""
    started = time.monotonic()
    await (await kit.provider.create(kit.spec(run_id="exp/cancelled/arm/timing"))).terminate()
    took = time.monotonic() - started
    leftovers: dict[int, list[str]] = {}
    for step in range(16):
        run_id = f"exp/cancelled/arm/{step}"
        creating = asyncio.ensure_future(kit.provider.create(kit.spec(run_id=run_id)))
        await asyncio.sleep(took * step / 16)
        creating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await (await creating).terminate()  # done before the cancel: an ordinary teardown
        left = await kit.provider.sandboxes_of(run_id)
        if left:
            leftovers[step] = left
    assert leftovers == {}
