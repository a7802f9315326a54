"""small_files: whole reads and writes with bare system calls, no descriptor left open."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workflows.providers.common import small_files
from workflows.providers.common.sandbox_layout import NEW_PRIVATE_FILE


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_file_larger_than_one_read_comes_back_whole(tmp_path: Path) -> None:
    data = os.urandom(3 * (1 << 16) + 123)  # four reads of the loop
    path = tmp_path / "big"
    small_files.write_bytes(path, data)
    assert path.read_bytes() == data
    assert small_files.read_bytes(path) == data
    small_files.write_text(path, "short")  # replaces (truncates), as Path.write_text does
    assert small_files.read_text(path) == "short"


def test_a_new_private_file_is_made_once_with_its_mode_and_never_through_a_link(
    tmp_path: Path,
) -> None:
    before = open_descriptors()
    path = tmp_path / "meta"
    umask = os.umask(0)
    try:
        small_files.write_text(path, "{}", NEW_PRIVATE_FILE, 0o600)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        small_files.write_text(path, "again", NEW_PRIVATE_FILE, 0o600)
    assert path.read_text() == "{}"
    target = tmp_path / "elsewhere"
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(FileExistsError):  # O_EXCL with a link in place: the link is not followed
        small_files.write_text(tmp_path / "link", "x", NEW_PRIVATE_FILE, 0o600)
    assert not target.exists()
    assert open_descriptors() == before


def test_a_failed_write_closes_its_descriptor() -> None:
    before = open_descriptors()
    with pytest.raises(OSError) as raised:
        small_files.write_bytes("/dev/full", b"x" * 10, os.O_WRONLY)
    assert raised.value.errno == 28  # ENOSPC
    with pytest.raises(FileNotFoundError):
        small_files.read_bytes("/nonexistent/evalbot")
    assert open_descriptors() == before
