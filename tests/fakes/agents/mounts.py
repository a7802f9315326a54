"""Try to change the mount table: mount a tmpfs or proc, remount /usr and /repo writable, bind /
over /out, unmount /out, new mount namespace, chroot, pivot_root; also through the mount(8)
binary. Records each outcome; all must fail."""

import ctypes
import ctypes.util
import os
import subprocess

from _common import report

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
CLONE_NEWNS = 0x00020000
os.makedirs("/tmp/m", exist_ok=True)


def call(function, *args):
    encoded = [a.encode() if isinstance(a, str) else a for a in args]
    if function(*encoded) == 0:
        return "succeeded"
    return f"failed: {os.strerror(ctypes.get_errno())}"


def command(*argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except OSError as error:
        return f"failed: {error.strerror}"
    return "succeeded" if done.returncode == 0 else f"failed: {done.stderr.strip()[:200]}"


report(
    {
        "tmpfs": call(libc.mount, "none", "/tmp/m", "tmpfs", 0, None),
        "proc": call(libc.mount, "proc", "/tmp/m", "proc", 0, None),
        "remount /usr rw": call(libc.mount, None, "/usr", None, MS_REMOUNT | MS_BIND, None),
        "remount /repo rw": call(libc.mount, None, "/repo", None, MS_REMOUNT | MS_BIND, None),
        "bind / over /out": call(libc.mount, "/", "/out", None, MS_BIND, None),
        "umount /out": call(libc.umount2, "/out", 2),
        "unshare mount ns": call(libc.unshare, CLONE_NEWNS),
        "chroot": call(libc.chroot, "/tmp"),
        "pivot_root": call(libc.syscall, 155, "/tmp", "/tmp/m"),
        "mount(8)": command("mount", "-t", "tmpfs", "none", "/tmp/m"),
        "unshare(1) -m": command("unshare", "-m", "true"),
    }
)
