"""A size-capped disk per sandbox: a sparse ext4 image, loop-mounted at the sandbox's folder.

/world and /out live on it, so `limits.disk_mb` is a hard cap: a writer gets ENOSPC at the cap and
the host disk never fills. The image is sparse (it grows with what is written, up to the cap). Its
size is the world's size plus `disk_mb` plus a little for ext4's own bookkeeping.

Formatting is done once per size: `DiskTemplates` runs mkfs.ext4 on a template image (in a
root-only folder, never mounted) the first time a size is needed, and each sandbox's disk is a
sparse copy of it — the ~1 MiB ext4 wrote, copied in-process with `copy_file_range` (a reflink
where the host filesystem has them) instead of a mkfs.ext4 process per sandbox. The copy is the
same filesystem, byte for byte, that mkfs would have made.

Where the host has a C compiler, the copy and the mount, and the unmount and the deletes, are one
native call each (native_disk.py); these functions take it as `native`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from workflows.process_owned import reap_partial, staging_path
from workflows.providers.base import SandboxCreateError, SandboxError
from workflows.providers.local.loop_mount import (
    MOUNT_DATA,
    NO_LOOP_CONFIGURE,
    LoopConfigureUnsupported,
    mount_image,
    unmount,
)
from workflows.providers.local.native_disk import COPY, MKDIR, UMOUNT, DiskStepFailed, NativeDisk
from workflows.providers.local.stage_timer import StageTimer, timed

SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MIB = 1 << 20


def _tool(name: str) -> str:
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise SandboxCreateError(f"{name} is not installed (Debian: e2fsprogs / mount)")
    return found


async def _run(argv: list[str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode(errors="replace").strip()


def disk_size_mb(content_bytes: int, disk_mb: int) -> int:
    """Room for the initial content, `disk_mb` more, and ext4 metadata (~3 %, at least 8 MiB)."""
    content_mb = -(-content_bytes * 11 // 10 // MIB)
    total = content_mb + disk_mb
    return total + max(8, total * 3 // 100)


async def format_image(image: Path, size_mb: int) -> None:
    """A new sparse image of `size_mb`, formatted ext4: no journal, no reserved blocks, and no
    blocks reserved for growing it online (`resize_inode`), which nothing does to a sandbox disk
    and which made most of the data each sandbox's copy carries (docs/sandbox.md, "Start-up
    cost")."""
    image.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    os.truncate(image, size_mb * MIB)  # sparse: blocks are allocated as the sandbox writes
    options = "lazy_itable_init=1,lazy_journal_init=1,nodiscard"
    features = "^has_journal,^resize_inode"
    mkfs = [_tool("mkfs.ext4"), "-q", "-F", "-O", features, "-m", "0", "-E", options]
    code, detail = await _run([*mkfs, str(image)])
    if code != 0:
        image.unlink(missing_ok=True)
        raise SandboxCreateError(f"could not format the sandbox disk: {detail[-200:]}")


