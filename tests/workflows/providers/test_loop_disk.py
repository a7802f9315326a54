"""The local provider's disks: template copies (disk.py) and loop mounts by system call
(loop_mount.py), made and removed by Python's calls or by one native call each (native_disk.py,
disk_ops.c), which must behave alike. Needs root and loop devices, like the provider."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.support.dead_process import dead_process_id
from tests.support.mounts import mounts
from workflows.process_owned import this_process
from workflows.providers.base import SandboxCreateError, SandboxError
from workflows.providers.common.native_runner import (
    LIBRARY_FLAGS,
    Toolchain,
    built,
    find_compiler,
    require_library_check,
)
from workflows.providers.local import disk, loop_mount
from workflows.providers.local.disk import DiskTemplates, create_disk, remove_disk
from workflows.providers.local.loop_mount import mount_image, unmount
from workflows.providers.local.native_disk import SOURCE, NativeDisk

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/dev/loop-control").exists(), reason="needs root and loops"
)
UNKNOWN_IOCTL = 0x4CFE  # no loop driver knows it: how a kernel without LOOP_CONFIGURE answers


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """disk_ops.c built as the provider builds it, and built to use an ioctl number the loop
    driver does not know (a kernel before 5.8, for the native create)."""
    compiler = find_compiler()
    if compiler is None:
        pytest.skip("no C compiler here")
    folder = tmp_path_factory.mktemp("disk-ops")
    before_5_8 = (*LIBRARY_FLAGS, f"-DEVALBOT_LOOP_CONFIGURE={UNKNOWN_IOCTL:#x}")
    return {
        kernel: built(folder, SOURCE, Toolchain(compiler, flags), require_library_check)
        for kernel, flags in (("loop_configure", LIBRARY_FLAGS), ("before_5_8", before_5_8))
    }


@pytest.fixture(params=["native", "python"])
def native(request: pytest.FixtureRequest, libraries: dict[str, Path]) -> NativeDisk | None:
    return NativeDisk(libraries["loop_configure"]) if request.param == "native" else None


def loops_backed_by(image: Path) -> list[str]:
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        if backing.read_text().strip().startswith(str(image)):  # or "<image> (deleted)"
            found.append(backing.parent.parent.name)
    return found


async def loops_left(image: Path, within_s: float = 10.0) -> list[str]:
    """The loop devices still backed by `image` once they had `within_s` to go: since Linux 5.17
    the autoclear detach runs after the last close returns (from a work queue), not within it."""
    for _ in range(int(within_s / 0.05)):
        if not loops_backed_by(image):
            return []
        await asyncio.sleep(0.05)
    return loops_backed_by(image)


async def test_a_copy_is_the_template_byte_for_byte_and_stays_sparse(tmp_path: Path) -> None:
    templates = DiskTemplates(tmp_path / "templates")
    await templates.copy(tmp_path / "a.ext4", 64)
    await templates.copy(tmp_path / "b.ext4", 64)
    template = templates.path(64)
    assert oct(template.parent.stat().st_mode & 0o777) == "0o700"
    for copy in (tmp_path / "a.ext4", tmp_path / "b.ext4"):
        assert copy.read_bytes() == template.read_bytes()
        assert copy.stat().st_blocks * 512 < 8 << 20  # a 64 MiB image holding ~1 MiB
        assert copy.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in template.parent.iterdir()] == [template.name]  # one, no leftovers


async def test_a_template_holds_no_journal_and_nothing_reserved_for_growing(
    tmp_path: Path,
) -> None:
    """What each sandbox's copy carries: a disk the size of a default sandbox's, in which the
    blocks ext4 reserves for growing online (resize_inode) would be most of the data."""
    templates = DiskTemplates(tmp_path / "templates")
    template = await templates.template(1055)
    told = await asyncio.create_subprocess_exec(
        "dumpe2fs", "-h", str(template), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    header = (await told.communicate())[0].decode()
    features = next(line for line in header.splitlines() if line.startswith("Filesystem features"))
    assert "resize_inode" not in features and "has_journal" not in features
    assert template.stat().st_blocks * 512 < 256 << 10  # about 76 KiB; 604 KiB with resize_inode


@pytest.mark.parametrize("way", ["native", "python"])
@pytest.mark.parametrize("kernel", ["loop_configure", "before_5_8"])
async def test_a_disk_mounts_caps_and_leaves_no_loop_device(
    tmp_path: Path,
    kernel: str,
    way: str,
    libraries: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a kernel without LOOP_CONFIGURE (imitated with an ioctl number the loop driver does not
    know) the disk is mounted by `mount -o loop` instead, with the same options and clean-up; a
    native create that meets such a kernel leaves nothing and hands over to the Python steps."""
    native = NativeDisk(libraries[kernel]) if way == "native" else None
    if kernel == "before_5_8":
        monkeypatch.setattr(loop_mount, "LOOP_CONFIGURE", UNKNOWN_IOCTL)
    elif native is not None:  # the native call mounts it itself: Python's mount must not run
        monkeypatch.setattr(disk, "mount_image", refuse_python_mount)
    image, mountpoint = tmp_path / "disk.ext4", tmp_path / "root"
    await create_disk(image, mountpoint, 16, templates=DiskTemplates(tmp_path / "t"), native=native)
    try:
        assert os.path.ismount(mountpoint) and loops_backed_by(image)
        with pytest.raises(OSError):  # ENOSPC at the cap
            (mountpoint / "fill").write_bytes(b"x" * (32 << 20))
        options = next(found for point, found in mounts() if point == str(mountpoint))
        assert {"nosuid", "nodev", "noatime", "nobarrier"} <= set(options.split(","))
        assert oct(mountpoint.stat().st_mode & 0o777) == "0o755"
    finally:
        await remove_disk(image, mountpoint, native=native)
    assert not image.exists() and not mountpoint.exists()
    assert await loops_left(image) == []  # autoclear: the device went with the mount
    if native is not None:
        assert native.loop_configure is (kernel == "loop_configure")


