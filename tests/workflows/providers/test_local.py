"""`local` specifics the conformance suite cannot express: host checks, recovery, limits setup."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.cgroupfs import kernel_rmdir, make_unified_mount
from tests.support.dead_process import dead_process_id
from tests.support.mounts import mount_points
from tests.workflows.providers.kits import Kit, run_to_end
from workflows.process_owned import staging_path
from workflows.providers.base import ProviderRefused, SandboxCreateError, SandboxNotFound
from workflows.providers.local import LocalProvider, LocalSandbox
from workflows.providers.local.cgroups import CONTROLLERS
from workflows.providers.local.cgroups_v2 import own_cgroup
from workflows.providers.local.disk import boot_time
from workflows.providers.local.no_cgroups import processes_of
from workflows.providers.local.stage_timer import StageTimer

pytestmark = pytest.mark.timeout(120)


async def test_refuses_a_forced_cgroup_mode_the_host_lacks(local_kit: Kit, tmp_path: Path) -> None:
    for mode, missing in (("v1", "cgroup v1 controllers not writable"), ("v2", "not a cgroup v2")):
        provider = LocalProvider(
            tmp_path / "s", tmp_path / "i", cgroup_root=tmp_path / "no-cgroups", cgroups=mode
        )
        with pytest.raises(ProviderRefused, match=missing) as refused:
            await provider.create(local_kit.spec())
        assert "EVALBOT_SANDBOX_CGROUPS=none" in str(refused.value)  # the way out
    assert not (tmp_path / "s").exists()


async def test_without_cgroups_auto_mode_runs_with_rlimits(
    local_kit: Kit, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No cgroup mount at all (an unprivileged container): sandboxes still run, and say so."""
    provider = LocalProvider(
        local_kit.base / "sandboxes", local_kit.base / "images", cgroup_root=tmp_path / "none"
    )
    sandbox = await provider.create(local_kit.spec())
    try:
        state = await run_to_end(sandbox, "python3 answer.py")
        assert state["exit_code"] == 0
        assert (await sandbox.read_file("/out/answer.md")).startswith(b"42")
    finally:
        await sandbox.terminate()
    assert provider.backend.mode == "none"
    (notice,) = [r.getMessage() for r in caplog.records if "no-cgroup mode" in r.getMessage()]
    assert "\n" not in notice and "docs/sandbox.md" in notice


async def test_limits_are_written_to_the_cgroups(local_kit: Kit) -> None:
    sandbox = await local_kit.provider.create(local_kit.spec(cpu=0.5, memory_mb=300, pids=77))
    assert isinstance(sandbox, LocalSandbox)
    try:
        path = sandbox.cgroups.path
        assert (path("pids") / "pids.max").read_text().strip() == "77"
        assert (path("memory") / "memory.limit_in_bytes").read_text().strip() == str(300 << 20)
        assert (path("cpu") / "cpu.cfs_quota_us").read_text().strip() == "50000"
        df = await sandbox.exec(["df", "-k", "/out", "/tmp"])
        sizes = [int(line.split()[1]) for line in df.stdout.decode().splitlines()[1:]]
        assert sizes[0] < (1024 + 64) * 1024  # /out: the disk_mb-sized sandbox disk, not the host's
        assert sizes[1] <= 1024 * 1024  # /tmp: capped tmpfs
    finally:
        await sandbox.terminate()


