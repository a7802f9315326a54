"""Which file system holds a folder (workflows/file_systems.py), from a mount table and jbd2's
list of journaled devices."""

from __future__ import annotations

from pathlib import Path

from workflows.file_systems import file_system_of

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
