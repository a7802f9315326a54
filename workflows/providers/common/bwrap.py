"""The bubblewrap command line of a `local` sandbox (see docs/sandbox.md for the whole design).

bwrap runs as root (so it can reach host folders whatever their parents' permissions) and builds
the sandbox: fresh pid, ipc, uts, cgroup and network namespaces (or, for a sandbox's runner
started by the launcher, the network namespace the launcher joined: network_pool.py); a new root
holding only read-only system folders, a generated /etc/passwd, and the sandbox's own folders. The
command inside is `setpriv`, which drops to the sandbox's unprivileged uid/gid, clears groups,
capabilities and the bounding set, and sets no_new_privs before executing the real command; or,
for a sandbox's runner (`drops_itself`), the runner, which does the same itself before anything
else (runner.py, `drop_privileges`) and refuses to go on if /proc/self/status shows anything left.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workflows.process_owned import staging_path
from workflows.providers.common import small_files

SYSTEM_LINKS = ("bin", "lib", "lib64", "sbin")


def host_folders() -> list[Path]:
    """The host's folders bubblewrap binds from, or needs to start, besides the provider's own:
    /usr, /etc, /dev, /proc, and /bin, /lib, /lib64, /sbin where they are folders, not links."""
    system = [Path("/") / name for name in SYSTEM_LINKS]
    return [Path(p) for p in ("/usr", "/etc", "/dev", "/proc")] + [
        folder for folder in system if folder.is_dir() and not folder.is_symlink()
    ]


@functools.cache
def system_args() -> tuple[str, ...]:
    """/usr, and /bin, /lib, /lib64, /sbin as the host has them (links or folders): read once per
    process, since an installed system does not turn a folder into a link under a running worker.
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        host = f"/{name}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return tuple(args)


# Host files a program may need; everything else under /etc stays out of the sandbox.
ETC_FILES = (
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "mime.types",
    "os-release",
    "debian_version",
    "python3",
    "python3.11",
)
BUILD_ETC_FILES = ("resolv.conf", "gai.conf", "pip.conf")  # builds may use the network
AGENT_USER = "agent"
BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/tmp",  # noqa: S108 - the sandbox's own private tmpfs
    "TMPDIR": "/tmp",  # noqa: S108
    "LANG": "C.UTF-8",
    "USER": AGENT_USER,
    "LOGNAME": AGENT_USER,
}