async def test_attach_after_a_reboot_remounts_the_disk(mode_kit: Kit) -> None:
    """Mounts and cgroups vanish with a reboot; the sandbox's disk image does not (with cgroups
    and in no-cgroup mode, whose marker stands in for the group)."""
    sandbox = await mode_kit.provider.create(mode_kit.spec())
    assert isinstance(sandbox, LocalSandbox)
    await run_to_end(sandbox, "python3 answer.py")
    await sandbox.cgroups.remove()
    done = await asyncio.create_subprocess_exec("umount", str(sandbox.layout.root))
    assert await done.wait() == 0
    with pytest.raises(SandboxNotFound):  # unmounted since the boot: not mounted again
        await mode_kit.make().attach(sandbox.id)
    before_boot = boot_time() - 60
    os.utime(sandbox.disk_image, (before_boot, before_boot))  # last written before a reboot
    twice = [mode_kit.make().attach(sandbox.id) for _ in range(2)]  # two workers at once
    again, _ = await asyncio.gather(*twice)
    assert mounts_at(sandbox.layout.root) == 1
    assert (await again.read_file("/out/answer.md")).startswith(b"42")
    assert not await again.runner_alive()
    await again.terminate()
    assert not sandbox.disk_image.exists() and not sandbox.layout.root.exists()
    with pytest.raises(SandboxNotFound):
        await mode_kit.make().attach(sandbox.id)


async def test_create_and_terminate_are_fast(local_kit: Kit) -> None:
    """create() for a small world well under 150 ms (median of 5; generous bound for CI noise)."""
    create_s, terminate_s = [], []
    for _ in range(5):
        started = time.perf_counter()
        sandbox = await local_kit.provider.create(local_kit.spec())
        create_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        await sandbox.terminate()
        terminate_s.append(time.perf_counter() - started)
    assert statistics.median(create_s) < 0.15, create_s
    assert statistics.median(terminate_s) < 0.15, terminate_s


async def test_sandbox_folder_is_private_to_root(local_kit: Kit) -> None:
    sandbox = await local_kit.provider.create(local_kit.spec())
    assert isinstance(sandbox, LocalSandbox)
    try:
        assert os.stat(sandbox.layout.meta).st_mode & 0o777 == 0o600  # holds the spec's env
        assert b"s3cret-value" not in sandbox.layout.log.read_bytes()
    finally:
        await sandbox.terminate()


async def test_a_sandbox_cut_off_before_its_metadata_is_removed_whole(mode_kit: Kit) -> None:
    """A worker killed between making the disk and writing the metadata: `attach` cannot find
    the sandbox, but `sandboxes_of` finds it by its id and `remove_leftover` removes its mount,
    cgroups, disk and uid claim (with cgroups, and in no-cgroup mode: there it kills by the uid it
    finds in the claim)."""
    provider = mode_kit.provider
    assert isinstance(provider, LocalProvider)
    run_id = "exp/cut-off/arm/0"
    sandbox = await provider.create(mode_kit.spec(run_id=run_id))
    assert isinstance(sandbox, LocalSandbox)
    await sandbox.start("sleep 600")  # still running when its worker was killed
    assert processes_of(sandbox.uid)
    sandbox.layout.meta.unlink()
    assert await provider.sandboxes_of(run_id) == []  # its claimer lives: a create in progress
    claim_by_a_dead_worker(provider, sandbox)
    with pytest.raises(SandboxNotFound):
        await provider.attach(sandbox.id)
    assert await provider.sandboxes_of(run_id) == [sandbox.id]

    await provider.remove_leftover(sandbox.id)

    assert not sandbox.layout.root.exists() and not sandbox.disk_image.exists()
    assert not sandbox.cgroups.exists()
    assert processes_of(sandbox.uid) == []
    assert not [
        p
        for p in provider.slots.folder.glob("[0-9]*")
        if p.read_text().partition("\n")[0] == sandbox.id
    ]
    assert await provider.sandboxes_of(run_id) == []


async def test_a_terminate_cut_short_mid_cgroup_removal_is_finished_by_the_next(
    local_kit: Kit,
) -> None:
    """A worker killed while `terminate` removed the cgroups one controller at a time (pids goes
    first): the retried teardown must remove the rest, not take the sandbox for gone."""
    sandbox = await local_kit.provider.create(local_kit.spec())
    assert isinstance(sandbox, LocalSandbox)
    sandbox.cgroups.path("pids").rmdir()  # what the killed worker got done

    await (await local_kit.provider.attach(sandbox.id)).terminate()

    assert [c for c in CONTROLLERS if sandbox.cgroups.path(c).exists()] == []
    assert not sandbox.layout.root.exists() and not sandbox.disk_image.exists()


