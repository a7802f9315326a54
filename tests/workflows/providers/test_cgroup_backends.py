"""The cgroup backends of the `local` provider (cgroup_backend.py): which one a host gets, what the
v2 backend writes where on a fake cgroup2 mount (tests/fakes/cgroupfs.py), and its group
operations on this host's real unified hierarchy. The v1 backend and no-cgroup mode run real
sandboxes in test_local.py, test_local_hostile.py and test_conformance.py."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes.cgroupfs import kernel_mkdir, kernel_rmdir, make_unified_mount
from workflows.providers.base import ResourceLimits
from workflows.providers.local.cgroup_backend import select_backend
from workflows.providers.local.cgroups import CONTROLLERS, V1Backend
from workflows.providers.local.cgroups_v2 import SUPERVISOR_LEAF, V2Backend, V2Group, own_cgroup
from workflows.providers.local.no_cgroups import NoCgroupBackend, looks_out_of_memory

OWN = "/system.slice/evalbot.service"
LIMITS = ResourceLimits(cpu=0.5, memory_mb=300, pids=77)


def read(path: Path) -> str:
    return path.read_text()


# -- choosing a backend ----------------------------------------------------------------------------


def test_auto_takes_v2_on_a_cgroup2_mount_with_delegated_controllers(tmp_path: Path) -> None:
    make_unified_mount(tmp_path / "cg", OWN)
    backend, problem = select_backend("auto", tmp_path / "cg", tmp_path / "groups", own=OWN)
    assert isinstance(backend, V2Backend) and problem is None
    assert backend.base == tmp_path / "cg" / "system.slice" / "evalbot.service"


def test_auto_falls_back_to_no_cgroups_when_v2_lacks_controllers(tmp_path: Path) -> None:
    make_unified_mount(tmp_path / "cg", OWN, controllers="cpu")  # memory and pids not delegated
    backend, problem = select_backend("auto", tmp_path / "cg", tmp_path / "groups", own=OWN)
    assert isinstance(backend, NoCgroupBackend) and problem is None
    assert "memory, pids are not available" in backend.reason
    assert "Delegate=yes" in backend.reason  # the fix
    assert backend.weaker  # what the report and `evalbot doctor` list


def test_auto_leaves_a_cgroup_not_delegated_to_us_alone(tmp_path: Path) -> None:
    """A login session's scope, say: writable as root, but systemd's, not ours."""
    base = make_unified_mount(tmp_path / "cg", OWN, delegated=False)
    backend, problem = select_backend("auto", tmp_path / "cg", tmp_path / "groups", own=OWN)
    assert isinstance(backend, NoCgroupBackend) and problem is None
    assert "is not delegated to this process" in backend.reason
    assert not (base / SUPERVISOR_LEAF).exists()  # nothing was moved
    backend, problem = select_backend("v2", tmp_path / "cg", tmp_path / "groups", own=OWN)
    assert isinstance(backend, V2Backend) and problem is None  # forced: the operator vouches


def test_forced_v2_on_a_host_without_it_is_a_problem_not_a_fallback(tmp_path: Path) -> None:
    make_unified_mount(tmp_path / "cg", OWN, controllers="")
    backend, problem = select_backend("v2", tmp_path / "cg", tmp_path / "groups", own=OWN)
    assert isinstance(backend, V2Backend)
    assert problem is not None and "memory, pids, cpu" in problem


def test_a_v1_hierarchy_gets_v1_and_no_mount_at_all_gets_none(tmp_path: Path) -> None:
    for name in CONTROLLERS:
        (tmp_path / "v1" / name).mkdir(parents=True)
    backend, problem = select_backend("auto", tmp_path / "v1", tmp_path / "groups")
    assert isinstance(backend, V1Backend) and problem is None
    backend, problem = select_backend("auto", tmp_path / "missing", tmp_path / "groups")
    assert isinstance(backend, NoCgroupBackend) and problem is None
    assert "cgroup v1 controllers not writable" in backend.reason
    _, problem = select_backend("v3", tmp_path / "v1", tmp_path / "groups")
    assert problem is not None and "auto, v1, v2, none" in problem


def test_own_cgroup_is_read_from_the_unified_line_and_skips_our_leaf(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/x\n1:cpu:/\n0::/system.slice/evalbot.service\n")
    assert own_cgroup(proc) == OWN
    proc.write_text(f"0::{OWN}/{SUPERVISOR_LEAF}\n")  # after prepare() moved us
    assert own_cgroup(proc) == OWN
    proc.write_text(f"0::/{SUPERVISOR_LEAF}\n")
    assert own_cgroup(proc) == "/"


# -- prepare: delegation and the no-internal-processes rule ---------------------------------------


def test_prepare_moves_our_processes_to_a_leaf_then_enables_the_controllers(
    tmp_path: Path,
) -> None:
    base = make_unified_mount(tmp_path / "cg", OWN, procs=(4242, 4343))
    backend = V2Backend(tmp_path / "cg", OWN)
    backend.prepare()
    assert read(base / SUPERVISOR_LEAF / "cgroup.procs") == "4242\n4343\n"  # one pid per write
    assert read(base / "cgroup.subtree_control") == "+memory +pids +cpu"
    assert read(base / "evalbot" / "cgroup.subtree_control") == "+memory +pids +cpu"

    (base / SUPERVISOR_LEAF / "cgroup.procs").write_text("")
    backend.prepare()  # a second worker: already prepared, nothing moves again
    assert read(base / SUPERVISOR_LEAF / "cgroup.procs") == ""


def test_prepare_gives_the_sandboxes_parent_a_low_cpu_weight_every_time(tmp_path: Path) -> None:
    base = make_unified_mount(tmp_path / "cg", OWN)
    backend = V2Backend(tmp_path / "cg", OWN)
    backend.prepare()
    assert read(base / "evalbot" / "cpu.weight") == "11"  # nice 10's weight; 100 is nice 0
    (base / "evalbot" / "cpu.weight").write_text("100\n")  # prepared by an older worker
    backend.prepare()
    assert read(base / "evalbot" / "cpu.weight") == "11"


def test_v1_prepare_gives_the_sandboxes_parent_a_low_cpu_weight(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    V1Backend(tmp_path).prepare()
    assert read(tmp_path / "cpu" / "evalbot" / "cpu.shares") == "110"  # nice 10; nice 0 is 1024


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@pytest.mark.skipif(
    os.geteuid() != 0 or V1Backend().problem() is not None, reason="needs writable cgroup v1"
)
def test_on_a_contended_core_the_worker_runs_before_the_sandboxes() -> None:
    """Why the weight is there: two busy loops on one core, one in the worker's group (this
    process's, which it inherits) and one under `evalbot/`, where sandboxes are made. The kernel
    gives the second about 110/1024 of the first's time; without the weight (1024, the kernel's
    default) they would share the core evenly."""
    V1Backend().prepare()
    cpu = V1Backend().root / "cpu"
    group = cpu / "evalbot" / f"weight-test-{secrets.token_hex(4)}"
    group.mkdir()
    loops = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"]) for _ in range(2)]
    try:
        worker_loop, sandbox_loop = loops
        for loop in loops:
            os.sched_setaffinity(loop.pid, {0})
        (group / "cgroup.procs").write_text(str(sandbox_loop.pid))
        start = {loop.pid: cpu_seconds(loop.pid) for loop in loops}
        time.sleep(1.5)
        used = {loop.pid: cpu_seconds(loop.pid) - start[loop.pid] for loop in loops}
        share = used[sandbox_loop.pid] / used[worker_loop.pid]
        assert used[worker_loop.pid] > 0.3, used  # the core was not taken by something else
        assert share < 0.5, used  # about 0.11 with the weight (1.35 s and 0.15 s), 1.04 without
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        group.rmdir()


def test_prepare_in_the_root_group_moves_nothing(tmp_path: Path) -> None:
    """The root group is exempt from the rule (it has no cgroup.type)."""
    root = make_unified_mount(tmp_path / "cg", "/")
    V2Backend(root, "/").prepare()
    assert not (root / SUPERVISOR_LEAF).exists()
    assert read(root / "cgroup.subtree_control") == "+memory +pids +cpu"
    assert read(root / "evalbot" / "cgroup.subtree_control") == "+memory +pids +cpu"


# -- a sandbox's group -----------------------------------------------------------------------------


def fake_group(tmp_path: Path, swap: bool = True) -> V2Group:
    make_unified_mount(tmp_path / "cg", OWN)
    backend = V2Backend(tmp_path / "cg", OWN)
    backend.prepare()
    group = backend.group("evalbot/sbx-1")
    kernel_mkdir(group.path, swap=swap)
    return group


def test_create_writes_the_limits_to_the_v2_files(tmp_path: Path) -> None:
    group = fake_group(tmp_path)
    assert group.path == tmp_path / "cg" / "system.slice" / "evalbot.service" / "evalbot" / "sbx-1"
    group.create(LIMITS)
    assert read(group.path / "memory.max") == str(300 << 20)
    assert read(group.path / "memory.swap.max") == "0"
    assert read(group.path / "pids.max") == "77"
    assert read(group.path / "cpu.max") == "50000 100000"
    assert group.procs_files() == [group.path / "cgroup.procs"]
    group.add(31337)
    assert group.pids() == [31337]


def test_without_swap_accounting_no_swap_file_is_invented(tmp_path: Path) -> None:
    group = fake_group(tmp_path, swap=False)
    group.create(LIMITS)
    assert not (group.path / "memory.swap.max").exists()


def test_usage_reads_oom_kills_from_memory_events(tmp_path: Path) -> None:
    group = fake_group(tmp_path)
    group.create(LIMITS)
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
    (group.path / "memory.peak").write_text(f"{123 << 20}\n")
    (group.path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (group.path / "pids.events").write_text("max 5\n")
    usage = group.usage()
    assert (usage.oom_kills, usage.peak_memory_bytes) == (2, 123 << 20)
    assert (usage.cpu_seconds, usage.pids_max_hits) == (2.5, 5)
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 0\n")
    assert group.usage().oom_kills == 0  # hitting memory.max is not an OOM kill


async def test_kill_all_writes_cgroup_kill_and_waits_until_empty(tmp_path: Path) -> None:
    group = fake_group(tmp_path)
    (group.path / "cgroup.procs").write_text("101\n102\n")

    async def kernel() -> None:  # the members die a moment after cgroup.kill
        for _ in range(1000):
            if read(group.path / "cgroup.kill") == "1":
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        (group.path / "cgroup.procs").write_text("")

    killing = asyncio.create_task(kernel())
    assert await group.kill_all(timeout_s=5)
    await killing
    assert read(group.path / "cgroup.kill") == "1"


async def test_kill_all_reports_members_that_will_not_die(tmp_path: Path) -> None:
    group = fake_group(tmp_path)
    (group.path / "cgroup.procs").write_text("101\n")
    assert not await group.kill_all(timeout_s=0.1)


async def test_remove_rmdirs_the_group_and_tolerates_it_gone(tmp_path: Path) -> None:
    group = fake_group(tmp_path)
    assert group.exists()
    kernel_rmdir(group.path)
    await group.remove()
    assert not group.exists()
    await group.remove()  # a retried teardown
    assert await group.kill_all()  # nothing to kill in a group that is gone


# -- the real unified hierarchy (no controllers here: membership, kill and removal) ----------------

UNIFIED = Path("/sys/fs/cgroup/unified")
real_v2 = pytest.mark.skipif(
    not (os.geteuid() == 0 and (UNIFIED / "cgroup.controllers").is_file()),
    reason="needs root and a writable cgroup2 mount at /sys/fs/cgroup/unified",
)


@real_v2
async def test_cgroup_kill_kills_every_member_on_the_real_kernel() -> None:
    group = V2Group(UNIFIED / f"evalbot-test-{secrets.token_hex(4)}")
    group.path.mkdir()
    sleeper = await asyncio.create_subprocess_exec(
        "sh", "-c", "read go; sleep 60 & sleep 60 & wait", stdin=asyncio.subprocess.PIPE
    )
    assert sleeper.stdin is not None
    try:
        group.add(sleeper.pid)
        sleeper.stdin.write(b"go\n")  # its children are born inside the group
        await sleeper.stdin.drain()
        for _ in range(100):
            if len(group.pids()) == 3:
                break
            await asyncio.sleep(0.01)
        assert sleeper.pid in group.pids() and len(group.pids()) == 3
        assert await group.kill_all(timeout_s=5)
        assert await asyncio.wait_for(sleeper.wait(), 5) == -9
        assert group.pids() == []
        await group.remove()
        assert not group.path.exists()
    finally:
        if sleeper.returncode is None:
            sleeper.kill()
            await sleeper.wait()
        if group.path.exists():
            group.path.rmdir()


# -- no-cgroup mode's memory-exhaustion evidence --------------------------------------------------


def test_out_of_memory_is_recognised_from_stderr_but_never_through_a_link(tmp_path: Path) -> None:
    log = tmp_path / "stderr.log"
    log.write_text("Traceback (most recent call last):\n  ...\nMemoryError\n")
    assert looks_out_of_memory(log)
    log.write_text("ValueError: no\n")
    assert not looks_out_of_memory(log)
    secret = tmp_path / "secret"
    secret.write_text("Cannot allocate memory\n")
    log.unlink()
    log.symlink_to(secret)  # the agent owns /out: its "log" may point anywhere
    assert not looks_out_of_memory(log)
    assert not looks_out_of_memory(tmp_path / "absent.log")
