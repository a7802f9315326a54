"""Single doctor checks (bot/doctor.py) against file systems given to them; the whole command
against this host is test_cli_doctor.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.doctor import data_file_system, native_runner, sandbox_file_system
from workflows.file_systems import FileSystem, file_system_of


def cannot_spread(folder: Path) -> bool:
    return False


@pytest.mark.parametrize(
    ("found", "spreads", "status"),
    [
        (FileSystem("ext4", "/", journal=False), False, "warn"),
        (FileSystem("ext4", "/", journal=False), True, "ok"),
        (FileSystem("ext4", "/srv", journal=True), False, "ok"),
        (FileSystem("tmpfs", "/dev/shm", journal=None), False, "ok"),
        (FileSystem("xfs", "/data", journal=None), False, "ok"),
    ],
)
def test_only_ext4_without_a_journal_where_folders_cannot_be_spread_is_a_warning(
    tmp_path: Path, found: FileSystem, spreads: bool, status: str
) -> None:
    asked: list[str] = []

    def probe(path: str) -> FileSystem:
        asked.append(path)
        return found

    def can_spread(folder: Path) -> bool:
        asked.append(f"spread {folder}")
        return spreads

    check = data_file_system(tmp_path / "state" / "not-yet", probe, can_spread)
    expected = [str(tmp_path)] + ([f"spread {tmp_path}"] if found.slow_to_churn else [])
    assert asked == expected  # the nearest folder that exists; spreading only where it matters
    assert (check.status, check.required) == (status, False)
    assert check.detail.startswith(f"{found.describe()} at {found.mount_point} holds ")
    assert ("EVALBOT_DATA_DIR" in check.fix) == (status == "warn")
    assert ("block groups of their own" in check.detail) == (found.slow_to_churn and spreads)


def test_the_spread_is_tried_for_real_and_leaves_nothing(tmp_path: Path) -> None:
    """On this machine's file systems: where ext4 can spread folders, a journal-less ext4 is no
    warning; tmpfs cannot, and its check does not need to."""
    journal_less = FileSystem("ext4", "/", journal=False)
    check = data_file_system(tmp_path, lambda path: journal_less)
    if file_system_of(str(tmp_path)).kind == "ext4":
        assert check.status == "ok"
    assert list(tmp_path.iterdir()) == []  # the probe folder is gone
    shared_memory = Path("/dev/shm")
    if file_system_of(str(shared_memory)).kind == "tmpfs":
        assert data_file_system(shared_memory, lambda path: journal_less).status == "warn"


def test_a_sandbox_dir_of_its_own_gets_its_own_check(tmp_path: Path) -> None:
    """EVALBOT_SANDBOX_DIR is checked where it points, and only when it is set."""
    mounts = {str(tmp_path / "disk"): FileSystem("ext4", "/", journal=False)}
    mounts[str(tmp_path / "shm")] = FileSystem("tmpfs", "/dev/shm", journal=None)
    for folder in mounts:
        Path(folder).mkdir()
    assert sandbox_file_system(None, mounts.__getitem__) == []
    [slow] = sandbox_file_system(tmp_path / "disk" / "sandboxes", mounts.__getitem__, cannot_spread)
    [quick] = sandbox_file_system(tmp_path / "shm" / "sandboxes", mounts.__getitem__, cannot_spread)
    assert (slow.name, slow.status, quick.status) == ("sandbox file system", "warn", "ok")
    assert "EVALBOT_SANDBOX_DIR" in slow.fix and "tmpfs" in quick.detail


def test_an_unreadable_mount_table_skips_the_check(tmp_path: Path) -> None:
    def probe(path: str) -> FileSystem:
        raise PermissionError(13, "Permission denied")

    check = data_file_system(tmp_path, probe)
    assert check.status == "skip" and "Permission denied" in check.detail


def test_a_host_without_a_c_compiler_gets_a_warning_with_the_package_to_install() -> None:
    without = native_runner(lambda: None, lambda: None)
    assert (without.status, without.required) == ("warn", False)
    assert "Python runner" in without.detail and "apt-get install gcc" in without.fix
    found = native_runner(lambda: "/usr/bin/cc", lambda: None)
    assert found.status == "ok" and "/usr/bin/cc" in found.detail and "musl-tools" in found.detail
    static = native_runner(lambda: "/usr/bin/cc", lambda: "/usr/bin/musl-gcc")
    assert static.status == "ok" and "/usr/bin/musl-gcc" in static.detail
    assert "static" in static.detail and "/usr/bin/cc builds the disk library" in static.detail
    musl_only = native_runner(lambda: None, lambda: "/usr/bin/musl-gcc")
    assert (
        musl_only.status == "ok" and "no system compiler for the disk library" in musl_only.detail
    )
