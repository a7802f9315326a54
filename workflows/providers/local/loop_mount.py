"""Loop-mount an image and unmount it with system calls, not `mount`/`umount` processes.

`mount -o loop` costs a process, a scan of every loop device (util-linux looks for one already
backed by the file) and a read of the mount table; `umount` another process and mount table
read. Per sandbox that was two of the costliest steps of creating and removing it. Here: a free
loop device from /dev/loop-control, bound to the image with LOOP_CONFIGURE (Linux ≥ 5.8) and the
autoclear flag — the device detaches itself when the filesystem is unmounted, exactly as with
`mount -o loop` —, then mount(2) with the same options (nosuid, nodev, noatime, nobarrier);
umount2(2), lazily (MNT_DETACH) if the filesystem is busy. The calls block: run them in a thread.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import struct
from pathlib import Path

LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A
LO_FLAGS_AUTOCLEAR = 4
MS_NOSUID, MS_NODEV, MS_NOATIME = 2, 4, 1024
# No cache flushes. A flush sent to a loop device is an fsync of its image on the host's file
# system: on a journaled one, a journal commit and a flush of the host's disk at every sandbox's
# unmount, and at every fsync an agent makes. A sandbox disk has no journal, so flushes kept it
# no more consistent across a crash; its outputs are collected before its teardown.
MOUNT_DATA = b"nobarrier"
MNT_DETACH = 2
NAME_BYTES = 64
# struct loop_config: fd, block_size, struct loop_info64 (232 bytes), 8 reserved u64
LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32sQQ")
ATTEMPTS = 20  # another process may take the free device between asking and binding
NO_LOOP_CONFIGURE = (errno.EINVAL, errno.ENOTTY)  # how a kernel before 5.8 refuses it


class LoopConfigureUnsupported(OSError):
    """The kernel has no LOOP_CONFIGURE (Linux < 5.8): mount with `mount -o loop` instead."""


@functools.cache
def _libc() -> ctypes.CDLL:
    """Loaded once: a CDLL per call cost a dlopen and its attribute lookups every mount."""
    return ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def loop_config(image_fd: int, image: Path) -> bytes:
    name = os.fsencode(image)[-NAME_BYTES + 1 :]
    info = LOOP_INFO64.pack(0, 0, 0, 0, 0, 0, 0, 0, LO_FLAGS_AUTOCLEAR, name, b"", b"", 0, 0)
    return struct.pack("=II", image_fd, 0) + info + bytes(64)


def attach_loop(image: Path) -> int:
    """An open fd of a loop device now backed by `image` (autoclear)."""
    image_fd = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        control = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
        try:
            for _ in range(ATTEMPTS):
                number = fcntl.ioctl(control, LOOP_CTL_GET_FREE)
                device = os.open(f"/dev/loop{number}", os.O_RDWR | os.O_CLOEXEC)
                try:
                    fcntl.ioctl(device, LOOP_CONFIGURE, loop_config(image_fd, image))
                    return device
                except OSError as error:
                    os.close(device)
                    if error.errno in NO_LOOP_CONFIGURE:
                        raise LoopConfigureUnsupported(error.errno, str(error)) from None
                    if error.errno != errno.EBUSY:
                        raise
            raise OSError(errno.EBUSY, "no free loop device after several attempts")
        finally:
            os.close(control)
    finally:
        os.close(image_fd)


def mount_image(image: Path, mountpoint: Path) -> None:
    """Mount the ext4 `image` at `mountpoint` through a loop device (nosuid, nodev, noatime,
    nobarrier)."""
    device = attach_loop(image)
    try:
        flags = MS_NOSUID | MS_NODEV | MS_NOATIME
        path = os.readlink(f"/proc/self/fd/{device}")  # /dev/loopN
        source, target = os.fsencode(path), os.fsencode(mountpoint)
        if _libc().mount(source, target, b"ext4", flags, MOUNT_DATA) != 0:
            raise _fail("mount")
    finally:
        os.close(device)  # autoclear: the device goes with the mount (or now, if none)


def unmount(mountpoint: Path) -> None:
    """Unmount, lazily if the filesystem is busy; nothing if it is not mounted."""
    libc = _libc()
    if libc.umount2(os.fsencode(mountpoint), 0) == 0:
        return
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOENT):  # not a mount point (any more)
        return
    if code == errno.EBUSY and libc.umount2(os.fsencode(mountpoint), MNT_DETACH) == 0:
        return
    raise _fail("umount")
