"""The bubblewrap command line of a `local` sandbox (see docs/sandbox.md for the whole design).

bwrap runs as root (so it can reach host folders whatever their parents' permissions) and builds
the sandbox: fresh pid, ipc, uts, cgroup and (unless building) network namespaces; a new root
holding only read-only system folders, a generated /etc/passwd, and the sandbox's own folders. The
command inside is `setpriv`, which drops to the sandbox's unprivileged uid/gid, clears groups,
capabilities and the bounding set, and sets no_new_privs before executing the real command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_LINKS = ("bin", "lib", "lib64", "sbin")
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
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)


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
    network: bool = False
    as_pid_1: bool = False
    die_with_parent: bool = False
    seccomp_fd: int | None = None
    extra_etc: Sequence[str] = field(default_factory=tuple)

    def argv(self, command: Sequence[str]) -> list[str]:
        args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
        args += ["--hostname", "sandbox", "--new-session"]
        if not self.network:
            args.append("--unshare-net")
        if self.as_pid_1:
            args.append("--as-pid-1")
        if self.die_with_parent:
            args.append("--die-with-parent")
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # for setpriv only
        args += self._system() + self._etc()
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
        return args + self._drop_privileges() + list(command)

    def _system(self) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for name in SYSTEM_LINKS:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        return args

    def _etc(self) -> list[str]:
        args = ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/evalbot"]
        for name in (*ETC_FILES, *self.extra_etc):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for name in ("passwd", "group", "hosts"):
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