@pytest.mark.skipif(own_cgroup() != "/", reason="the fake mount stands for our namespace root")
async def test_on_a_cgroup_v2_host_the_provider_writes_the_spec_limits_there(
    local_kit: Kit, tmp_path: Path
) -> None:
    """The provider wired to the v2 backend, on a fake cgroup2 mount (tests/fakes/cgroupfs.py)
    standing for a host where this process owns the root of its cgroup namespace: the spec's
    limits land in the sandbox's group. (Nothing is started: the fake kernel enforces nothing.)"""
    root = make_unified_mount(tmp_path / "cg", "/")
    provider = LocalProvider(
        local_kit.base / "sandboxes", local_kit.base / "images", cgroup_root=root
    )
    sandbox = await provider.create(local_kit.spec(cpu=1.5, memory_mb=256, pids=64))
    assert isinstance(sandbox, LocalSandbox)
    group = root / "evalbot" / sandbox.id
    assert provider.backend.mode == "v2" and sandbox.cgroups.procs_files() == [
        group / "cgroup.procs"
    ]
    assert (root / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (group / "memory.max").read_text() == str(256 << 20)
    assert (group / "pids.max").read_text() == "64"
    assert (group / "cpu.max").read_text() == "150000 100000"
    kernel_rmdir(group)
    await sandbox.terminate()
    assert not group.exists() and not sandbox.layout.root.exists()


async def test_a_sandbox_cut_off_by_a_dead_worker_is_listed_for_the_host_reaping(
    mode_kit: Kit,
) -> None:
    """No metadata and its uid claimed by a process that is gone: the host's reaping lists it
    (no experiment, so it is removed); claimed by a live process it is a create in progress."""
    provider = mode_kit.provider
    assert isinstance(provider, LocalProvider)
    sandbox = await provider.create(mode_kit.spec(run_id="exp/cut-off-dead/arm/0"))
    assert isinstance(sandbox, LocalSandbox)
    sandbox.layout.meta.unlink()
    assert sandbox.id not in [found.id for found in await provider.run_sandboxes()]
    claim = claim_by_a_dead_worker(provider, sandbox)

    listed = [found for found in await provider.run_sandboxes() if found.id == sandbox.id]
    assert [(found.experiment, found.run) for found in listed] == [("", "")]
    await provider.remove_leftover(sandbox.id)

    assert not sandbox.layout.root.exists() and not sandbox.disk_image.exists()
    assert not claim.exists()
    assert sandbox.id not in [found.id for found in await provider.run_sandboxes()]


def claim_by_a_dead_worker(provider: LocalProvider, sandbox: LocalSandbox) -> Path:
    """Rewrite the sandbox's uid claim as made by a process that is gone (pid 1 under another
    start time): what a worker killed mid-create leaves."""
    claim = provider.slots.folder / str(sandbox.uid)
    claim.write_text(f"{sandbox.id}\n1-1\n{provider.sandbox_dir}")
    return claim


def test_half_made_runner_and_etc_copies_of_a_dead_worker_are_reaped(tmp_path: Path) -> None:
    """A worker killed while compiling the runner or copying /etc leaves a staging entry named by
    its process; the reaping at a worker's start removes those, and keeps what a live one makes."""
    provider = LocalProvider(tmp_path / "s", tmp_path / "i")
    dead = dead_process_id()
    left: list[Path] = []
    for folder in (provider.sandbox_dir / ".runner", provider.sandbox_dir / ".etc"):
        folder.mkdir(parents=True)
        (folder / f".x.abc.{dead}").mkdir()  # a half-made /etc copy is a folder
        (folder / f".y.abc.{dead}").write_bytes(b"half")
        left.append(staging_path(folder / "z"))
        left[-1].write_bytes(b"being made by this live process")
    provider.reap_orphans()
    remaining = [p for f in ("runner", "etc") for p in (provider.sandbox_dir / f".{f}").iterdir()]
    assert sorted(remaining) == sorted(left)


async def test_two_data_folders_on_one_host_never_share_a_live_uid(
    local_kit: Kit, tmp_path: Path
) -> None:
    """Two instances with their own folders of sandboxes, one uid between them: the second
    instance's create is refused while the first's sandbox lives, and gets the uid after.
    Broken build caught: uid claims kept per data folder (both would run as one uid, which
    no-cgroup mode kills by)."""

    def instance(name: str) -> LocalProvider:
        return LocalProvider(
            tmp_path / name, local_kit.base / "images", uid_base=180_000, uid_count=1
        )

    first, second = instance("first"), instance("second")
    sandbox = await first.create(local_kit.spec())
    try:
        with pytest.raises(SandboxCreateError, match="all 1 sandbox uids are in use"):
            leaked = await second.create(local_kit.spec())
            await leaked.terminate()  # reached only in a broken build: leave nothing behind
    finally:
        await sandbox.terminate()
    other = await second.create(local_kit.spec())
    try:
        assert isinstance(sandbox, LocalSandbox) and isinstance(other, LocalSandbox)
        assert other.uid == sandbox.uid == 180_000
    finally:
        await other.terminate()


Call = Callable[[], Coroutine[Any, Any, None]]


class AnotherWorkerAtStage(StageTimer):
    """When `stage` begins, runs `call` to its end on its own event loop in another thread, the
    way a second worker on this host would act in the middle of this worker's create."""

    def __init__(self, stage: str, call: Call) -> None:
        super().__init__()
        self.at, self.call = stage, call
        self.ran = False

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if name == self.at and not self.ran:
            self.ran = True
            errors: list[BaseException] = []
            thread = threading.Thread(target=lambda: run_catching(self.call, errors))
            thread.start()
            thread.join()
            if errors:
                raise errors[0]
        with super().stage(name):
            yield


def run_catching(call: Call, errors: list[BaseException]) -> None:
    try:
        asyncio.run(call())
    except BaseException as error:  # told to the test's thread
        errors.append(error)


def mounts_at(folder: Path) -> int:
    """How many mounts sit at `folder` (a disk mounted twice counts twice)."""
    return mount_points().count(str(folder))


async def test_a_create_in_progress_is_neither_listed_nor_mounted_by_another_worker(
    local_kit: Kit,
) -> None:
    """Between making a sandbox's folder and mounting its disk, another worker on the host looks
    for leftovers of the run (a retried attempt does) and tries to attach it: the create in
    progress is no leftover, and its disk must not be mounted a second time (two loop devices
    on one image corrupt it, and a teardown unmounts only the top one)."""
    run_id = "exp/create-race/arm/0"
    provider, other = local_kit.make(), local_kit.make()
    assert isinstance(provider, LocalProvider) and isinstance(other, LocalProvider)
    seen: dict[str, object] = {}
    provider.check_host()
    provider.native_disk = None  # the Python steps: the native ones have no stage between

    async def look_for_leftovers() -> None:
        (folder,) = [f for f in provider.sandbox_dir.iterdir() if "create-race" in f.name]
        seen["listed"] = await other.sandboxes_of(run_id)
        with pytest.raises(SandboxNotFound):
            await other.attach(folder.name)
        seen["mounts"] = mounts_at(folder)

    provider.timer = AnotherWorkerAtStage("create: mount", look_for_leftovers)
    sandbox = await provider.create(local_kit.spec(run_id=run_id))
    assert isinstance(sandbox, LocalSandbox)
    try:
        assert seen == {"listed": [], "mounts": 0}
        assert mounts_at(sandbox.layout.root) == 1
    finally:
        await sandbox.terminate()
    assert mounts_at(sandbox.layout.root) == 0
