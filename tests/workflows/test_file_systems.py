"""Which file system holds a folder (workflows/file_systems.py), from a mount table and jbd2's
list of journaled devices; and spreading a folder's subfolders over ext4's block groups, on the
real file systems of this machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workflows.file_systems import file_system_of, spread_subfolders, spreads_subfolders

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
/dev/loop0 /mnt/journaled ext4 rw,relatime 0 0
/dev/loop1 /mnt/journaled/inner xfs rw 0 0
"""


def test_the_longest_mount_point_wins_and_ext4_says_whether_it_has_a_journal(
    tmp_path: Path,
) -> None:
    mounts, journals = tmp_path / "mounts", tmp_path / "jbd2"
    mounts.write_text(MOUNTS)
    (journals / "loop0-8").mkdir(parents=True)
    (journals / "vda1-8").mkdir()  # another device whose name starts like vda's: not vda's

    def described(path: str) -> str:
        return file_system_of(path, str(mounts), str(journals)).describe()

    assert described("/tmp/evalbot-bench-x") == "ext4, no journal"
    assert described("/mnt/journaled/sandboxes") == "ext4, journal"
    assert described("/mnt/journaled/inner/a") == "xfs"
    assert described("/dev/shm") == "tmpfs"
    assert described("/mnt/journaledx") == "ext4, no journal"  # not under /mnt/journaled
    unjournaled = file_system_of("/srv", str(mounts), str(tmp_path / "no-jbd2"))
    assert (unjournaled.mount_point, unjournaled.slow_to_churn) == ("/", True)
    assert not file_system_of("/dev/shm/x", str(mounts), str(journals)).slow_to_churn


def test_this_hosts_root_is_found() -> None:
    root = file_system_of("/")
    assert root.mount_point == "/" and root.kind != "unknown"


def large_ext4_folder(tmp_path: Path) -> Path:
    """`tmp_path`, on an ext4 large enough to have many block groups (16 GiB: 8 flex groups)."""
    if file_system_of(str(tmp_path)).kind != "ext4":
        pytest.skip("the test's folder is not on ext4")
    stats = os.statvfs(tmp_path)
    if stats.f_blocks * stats.f_frsize < 16 << 30:
        pytest.skip("the test's ext4 has too few block groups to spread over")
    return tmp_path


def inode_spread(folder: Path, count: int = 16) -> int:
    """How far apart the inode numbers of `count` new subfolders of `folder` are."""
    numbers = []
    for index in range(count):
        (folder / f"sub{index}").mkdir()
        numbers.append(os.stat(folder / f"sub{index}").st_ino)
    return max(numbers) - min(numbers)


def test_subfolders_of_a_spread_folder_go_to_different_block_groups(tmp_path: Path) -> None:
    spread, together = large_ext4_folder(tmp_path) / "spread", tmp_path / "together"
    spread.mkdir()
    together.mkdir()
    assert not spreads_subfolders(spread)
    assert spread_subfolders(spread) and spread_subfolders(spread)  # a second call: no change
    assert spreads_subfolders(spread) and not spreads_subfolders(together)
    # ext4 numbers inodes by block group: together, the 16 are neighbours; spread, they are in
    # groups further apart than one flex group (16 groups of, usually, 8,192 inodes)
    assert inode_spread(spread) > 16 * max(inode_spread(together), 8192)
    assert not spreads_subfolders(spread / "sub0")  # not inherited: below each, files stay together


def test_where_there_is_no_such_attribute_nothing_is_set(tmp_path: Path) -> None:
    shared_memory = Path("/dev/shm")
    if file_system_of(str(shared_memory)).kind != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    folder = shared_memory / f"evalbot-spread-{os.getpid()}"
    folder.mkdir()
    try:
        assert not spread_subfolders(folder) and not spreads_subfolders(folder)
    finally:
        folder.rmdir()
    assert not spread_subfolders(tmp_path / "missing")