def write_etc(folder: Path, uid: int, gid: int) -> None:
    """passwd, group and hosts for the sandbox: root, the agent user, nobody."""
    folder.mkdir(mode=0o755, exist_ok=True)
    files = {
        "passwd": (
            "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"{AGENT_USER}:x:{uid}:{gid}:evalbot agent:/tmp:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "group": f"root:x:0:\n{AGENT_USER}:x:{gid}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost ip6-localhost ip6-loopback\n",
    }
    for name, text in files.items():
        path = f"{folder}/{name}"
        small_files.write_text(path, text)
        os.chmod(path, 0o644)  # whatever the umask


OWN_ETC_FILES = ("passwd", "group", "hosts")  # each sandbox's own (write_etc)
SKIPPED_IN_SHARED_ETC = ("ssl/private",)  # host keys: sandboxes could not read them anyway


def shared_etc(folder: Path, source: Path = Path("/etc")) -> Path:
    """One read-only /etc for the sandboxes of this host: copies of the ETC_FILES there are, and
    empty files on which each sandbox binds its own passwd, group and hosts.

    Bound whole, it replaces a bind per file. Every bind costs bubblewrap a read of the mount
    table, which holds every sandbox disk mounted on the host (docs/sandbox.md, "Start-up cost").
    It is named by a digest of what it copies, so a host whose files changed gets a new one at
    the next worker start; older ones stay, bound into sandboxes still running."""
    digest = hashlib.sha256()
    for name in ETC_FILES:
        for path in _walk(source / name, source):
            info = path.lstat()
            target = os.readlink(path) if path.is_symlink() else ""
            line = f"{path}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0{target}\n"
            digest.update(line.encode())
    made = folder / digest.hexdigest()[:16]
    if made.is_dir():
        return made
    partial = staging_path(made)
    partial.mkdir(mode=0o755, parents=True)
    try:
        for name in ETC_FILES:
            _copy(source / name, partial / name, source)
        for name in OWN_ETC_FILES:
            (partial / name).touch(mode=0o644)
        partial.chmod(0o755)
        os.rename(partial, made)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not made.is_dir():  # not another worker of this host that made it first
            raise
    return made


def _walk(path: Path, source: Path) -> list[Path]:
    if path.is_dir() and not path.is_symlink():
        return [path, *sorted(p for p in path.rglob("*") if not _skipped(p, source))]
    return [path] if path.exists() or path.is_symlink() else []


def _skipped(path: Path, source: Path) -> bool:
    name = path.relative_to(source).as_posix()
    return any(name == skip or name.startswith(f"{skip}/") for skip in SKIPPED_IN_SHARED_ETC)


def _copy(path: Path, dest: Path, source: Path) -> None:
    if path.is_dir() and not path.is_symlink():

        def ignore(folder: str, names: list[str]) -> set[str]:
            return {name for name in names if _skipped(Path(folder) / name, source)}

        shutil.copytree(path, dest, symlinks=True, ignore=ignore)
    elif path.exists() or path.is_symlink():
        shutil.copy2(path, dest, follow_symlinks=False)


@dataclass(frozen=True)
class Bind:
    source: Path
    dest: str
    writable: bool = False

    def args(self) -> list[str]:
        return ["--bind" if self.writable else "--ro-bind", str(self.source), self.dest]


@dataclass
class BwrapCommand:
    uid: int
    gid: int
    etc_dir: Path
    binds: Sequence[Bind]
    chdir: str
    tmp_mb: int
    joins_network: bool = False  # launched in a pooled network namespace (network_pool.py)
    as_pid_1: bool = False
    die_with_parent: bool = False
    seccomp_fd: int | None = None
    extra_etc: Sequence[str] = field(default_factory=tuple)
    etc_base: Path | None = None  # shared_etc(): bound as /etc instead of a bind per file
    drops_itself: bool = False  # the command drops to uid/gid itself (the runner's --user)

    def argv(self, command: Sequence[str]) -> list[str]:
        args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
        args += ["--hostname", "sandbox", "--new-session"]
        if not self.joins_network:
            args.append("--unshare-net")
        if self.as_pid_1:
            args.append("--as-pid-1")
        if self.die_with_parent:
            args.append("--die-with-parent")
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for the drop only
        args += [*system_args(), *self._etc()]
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--size",
            str(self.tmp_mb << 20),
            "--tmpfs",
            "/tmp",  # noqa: S108 - a fresh, size-capped tmpfs inside the sandbox
        ]
        for bind in self.binds:
            args += bind.args()
        if self.seccomp_fd is not None:
            args += ["--seccomp", str(self.seccomp_fd)]
        args += ["--chdir", self.chdir, "--"]
        drop = [] if self.drops_itself else self._drop_privileges()
        return args + drop + list(command)

    def _etc(self) -> list[str]:
        if self.etc_base is not None:
            if self.extra_etc:
                raise ValueError("extra /etc files need a bind per file: no etc_base with them")
            args = ["--ro-bind", str(self.etc_base), "/etc", "--perms", "0755", "--dir", "/evalbot"]
        else:
            args = ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/evalbot"]
            for name in (*ETC_FILES, *self.extra_etc):
                args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for name in OWN_ETC_FILES:
            args += ["--ro-bind", str(self.etc_dir / name), f"/etc/{name}"]
        return args

    def _drop_privileges(self) -> list[str]:
        return [
            "/usr/bin/setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