def sparse_copy(source: Path, target: Path) -> None:
    """Copy `source` to a new file `target` (mode 0600), holes kept as holes."""
    with open(source, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            for start, end in data_extents(src.fileno(), size):
                offset = start
                while offset < end:
                    offset += os.copy_file_range(src.fileno(), fd, end - offset, offset, offset)
            os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            target.unlink(missing_ok=True)
            raise
        os.close(fd)


def data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of the parts of a file that hold data (SEEK_DATA / SEEK_HOLE)."""
    extents, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole is left
            break
        end = os.lseek(fd, start, os.SEEK_HOLE)
        extents.append((start, end))
        offset = end
    return extents


class DiskTemplates:
    """One formatted template image per disk size, made on first use and copied per sandbox.

    Templates live in a root-only folder (mode 0700) and are never mounted, so no sandbox can
    change what the next one starts from. Several workers on one host may share the folder: a
    template is formatted under a temporary name and renamed into place, so none sees half of one.
    """

    VERSION = 2  # bump when format_image's options change: old templates are then not used

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._locks: dict[int, asyncio.Lock] = {}

    def path(self, size_mb: int) -> Path:
        return self.folder / f"ext4-v{self.VERSION}-{size_mb}mb.img"

    async def template(self, size_mb: int) -> Path:
        path = self.path(size_mb)
        if path.is_file():
            return path
        async with self._locks.setdefault(size_mb, asyncio.Lock()):
            if not path.is_file():
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                staging = staging_path(path)  # a restarted worker knows it for a leftover
                try:
                    await format_image(staging, size_mb)
                    os.replace(staging, path)
                finally:
                    staging.unlink(missing_ok=True)
        return path

    def reap_partial(self) -> list[str]:
        """Remove templates half-made by worker processes that are gone (killed mid-mkfs)."""
        return reap_partial(self.folder)

    async def copy(self, image: Path, size_mb: int) -> None:
        """`image`: a new disk of `size_mb`, formatted (a copy of the template)."""
        await asyncio.to_thread(copy_template, await self.template(size_mb), image)


def copy_template(template: Path, image: Path) -> None:
    image.parent.mkdir(parents=True, exist_ok=True)
    try:
        sparse_copy(template, image)
    except OSError as error:
        raise SandboxCreateError(f"could not copy the sandbox disk: {error}") from None


async def create_disk(
    image: Path,
    mountpoint: Path,
    size_mb: int,
    timer: StageTimer | None = None,
    templates: DiskTemplates | None = None,
    native: NativeDisk | None = None,
) -> None:
    """A formatted disk at `image` (a template's copy, or formatted here), mounted at
    `mountpoint`."""
    if templates is not None:
        template = await templates.template(size_mb)
        await asyncio.to_thread(create_disk_from, template, image, mountpoint, timer, native)
        return
    with timed(timer, "create: disk file + mkfs.ext4"):
        await format_image(image, size_mb)
    await asyncio.to_thread(_mount_new_disk, image, mountpoint, timer)


def create_disk_from(
    template: Path,
    image: Path,
    mountpoint: Path,
    timer: StageTimer | None = None,
    native: NativeDisk | None = None,
) -> None:
    """`create_disk` from a template already made, in the calling thread."""
    if native is not None and native.loop_configure:
        with timed(timer, "create: disk copy + mount (native)"):
            if _created_natively(native, template, image, mountpoint):
                return
    with timed(timer, "create: disk from template"):
        copy_template(template, image)
    _mount_new_disk(image, mountpoint, timer)


def _created_natively(native: NativeDisk, template: Path, image: Path, mountpoint: Path) -> bool:
    """Whether `native` made the disk; False on a kernel without LOOP_CONFIGURE (nothing made:
    the Python steps mount it with a process instead, from now on)."""
    try:
        native.create(template, image, mountpoint)
    except DiskStepFailed as error:
        if error.step == COPY:
            raise SandboxCreateError(f"could not copy the sandbox disk: {error}") from None
        if error.step == MKDIR:  # as Path.mkdir raises it (FileExistsError, ...)
            raise OSError(error.errno, error.strerror, error.filename) from None
        if error.errno in NO_LOOP_CONFIGURE:
            native.loop_configure = False
            return False
        raise SandboxCreateError(
            f"could not mount the sandbox disk (loop devices?): {error}"
        ) from None
    return True


def _mount_new_disk(image: Path, mountpoint: Path, timer: StageTimer | None = None) -> None:
    """Mount a new disk at a new folder `mountpoint`; on failure both are removed (but a folder
    that was there already)."""
    try:
        mountpoint.mkdir(mode=0o755)
    except OSError:
        image.unlink(missing_ok=True)
        raise
    try:
        with timed(timer, "create: mount"):
            _mount(image, mountpoint)
    except SandboxError:
        mountpoint.rmdir()
        image.unlink(missing_ok=True)
        raise
    mountpoint.chmod(0o755)


def _mount(image: Path, mountpoint: Path) -> None:
    try:
        mount_image(image, mountpoint)  # loop_mount.py: no processes
    except LoopConfigureUnsupported:  # Linux < 5.8: the same mount through `mount -o loop`
        _mount_with_process(image, mountpoint)
    except OSError as error:
        raise SandboxCreateError(
            f"could not mount the sandbox disk (loop devices?): {error}"
        ) from None


def _mount_with_process(image: Path, mountpoint: Path) -> None:
    options = f"loop,nosuid,nodev,noatime,{MOUNT_DATA.decode()}"  # loop_mount.py: why
    argv = [_tool("mount"), "-t", "ext4", "-o", options, str(image), str(mountpoint)]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()
        raise SandboxCreateError(
            f"could not mount the sandbox disk (loop devices?): {detail[-200:]}"
        )


async def remount_after_reboot(image: Path, mountpoint: Path) -> None:
    """Mount the disk of a sandbox whose mount a reboot undid (its outputs are on it).

    Only a disk last written before the host booted: one written since is being created right
    now (its folder is made before its disk is mounted) or was unmounted on purpose, and mounting
    it a second time would put two loop devices on one image, which corrupts it. Workers on one
    host remount a disk one at a time (a lock on the image)."""
    await asyncio.to_thread(_remount_after_reboot, image, mountpoint)


def _remount_after_reboot(image: Path, mountpoint: Path) -> None:
    try:
        fd = os.open(image, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        written = os.fstat(fd).st_mtime
        if mountpoint.is_dir() and not os.path.ismount(mountpoint) and written < boot_time():
            _mount(image, mountpoint)
    finally:
        os.close(fd)  # and the lock with it


def boot_time() -> float:
    """When the host booted, in seconds since the epoch (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError("/proc/stat has no btime line")


async def remove_disk(
    image: Path,
    mountpoint: Path,
    timer: StageTimer | None = None,
    native: NativeDisk | None = None,
) -> None:
    """Unmount (lazily if something still holds it) and delete, in one thread. Safe to repeat."""
    await asyncio.to_thread(_remove_disk_now, image, mountpoint, timer, native)


def _remove_disk_now(
    image: Path, mountpoint: Path, timer: StageTimer | None, native: NativeDisk | None
) -> None:
    if native is not None:
        with timed(timer, "teardown: umount + rm disk (native)"):
            _remove_natively(native, image, mountpoint)
        return
    with timed(timer, "teardown: umount"):
        _unmount(mountpoint)
    with timed(timer, "teardown: rm disk"):
        _delete(image, mountpoint)


def _remove_natively(native: NativeDisk, image: Path, mountpoint: Path) -> None:
    try:
        native.remove(image, mountpoint)
    except DiskStepFailed as error:
        if error.step == UMOUNT:
            raise SandboxError(f"could not unmount the sandbox disk: {error}") from None
        raise


def _unmount(mountpoint: Path) -> None:
    if os.path.ismount(mountpoint):
        try:
            unmount(mountpoint)  # lazily if busy (loop_mount.py)
        except OSError as error:
            raise SandboxError(f"could not unmount the sandbox disk: {error}") from None


def _delete(image: Path, mountpoint: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        mountpoint.rmdir()
    image.unlink(missing_ok=True)


def disk_full(mountpoint: Path) -> bool:
    """Whether the sandbox disk is (nearly) full right now: less than 2 MiB or 1 % free (ext4
    refuses writes with about 1 MiB left). The runner applies the same test while the agent runs."""
    try:
        stats = os.statvfs(mountpoint)
    except OSError:
        return False
    floor = max(2 * MIB, stats.f_blocks * stats.f_frsize // 100)
    return stats.f_bavail * stats.f_frsize < floor
