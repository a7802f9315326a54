"""The in-process world copy (workflows/providers/common/tree_copy.py) that replaced `cp -a`."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflows.providers.base import SandboxCreateError
from workflows.providers.common import tree_copy
from workflows.providers.common.sandbox_layout import copy_world_blocking
from workflows.providers.common.tree_copy import SpecialFileError, copy_tree


def a_world(root: Path) -> Path:
    world = root / "world"
    (world / "documents" / "deep").mkdir(parents=True)
    (world / "world.toml").write_text('name = "w"\n')
    (world / "documents" / "deep" / "data.bin").write_bytes(os.urandom(3 << 20))
    script = world / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    os.utime(script, ns=(1_000_000_000, 2_000_000_000))
    (world / "host-file").symlink_to("/etc/hostname")
    (world / "relative").symlink_to("documents/deep/data.bin")
    sealed = world / "sealed"
    sealed.mkdir()
    (sealed / "inside.txt").write_text("kept\n")
    sealed.chmod(0o555)
    return world


def test_the_copy_has_every_file_folder_and_link_with_its_mode_and_times(tmp_path: Path) -> None:
    world = a_world(tmp_path)
    copy = tmp_path / "copy"
    copy_tree(world, copy)
    originals = sorted(p.relative_to(world) for p in world.rglob("*"))
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == originals
    for relative in originals:
        source, made = world / relative, copy / relative
        before, after = source.lstat(), made.lstat()
        assert after.st_mode == before.st_mode, relative
        if not source.is_symlink():
            assert after.st_mtime_ns == before.st_mtime_ns, relative
        if source.is_file() and not source.is_symlink():
            assert made.read_bytes() == source.read_bytes(), relative
    assert (copy / "run.sh").stat().st_mode & 0o777 == 0o750
    assert (copy / "sealed").stat().st_mode & 0o777 == 0o555
    assert (copy / "sealed" / "inside.txt").read_text() == "kept\n"


def test_links_are_copied_as_links_never_followed(tmp_path: Path) -> None:
    world = a_world(tmp_path)
    copy = tmp_path / "copy"
    copy_tree(world, copy)
    assert os.readlink(copy / "host-file") == "/etc/hostname"
    assert os.readlink(copy / "relative") == "documents/deep/data.bin"


def test_the_copy_is_private(tmp_path: Path) -> None:
    world = a_world(tmp_path)
    copy = tmp_path / "copy"
    copy_tree(world, copy)
    (copy / "world.toml").write_text("changed by the agent\n")
    (copy / "documents" / "deep" / "data.bin").unlink()
    assert (world / "world.toml").read_text() == 'name = "w"\n'
    assert (world / "documents" / "deep" / "data.bin").stat().st_size == 3 << 20


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_an_owner_is_given_every_entry(tmp_path: Path) -> None:
    world = a_world(tmp_path)
    copy = tmp_path / "copy"
    copy_tree(world, copy, owner=(4242, 4343))
    entries = [copy, *copy.rglob("*")]
    assert {(p.lstat().st_uid, p.lstat().st_gid) for p in entries} == {(4242, 4343)}
    assert world.stat().st_uid == 0


def test_a_pipe_in_the_world_is_refused_with_its_name(tmp_path: Path) -> None:
    world = tmp_path / "world"
    world.mkdir()
    os.mkfifo(world / "pipe")
    with pytest.raises(SpecialFileError):
        copy_tree(world, tmp_path / "copy")
    with pytest.raises(SandboxCreateError, match=r"could not copy the world world: .*pipe"):
        copy_world_blocking(world, tmp_path / "again")


def test_a_missing_world_is_named(tmp_path: Path) -> None:
    with pytest.raises(SandboxCreateError, match="does not exist"):
        copy_world_blocking(tmp_path / "nowhere", tmp_path / "copy")


def test_an_existing_destination_is_never_copied_into(tmp_path: Path) -> None:
    world = a_world(tmp_path)
    (tmp_path / "copy").mkdir()
    with pytest.raises(FileExistsError):
        copy_tree(world, tmp_path / "copy")


def test_bytes_are_copied_by_read_and_write_where_the_kernel_will_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """copy_file_range refuses between some file systems (EXDEV on older kernels): the copy
    falls back to reading and writing."""

    def refuse(*_: object) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(tree_copy.os, "copy_file_range", refuse)
    world = a_world(tmp_path)
    copy_tree(world, tmp_path / "copy")
    data = world / "documents" / "deep" / "data.bin"
    assert (tmp_path / "copy" / "documents" / "deep" / "data.bin").read_bytes() == data.read_bytes()


@pytest.fixture
def reflink_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder on a fresh XFS with reflink (a sparse image, loop-mounted), for the FICLONE path."""
    if os.geteuid() != 0 or not shutil.which("mkfs.xfs"):
        pytest.skip("needs root and xfsprogs (make bootstrap installs it)")
    image, mountpoint = tmp_path / "xfs.img", tmp_path / "xfs"
    with open(image, "wb") as handle:
        handle.truncate(512 << 20)  # XFS wants at least 300 MB
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], check=True)
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mountpoint)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this kernel cannot mount XFS")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def used_bytes(folder: Path) -> int:
    os.sync()
    stats = os.statvfs(folder)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def test_on_a_reflink_file_system_the_copy_shares_the_blocks(reflink_folder: Path) -> None:
    """64 MiB of world cost next to nothing to copy. Copied by reading and writing (a fallback
    taken first, the kernel's copy skipped) they would use another 64 MiB. On XFS the kernel's
    copy_file_range shares blocks too, so this does not tell FICLONE from it: a wrong FICLONE
    number still passes here."""
    world = reflink_folder / "world"
    world.mkdir()
    data = os.urandom(1 << 20) * 64
    (world / "big.bin").write_bytes(data)
    before = used_bytes(reflink_folder)
    copy_tree(world, reflink_folder / "copy")
    grown = used_bytes(reflink_folder) - before
    assert grown < 4 << 20, f"the copy used {grown >> 20} MiB: blocks were not shared"
    assert (reflink_folder / "copy" / "big.bin").read_bytes() == data
