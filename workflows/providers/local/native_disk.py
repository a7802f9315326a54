"""A sandbox disk's create and remove in one native call each (disk_ops.c), where the host has a
C compiler; disk.py does the same steps in Python where it has not.

Each system call Python makes from a worker thread lets go of the global lock and takes it back
from the event loop, which holds it most of the time: the two dozen calls of a disk's create and
remove waited that many times (docs/sandbox.md, "Start-up cost"). A call into this library lets
go of it once.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from workflows.providers.common.native_runner import native_library

SOURCE = Path(__file__).with_name("disk_ops.c")
# the steps of disk_ops.c's `enum step`, by number
COPY, MKDIR, LOOP, MOUNT, UMOUNT, RMDIR, UNLINK = range(1, 8)


class DiskStepFailed(OSError):
    """A step of a native create or remove failed; `step` says which (COPY … UNLINK)."""

    def __init__(self, step: int, code: int, path: Path) -> None:
        super().__init__(code, os.strerror(code), str(path))
        self.step = step


class NativeDisk:
    """disk_ops.c, loaded. `loop_configure` turns False on a kernel without LOOP_CONFIGURE, after
    which disk.py mounts with `mount -o loop` instead."""

    def __init__(self, library: Path) -> None:
        loaded = ctypes.CDLL(str(library))  # a plain CDLL: each call lets go of the GIL
        step = ctypes.POINTER(ctypes.c_int)
        self._create = loaded.evalbot_disk_create
        self._create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, step]
        self._create.restype = ctypes.c_int
        self._remove = loaded.evalbot_disk_remove
        self._remove.argtypes = [ctypes.c_char_p, ctypes.c_char_p, step]
        self._remove.restype = ctypes.c_int
        self.loop_configure = True

    def create(self, template: Path, image: Path, mountpoint: Path) -> None:
        """`image`, a copy of `template`, mounted at the new folder `mountpoint`; on failure
        neither is left."""
        step = ctypes.c_int(0)
        paths = (os.fsencode(template), os.fsencode(image), os.fsencode(mountpoint))
        code = self._create(*paths, ctypes.byref(step))
        if code:
            raise DiskStepFailed(step.value, code, mountpoint if step.value > COPY else image)

    def remove(self, image: Path, mountpoint: Path) -> None:
        """Unmount (lazily if busy), remove the folder and the image; safe to repeat."""
        step = ctypes.c_int(0)
        code = self._remove(os.fsencode(image), os.fsencode(mountpoint), ctypes.byref(step))
        if code:
            raise DiskStepFailed(step.value, code, image if step.value == UNLINK else mountpoint)


def native_disk(folder: Path, compiler: str | None = None) -> NativeDisk | None:
    """disk_ops.c built in `folder` (once) and loaded, or None: disk.py's Python steps."""
    instead = "sandbox disks are made and removed by Python's system calls"
    library = native_library(folder, SOURCE, compiler, instead=instead)
    return None if library is None else NativeDisk(library)