def refuse_python_mount(image: Path, mountpoint: Path) -> None:
    raise AssertionError("the Python mount ran")


async def test_a_create_whose_template_is_missing_leaves_nothing(
    tmp_path: Path, native: NativeDisk | None
) -> None:
    image, mountpoint = tmp_path / "disk.ext4", tmp_path / "root"
    with pytest.raises(SandboxCreateError, match="could not copy the sandbox disk"):
        await asyncio.to_thread(
            disk.create_disk_from, tmp_path / "gone.img", image, mountpoint, None, native
        )
    assert sorted(os.listdir(tmp_path)) == []


async def test_a_create_onto_a_folder_already_there_removes_its_image_and_keeps_the_folder(
    tmp_path: Path, native: NativeDisk | None
) -> None:
    templates = DiskTemplates(tmp_path / "t")
    image, mountpoint = tmp_path / "disk.ext4", tmp_path / "root"
    (mountpoint / "kept").mkdir(parents=True)
    with pytest.raises(FileExistsError):
        await create_disk(image, mountpoint, 16, templates=templates, native=native)
    assert not image.exists() and os.listdir(mountpoint) == ["kept"]
    assert not os.path.ismount(mountpoint)


async def test_a_disk_that_will_not_mount_leaves_no_image_folder_or_loop_device(
    tmp_path: Path, native: NativeDisk | None
) -> None:
    """A template that is no filesystem (all zeros): the mount fails, and all is removed."""
    template, image, mountpoint = tmp_path / "zeros.img", tmp_path / "disk.ext4", tmp_path / "root"
    template.touch()
    os.truncate(template, 16 << 20)
    with pytest.raises(SandboxCreateError, match="could not mount the sandbox disk"):
        await asyncio.to_thread(disk.create_disk_from, template, image, mountpoint, None, native)
    assert sorted(os.listdir(tmp_path)) == ["zeros.img"]
    assert await loops_left(image) == []


async def test_a_disk_still_held_is_detached_lazily_and_removal_can_be_repeated(
    tmp_path: Path, native: NativeDisk | None
) -> None:
    image, mountpoint = tmp_path / "disk.ext4", tmp_path / "root"
    await create_disk(image, mountpoint, 16, templates=DiskTemplates(tmp_path / "t"), native=native)
    held = os.open(mountpoint / ".", os.O_RDONLY)
    try:
        await remove_disk(image, mountpoint, native=native)
        assert not os.path.ismount(mountpoint) and not mountpoint.exists() and not image.exists()
        assert loops_backed_by(image)  # the holder keeps the filesystem, and its device
    finally:
        os.close(held)
    assert await loops_left(image) == []
    await remove_disk(image, mountpoint, native=native)  # nothing left to do: no error


def test_a_busy_disk_is_detached_lazily(tmp_path: Path) -> None:
    image, mountpoint = tmp_path / "disk.ext4", tmp_path / "root"
    asyncio.run(DiskTemplates(tmp_path / "t").copy(image, 16))
    mountpoint.mkdir()
    mount_image(image, mountpoint)
    held = os.open(mountpoint / ".", os.O_RDONLY)
    try:
        unmount(mountpoint)
        assert not os.path.ismount(mountpoint)
    finally:
        os.close(held)
    unmount(mountpoint)  # not mounted any more: nothing to do


def test_a_template_half_made_by_a_dead_worker_is_removed_at_the_next_start(
    tmp_path: Path,
) -> None:
    """A worker killed mid-mkfs leaves its temporary template; the reaping at a worker's start
    removes it, and never one a live worker is making."""
    templates = DiskTemplates(tmp_path / "templates")
    asyncio.run(templates.copy(tmp_path / "a.ext4", 16))
    dead = dead_process_id()
    half_made = templates.folder / f".{templates.path(32).name}.abc123.{dead}"
    in_progress = templates.folder / f".{templates.path(64).name}.def456.{this_process()}"
    half_made.write_bytes(b"half")
    in_progress.write_bytes(b"being made")

    assert templates.reap_partial() == [half_made.name]

    assert sorted(p.name for p in templates.folder.iterdir()) == sorted(
        [templates.path(16).name, in_progress.name]
    )


async def test_a_native_remove_that_cannot_unmount_says_so(
    tmp_path: Path, libraries: dict[str, Path]
) -> None:
    """umount2 failing for a reason other than "not mounted" (here ENOTDIR: the folder's parent
    is a file) is the unmount's failure, not a missing folder to skip."""
    (tmp_path / "file").write_text("")
    native = NativeDisk(libraries["loop_configure"])
    with pytest.raises(SandboxError, match="could not unmount the sandbox disk"):
        await remove_disk(tmp_path / "disk.ext4", tmp_path / "file" / "root", native=native)
