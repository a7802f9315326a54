"""A private copy of a folder, made in this process (a sandbox's world, sandbox_layout.py).

It replaced a `cp -a --reflink=auto` process per sandbox: forking the (large) worker and
starting `cp` cost ~2.3 ms of CPU per sandbox, this copy ~0.7 ms for a small world
(docs/sandbox.md, "Start-up cost"). What it copies is what a world holds: folders, regular files
and symbolic links (as links, never followed), each with its permission bits and times; blocks
are shared with the source (FICLONE) where the file system can, else copied in the kernel
(copy_file_range). Anything else (a pipe, a socket, a device node) is refused, and so are
extended attributes and ACLs, which `cp -a` kept and no world needs. With `owner`, every copied
entry is given that uid and gid, in the same pass.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

FICLONE = 0x40049409  # ioctl: share the source's blocks (btrfs, XFS); others refuse it
CHUNK = 1 << 30
# copy_file_range refusals that mean "not between these two files": copy with read/write
NO_KERNEL_COPY = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SpecialFileError(OSError):
    """The source holds something other than a folder, a regular file or a symbolic link."""


def copy_tree(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    owner: tuple[int, int] | None = None,
) -> None:
    """Copy the folder `source` to `dest`, which must not exist. Raises OSError (or
    SpecialFileError) and leaves what it made so far for the caller to remove."""
    _copy_folder(os.fspath(source), os.fspath(dest), owner)


def _copy_folder(source: str, dest: str, owner: tuple[int, int] | None) -> None:
    info = os.lstat(source)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", source)
    os.mkdir(dest, 0o700)  # its own mode last: a read-only folder must be filled first
    with os.scandir(source) as entries:
        for entry in entries:
            _copy_entry(entry, os.path.join(dest, entry.name), owner)
    _keep_attributes(dest, info, owner)


def _copy_entry(entry: os.DirEntry[str], dest: str, owner: tuple[int, int] | None) -> None:
    if entry.is_symlink():
        os.symlink(os.readlink(entry.path), dest)
        info = entry.stat(follow_symlinks=False)
        os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
        if owner is not None:
            os.lchown(dest, *owner)
    elif entry.is_dir(follow_symlinks=False):
        _copy_folder(entry.path, dest, owner)
    elif entry.is_file(follow_symlinks=False):
        _copy_file(entry.path, dest, owner)
    else:
        raise SpecialFileError(errno.EPERM, "not a folder, file or symbolic link", entry.path)


def _copy_file(source: str, dest: str, owner: tuple[int, int] | None) -> None:
    source_fd = os.open(source, READ_FLAGS)
    try:
        info = os.fstat(source_fd)
        if not stat.S_ISREG(info.st_mode):  # replaced since it was listed
            raise SpecialFileError(errno.EPERM, "not a regular file", source)
        dest_fd = os.open(dest, WRITE_FLAGS, 0o600)
        try:
            _copy_bytes(source_fd, dest_fd)
        finally:
            os.close(dest_fd)
    finally:
        os.close(source_fd)
    _keep_attributes(dest, info, owner)


def _copy_bytes(source_fd: int, dest_fd: int) -> None:
    try:
        fcntl.ioctl(dest_fd, FICLONE, source_fd)
        return
    except OSError:
        pass  # no shared blocks here (ext4, tmpfs, another file system)
    copied = 0
    try:
        while done := os.copy_file_range(source_fd, dest_fd, CHUNK):
            copied += done
    except OSError as error:
        if copied or error.errno not in NO_KERNEL_COPY:
            raise
        while data := os.read(source_fd, 1 << 20):
            view = memoryview(data)
            while view:
                view = view[os.write(dest_fd, view) :]


def _keep_attributes(path: str, info: os.stat_result, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        os.lchown(path, *owner)  # before chmod: a chown clears set-id bits
    os.chmod(path, stat.S_IMODE(info.st_mode))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
