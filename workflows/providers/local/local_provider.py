"""The `local` provider: bubblewrap sandboxes on this machine (docs/sandbox.md has the design).

Per sandbox: a loop-mounted ext4 disk at `<sandbox_dir>/<id>/` (world/, case/, out/, etc/,
meta.json, runner.log), a cgroup `evalbot/<id>` (v1 or v2; rlimits in no-cgroup mode:
cgroup_backend.py), and a uid of its own. `start` launches the runner detached, as pid 1 of the
sandbox's pid namespace, so it outlives the worker and any worker can `attach` to it later.
Requires root, bubblewrap, util-linux (setpriv, prlimit, mount) and e2fsprogs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from workflows.prewarm.image_builder import ImageBuilder, read_ready
from workflows.prewarm.image_label import image_path
from workflows.prewarm.layers import ensure_mounted
from workflows.prewarm.prewarmer import Prewarmer
from workflows.prewarm.reset_builder import ResetBuilder
from workflows.prewarm.snapshots import SnapshotIndex
from workflows.prewarm.warm_pool import HEADROOM_MB, WarmPool
from workflows.process_owned import is_gone, reap_partial
from workflows.providers import egress
from workflows.providers.base import (
    ExecResult,
    HostUnsupported,
    PrewarmedImage,
    ResourceLimits,
    ResourceUsage,
    RunSandbox,
    SandboxCreateError,
    SandboxError,
    SandboxNotFound,
    SandboxProvider,
    SandboxSpec,
)
from workflows.providers.common import RUNNER
from workflows.providers.common.bwrap import (
    BASE_ENV,
    BUILD_ETC_FILES,
    Bind,
    BwrapCommand,
    host_folders,
    shared_etc,
    write_etc,
)
from workflows.providers.common.folder import FolderSandbox, read_state
from workflows.providers.common.launch import joined, run_bounded, wait_ready
from workflows.providers.common.native_runner import native_launcher, native_runner
from workflows.providers.common.sandbox_layout import (
    ID_PATTERN,
    Layout,
    build_env,
    check_sandbox_id,
    copy_world_blocking,
    dir_env,
    make_sandbox_dir,
    new_sandbox_id,
    read_meta,
    run_sandboxes,
    sandboxes_of,
    spec_to_meta,
    tree_size,
    write_case_files,
    write_meta,
)
from workflows.providers.common.settle import settled
from workflows.providers.local import seccomp
from workflows.providers.local.cgroup_backend import CgroupBackend, SandboxGroup, select_backend
from workflows.providers.local.cgroups import CGROUP_ROOT, CgroupUsage, group_name
from workflows.providers.local.compiled_runner import compiled_runner, in_sandbox_path
from workflows.providers.local.disk import (
    DiskTemplates,
    create_disk,
    create_disk_from,
    disk_full,
    disk_size_mb,
    remount_after_reboot,
    remove_disk,
)
from workflows.providers.local.launch_namespace import LaunchNamespace
from workflows.providers.local.native_disk import NativeDisk, native_disk
from workflows.providers.local.network_pool import NetworkPool
from workflows.providers.local.no_cgroups import NoCgroupBackend, looks_out_of_memory, rlimit_prefix
from workflows.providers.local.slots import HOST_UID_DIR, UidSlots
from workflows.providers.local.stage_timer import StageTimer, timed
from workflows.providers.spawner import RunnerSpawner

log = logging.getLogger(__name__)

SANDBOX_PYTHON = "/usr/bin/python3"
SANDBOX_DIRS = {"repo": "/repo", "world": "/world", "case": "/case", "out": "/out"}
BUILD_LIMITS = ResourceLimits(cpu=2.0, memory_mb=4096, pids=1024, file_size_mb=2048, disk_mb=2048)
MIB = 1 << 20


def runner_command(
    runner: Path,
    limits: ResourceLimits,
    command: str,
    ready_fd: int,
    timeout_s: float,
    user: int | None = None,
) -> list[str]:
    """`user`: the uid (and gid) the runner drops to itself, first thing (no setpriv then)."""
    drop = [] if user is None else ["--user", f"{user}:{user}"]
    python = [SANDBOX_PYTHON, "-I", "-S"] if runner.suffix in (".py", ".pyc") else []
    return [
        *python, in_sandbox_path(runner),
        "--out", "/out", "--cwd", "/repo", "--timeout", f"{timeout_s:g}",
        "--log-limit", str(limits.stdout_limit_mb * MIB), "--fsize", str(limits.file_size_mb * MIB),
        "--ready-fd", str(ready_fd), "--pid-namespace", *drop, "--", command,
    ]  # fmt: skip


def seccomp_memfd() -> int | None:
    program = seccomp.program()
    if program is None:
        return None
    fd = os.memfd_create("evalbot-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def chown_tree(top: Path, uid: int, gid: int) -> None:
    os.lchown(top, uid, gid)
    for folder, dirs, names in os.walk(top):
        for name in (*dirs, *names):
            os.lchown(os.path.join(folder, name), uid, gid)


def close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class LocalSandbox(FolderSandbox):
    def __init__(
        self, provider: LocalProvider, sandbox_id: str, layout: Layout, meta: dict[str, Any]
    ) -> None:
        super().__init__(sandbox_id, layout, meta)
        self.provider = provider
        self.uid = int(meta["uid"])
        self.cgroups: SandboxGroup = provider.backend.group(group_name(sandbox_id), self.uid)
        self.disk_image = provider.disk_dir / f"{sandbox_id}.ext4"

    def owner(self) -> tuple[int, int]:
        return (self.uid, self.uid)

    @property
    def limits(self) -> ResourceLimits:
        return ResourceLimits(**self.meta["limits"])

    @property
    def allow_domains(self) -> list[str]:
        return [str(entry) for entry in self.meta.get("allow_domains") or ()]

    @property
    def egress_socket(self) -> Path:
        return self.layout.root / "egress" / "proxy.sock"

    def env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        fixed = dir_env(SANDBOX_DIRS) | (egress.proxy_env() if self.allow_domains else {})
        return build_env(BASE_ENV, self.meta["env"], extra or {}, fixed=fixed)

    def bwrap(self, **options: Any) -> BwrapCommand:
        binds = [
            Bind(Path(self.meta["image"]), "/repo"),
            Bind(self.layout.world, "/world", writable=True),
            Bind(self.layout.case, "/case"),
            Bind(self.layout.out, "/out", writable=True),
            self.provider.runner_bind(),
        ]
        if self.allow_domains:
            binds += egress.binds(self.egress_socket)
        return BwrapCommand(
            uid=self.uid,
            gid=self.uid,
            etc_dir=self.layout.root / "etc",
            etc_base=self.provider.etc_base,
            binds=binds,
            chdir="/repo",
            tmp_mb=self.limits.disk_mb,
            **options,
        )

    def start_argv(
        self, command: str, ready_fd: int, filter_fd: int | None, joins_network: bool = False
    ) -> list[str]:
        """The runner in its sandbox: bubblewrap as pid 1's parent, the runner dropping to the
        sandbox's uid itself. `joins_network`: the launcher starts bubblewrap in a pooled
        network namespace (network_pool.py), so bubblewrap makes none."""
        limits = self.limits
        runner = runner_command(
            self.provider.runner, limits, command, ready_fd, limits.wall_timeout_s, self.uid
        )
        bwrap = self.bwrap(
            as_pid_1=True, seccomp_fd=filter_fd, drops_itself=True, joins_network=joins_network
        )
        return bwrap.argv(self.provider.rlimits(limits) + runner)

    def require_alive(self) -> None:
        if not self.cgroups.exists():
            raise SandboxError(f"sandbox {self.id} has been terminated")

    async def start(self, command: str, env: dict[str, str] | None = None) -> None:
        if await asyncio.to_thread(self.already_started):
            return  # a retried start: the runner is already there
        self.require_alive()
        if self.allow_domains:
            await self.start_egress()
            command = egress.wrap_command(command)
        network = await self.provider.network_for(self.id)
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        filter_fd = seccomp_memfd()
        argv = self.start_argv(command, write_fd, filter_fd, joins_network=network is not None)
        timer = self.provider.timer
        held = None
        try:
            held = self.provider.launch_namespace_copy()
            with timed(timer, "start: bwrap launch"):
                await self.provider.spawner.spawn_exec(
                    argv,
                    env=self.env(env),
                    log=self.layout.log,
                    cgroup_procs=self.cgroups.procs_files(),
                    pass_fds=[fd for fd in (write_fd, filter_fd) if fd is not None],
                    namespace=None if held is None else (held, self.layout.root),
                    network=network,
                    started=self.record_started,
                )
        except BaseException:
            close_fds(read_fd)
            raise
        finally:
            close_fds(write_fd, filter_fd, held, network)
        with timed(timer, "start: runner ready"):
            ready = await wait_ready(read_fd, self.provider.start_timeout_s)
        if not ready:
            raise SandboxError(f"the runner of sandbox {self.id} did not start: {self.log_tail()}")

    async def start_egress(self) -> None:
        """The egress proxy for this run's allow_domains, outside the sandbox (egress/)."""
        await egress.stop_proxy(self.meta.get("egress"))  # an earlier attempt's, if any
        self.meta["egress"] = await egress.launch_proxy(
            self.egress_socket,
            run_id=str(self.meta.get("run_id", self.id)),
            allow=self.allow_domains,
            record=self.layout.out / egress.RECORD_NAME,
            log=self.layout.log,
            resolve=self.provider.egress_resolve,
            max_seconds=self.limits.wall_timeout_s + egress.PROXY_GRACE_S,
        )
        await asyncio.to_thread(write_meta, self.layout, self.meta)

    async def stop_egress(self) -> None:
        if not self.allow_domains:
            return  # no proxy was ever started for it
        with contextlib.suppress(SandboxError):
            proxy = (await asyncio.to_thread(read_meta, self.layout)).get("egress")
            await egress.stop_proxy(proxy)

    def log_tail(self) -> str:
        try:
            lines = self.layout.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return " / ".join(lines[-3:]) or "no log"

    async def exec(self, command: list[str], timeout_s: float = 60) -> ExecResult:
        self.require_alive()
        fsize = self.limits.file_size_mb * MIB
        limited = ["/usr/bin/prlimit", f"--fsize={fsize}", "--core=0", "--", *command]
        limited = self.provider.rlimits(self.limits) + limited
        filter_fd = seccomp_memfd()
        try:
            argv = self.bwrap(die_with_parent=True, seccomp_fd=filter_fd).argv(limited)
            return await run_bounded(
                joined(self.cgroups.procs_files(), argv),
                env=self.env(None),
                cwd="/",
                timeout_s=timeout_s,
                pass_fds=[filter_fd] if filter_fd is not None else [],
            )
        finally:
            close_fds(filter_fd)

    async def usage(self) -> ResourceUsage:
        with timed(self.provider.timer, "collect: usage"):
            return await asyncio.to_thread(self._usage)  # cgroup files: off the loop

    def _usage(self) -> ResourceUsage:
        measured = self.cgroups.usage() if self.cgroups.exists() else CgroupUsage(0.0, 0, 0, 0)
        if self.provider.backend.mode == "none":
            measured = self.rlimit_usage()
        return ResourceUsage(
            cpu_seconds=round(measured.cpu_seconds, 3),
            peak_memory_mb=round(measured.peak_memory_bytes / MIB, 1),
            wall_seconds=round(self.wall_seconds(), 3),
            oom_killed=measured.oom_kills > 0,
            pids_limit_hit=measured.pids_max_hits > 0,
            disk_limit_hit=bool((self.state() or {}).get("disk_full"))
            or disk_full(self.layout.root),
        )

    def rlimit_usage(self) -> CgroupUsage:
        """No-cgroup mode: CPU and peak memory from the runner's rusage (the largest process's
        peak RSS), memory exhaustion from what the agent said (no_cgroups.py)."""
        state = self.state() or {}
        rusage = state.get("rusage") or {}
        finished = state.get("status") == "finished" and state.get("exit_code") != 0
        return CgroupUsage(
            cpu_seconds=float(rusage.get("cpu_seconds", 0.0)),
            peak_memory_bytes=int(float(rusage.get("max_rss_mb", 0.0)) * MIB),
            oom_kills=int(finished and looks_out_of_memory(self.layout.out / "stderr.log")),
            pids_max_hits=0,
        )

    async def terminate(self) -> None:
        timer = self.provider.timer
        await self.stop_egress()
        try:  # no existence check: a removal cut short (pids goes first) leaves the others
            with timed(timer, "teardown: kill"):
                killed = await self.cgroups.kill_all()
            if not killed:
                raise SandboxError(f"sandbox {self.id}: some processes would not die")
            with timed(timer, "teardown: cgroup remove"):
                await self.cgroups.remove()
            await remove_disk(self.disk_image, self.layout.root, timer, self.provider.native_disk)
        except OSError as error:
            raise SandboxError(f"could not terminate sandbox {self.id}: {error.strerror}") from None
        with timed(timer, "teardown: uid release"):
            self.provider.slots.release(self.uid, self.id)
        if self.provider.networks is not None:  # on the same evidence: every process is dead
            self.provider.networks.release(self.id)


class LocalProvider(SandboxProvider):
    name = "local"
    quick_provision = True
    host_bound = True

    def __init__(
        self,
        sandbox_dir: Path,
        image_dir: Path,
        *,
        uid_base: int = 100_000,
        uid_count: int = 50_000,
        uid_dir: Path = HOST_UID_DIR,
        build_env: Mapping[str, str] | None = None,
        build_limits: ResourceLimits = BUILD_LIMITS,
        build_timeout_s: float = 1800,
        cgroup_root: Path = CGROUP_ROOT,
        cgroups: str = "auto",
        start_timeout_s: float = 30,
        build_allow_domains: Sequence[str] = (),
        egress_resolve: Mapping[str, str] | None = None,
        cow: str = "auto",
        warm_pool_size: int = 0,
        native: bool = True,
    ) -> None:
        """`native`: False runs the Python runner and has the spawner fork itself even where a C
        compiler is found: what hosts without one run (the tests' hostile battery meets both)."""
        self.sandbox_dir = sandbox_dir.absolute()
        self.disk_dir = self.sandbox_dir / ".disks"
        # None: mkfs.ext4 per sandbox (benchmarks/orchestration.py --mkfs-per-sandbox compares)
        self.disk_templates: DiskTemplates | None = DiskTemplates(self.disk_dir / "templates")
        self.images = ImageBuilder(image_dir.absolute())
        self.snapshots = SnapshotIndex(self.images.image_dir / "prewarmed")
        self.prewarmer = Prewarmer(self.images, self.snapshots)
        self.resets = ResetBuilder(
            self.images, self.snapshots, owner=(uid_base - 1, uid_base - 1), cow=cow
        )
        self.slots = UidSlots(uid_dir, uid_base, uid_count, home=self.sandbox_dir)
        self.build_uid = uid_base - 1
        self.build_env = dict(build_env or {})
        self.build_limits = build_limits
        self.build_timeout_s = build_timeout_s
        self.cgroup_root = cgroup_root
        self.cgroup_mode = cgroups
        self._backend: tuple[CgroupBackend, str | None] | None = None
        self.start_timeout_s = start_timeout_s
        self.build_allow_domains = tuple(build_allow_domains)
        self.egress_resolve = dict(egress_resolve or {})  # pinned names (tests, private mirrors)
        self._host_checked = False
        self.native = native
        self.runner = RUNNER  # native or compiled once the host is checked (native_runner.py)
        self.etc_base: Path | None = None  # the shared /etc, once the host is checked
        self.native_disk: NativeDisk | None = None  # disk_ops.c, once the host is checked
        self.timer: StageTimer | None = None  # per-stage durations, for benchmarks only
        self.pool: WarmPool[LocalSandbox] | None = None
        if warm_pool_size > 0:
            first_mb = disk_size_mb(HEADROOM_MB * MIB, ResourceLimits().disk_mb)
            self.pool = WarmPool(self, warm_pool_size, first_mb)
        # bubblewrap forked by a small helper, not by the (large) worker through a shell
        self.spawner = RunnerSpawner(SANDBOX_PYTHON)
        self.launch_namespace: LaunchNamespace | None = None  # with the launcher (launch.c)
        self.networks: NetworkPool | None = None  # with the launcher too

    def close(self) -> None:
        self.spawner.close()
        if self.launch_namespace is not None:
            self.launch_namespace.close()
        if self.networks is not None:
            self.networks.close()

    @property
    def backend(self) -> CgroupBackend:
        """The cgroup backend, chosen on first use (cgroup_backend.py)."""
        return self.chosen_backend()[0]

    def chosen_backend(self) -> tuple[CgroupBackend, str | None]:
        """The backend and, for a forced mode this host cannot give, why not."""
        if self._backend is None:
            state_dir = self.sandbox_dir / ".groups"
            self._backend = select_backend(self.cgroup_mode, self.cgroup_root, state_dir)
        return self._backend

    def check_host(self) -> None:
        if self._host_checked:
            return
        backend, cgroup_problem = self.chosen_backend()
        problem = host_problem(self.cgroup_root, "none")
        if problem is None and cgroup_problem:
            problem = f"{cgroup_problem}; {FORCE_NONE}"
        if problem is None:
            try:
                backend.prepare()
            except OSError as error:
                problem = f"could not set up cgroup {backend.mode} ({error}); {FORCE_NONE}"
        if problem:
            raise HostUnsupported(f"the local sandbox provider cannot run here: {problem}")
        if isinstance(backend, NoCgroupBackend):
            log.warning("evalbot: notice: %s", backend.notice())
        make_sandbox_dir(self.sandbox_dir)
        runners = self.sandbox_dir / ".runner"
        native = native_runner(runners) if self.native else None
        self.runner = native or compiled_runner(runners, SANDBOX_PYTHON)
        self.spawner.launcher = native_launcher(runners) if self.native else None
        self.native_disk = native_disk(runners) if self.native else None
        if self.spawner.launcher is not None:
            keep = [*host_folders(), self.images.image_dir]
            self.launch_namespace = LaunchNamespace(self.spawner.launcher, self.sandbox_dir, keep)
            self.networks = NetworkPool(self.spawner.launcher, self._torn_down)
        self.etc_base = self._shared_etc()
        self._host_checked = True

    async def network_for(self, sandbox_id: str) -> int | None:
        """A descriptor of the sandbox's pooled network namespace, or None: bubblewrap makes one."""
        return None if self.networks is None else await self.networks.claim(sandbox_id)

    def _torn_down(self, sandbox_id: str) -> bool:
        """Teardown removes a sandbox's folder only after it killed every process in it."""
        return not (self.sandbox_dir / sandbox_id).exists()

    def launch_namespace_copy(self) -> int | None:
        """A descriptor of the mount namespace sandboxes start from, or None: the host's."""
        return None if self.launch_namespace is None else self.launch_namespace.copy()

    def _shared_etc(self) -> Path | None:
        try:
            return shared_etc(self.sandbox_dir / ".etc")
        except OSError as error:
            log.warning("evalbot: sandboxes bind /etc file by file (no shared copy: %s)", error)
            return None

    def runner_bind(self) -> Bind:
        return Bind(self.runner, in_sandbox_path(self.runner))

    def rlimits(self, limits: ResourceLimits) -> list[str]:
        """The `prlimit` prefix of commands in no-cgroup mode; nothing with cgroups."""
        return rlimit_prefix(limits) if self.backend.mode == "none" else []

    # -- create ---------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        self.check_host()
        with timed(self.timer, "create: image + disk size"):
            spec, size_mb = await self._ready_image_and_disk_size(spec)
        if self.pool is not None:
            claimed = await self.pool.claim(spec, size_mb)  # provisioning as a claim
            if claimed is not None:
                return claimed
        with timed(self.timer, "create: uid claim"):
            sandbox = self.new_sandbox(new_sandbox_id(spec.run_id), spec_to_meta(spec))
        await self.provision(sandbox, self.make_filled(sandbox, size_mb, spec))
        return sandbox

    async def make_filled(self, sandbox: LocalSandbox, size_mb: int, spec: SandboxSpec) -> None:
        """A shell and what fills it for `spec`: from a template, in one hop to a thread (each
        hop hands Python's global lock between threads twice, docs/sandbox.md)."""
        if self.disk_templates is None:  # mkfs per sandbox (the benchmarks' before side)
            await self.make_shell(sandbox, size_mb, spec.limits)
            await self.fill(sandbox, spec)
            return
        template = await self.disk_templates.template(size_mb)
        await asyncio.to_thread(self._make_filled_from, template, sandbox, spec)

    def _make_filled_from(self, template: Path, sandbox: LocalSandbox, spec: SandboxSpec) -> None:
        self._make_shell_from(template, sandbox, spec.limits)
        with timed(self.timer, "create: world, case, meta"):
            self._fill(spec, sandbox.layout, sandbox.owner(), None)  # the shell wrote the meta

    def new_sandbox(self, sandbox_id: str, spec_meta: dict[str, Any]) -> LocalSandbox:
        uid = self.slots.claim(sandbox_id)
        meta = {"id": sandbox_id, "provider": self.name, "uid": uid, "created_at": time.time()}
        meta |= spec_meta | {"runner": None}
        return LocalSandbox(self, sandbox_id, Layout(self.sandbox_dir / sandbox_id), meta)

    async def provision(self, sandbox: LocalSandbox, step: Awaitable[None]) -> None:
        """Run a provisioning step; on failure the sandbox is torn down and the error told. A
        cancelled step still runs to its end first, so the teardown removes all it made."""
        try:
            await settled(step)
        except BaseException as error:
            with contextlib.suppress(SandboxError):
                await settled(sandbox.terminate())
            if isinstance(error, OSError):
                raise SandboxCreateError(f"could not create a sandbox: {error}") from None
            raise

    async def make_shell(self, sandbox: LocalSandbox, size_mb: int, limits: ResourceLimits) -> None:
        """What does not depend on the run: disk, cgroups, uid, /etc, an empty /out; from a
        template, in one thread (each hop to a thread costs the worker a wake-up and its lock)."""
        self.check_host()  # the warm pool comes here directly; cgroup v2 must be prepared first
        root = sandbox.layout.root
        if self.disk_templates is None:
            await create_disk(sandbox.disk_image, root, size_mb, self.timer)
            await asyncio.to_thread(self._furnish, sandbox, limits)
            return
        template = await self.disk_templates.template(size_mb)
        await asyncio.to_thread(self._make_shell_from, template, sandbox, limits)

    def _make_shell_from(
        self, template: Path, sandbox: LocalSandbox, limits: ResourceLimits
    ) -> None:
        root, native = sandbox.layout.root, self.native_disk
        create_disk_from(template, sandbox.disk_image, root, self.timer, native)
        self._furnish(sandbox, limits)

    def _furnish(self, sandbox: LocalSandbox, limits: ResourceLimits) -> None:
        layout, uid = sandbox.layout, sandbox.uid
        # Metadata first: a worker killed from here on leaves a sandbox that `attach` finds and
        # `terminate` removes whole (cgroups, disk), instead of cgroups nobody knows about.
        with timed(self.timer, "create: meta, /etc, /out"):
            write_meta(layout, sandbox.meta)
            layout.log.touch(mode=0o600)
            layout.out.mkdir(mode=0o755)
            os.chown(layout.out, uid, uid)
            write_etc(layout.root / "etc", uid, uid)
        with timed(self.timer, "create: cgroup"):
            sandbox.cgroups.create(limits)

    async def fill(self, sandbox: LocalSandbox, spec: SandboxSpec) -> None:
        """What does: the world, the case files, the metadata (a pooled shell's claim gave it
        the spec)."""
        with timed(self.timer, "create: world, case, meta"):
            await asyncio.to_thread(self._fill, spec, sandbox.layout, sandbox.owner(), sandbox.meta)

    @staticmethod
    def _fill(
        spec: SandboxSpec, layout: Layout, owner: tuple[int, int], meta: dict[str, Any] | None
    ) -> None:
        copy_world_blocking(spec.world_dir, layout.world, owner)
        write_case_files(layout.case, spec.case_files)
        if meta is not None:
            write_meta(layout, meta)

    def reap_orphans(self, grace_s: float = 60.0) -> list[int]:
        """Free uid claims of sandboxes that never came to exist (a worker killed mid-create),
        and remove disk templates, compiled runners and shared /etc copies it left half-made.
        Workers call it at start; `grace_s` keeps it clear of creates in progress elsewhere."""
        if self.disk_templates is not None:
            self.disk_templates.reap_partial()
        for folder in (self.sandbox_dir / ".runner", self.sandbox_dir / ".etc"):
            reap_partial(folder)
        return self.slots.reap(grace_s)

    async def sandboxes_of(self, run_id: str) -> list[str]:
        """Not a create in progress: a folder without metadata whose claiming process lives."""
        return await asyncio.to_thread(self._sandboxes_of, run_id)

    def _sandboxes_of(self, run_id: str) -> list[str]:
        found = sandboxes_of(self.sandbox_dir, run_id)
        return [i for i in found if Layout(self.sandbox_dir / i).meta.exists() or self._cut_off(i)]

    async def run_sandboxes(self) -> list[RunSandbox]:
        """This host's sandboxes (the host's reaping pass at start, docs/engine.md), and those
        cut off mid-create by a worker process that is gone (no metadata, no experiment)."""
        listed = await asyncio.to_thread(run_sandboxes, self.sandbox_dir)
        return listed + await asyncio.to_thread(self._cut_off_sandboxes)

    def _cut_off_sandboxes(self) -> list[RunSandbox]:
        """A create claims its uid before it makes the folder, so a folder without metadata
        whose claim is gone, or whose claiming process is, is no create in progress."""
        found = []
        for folder in sorted(self.sandbox_dir.iterdir()) if self.sandbox_dir.is_dir() else ():
            if not ID_PATTERN.fullmatch(folder.name) or Layout(folder).meta.exists():
                continue
            if self._cut_off(folder.name):
                found.append(RunSandbox(id=folder.name, experiment="", run=""))
        return found

    def _cut_off(self, sandbox_id: str) -> bool:
        """Whether a sandbox without metadata is no create in progress: its uid claim is gone,
        or the process that claimed it is."""
        process = self.slots.process_of(sandbox_id)
        return process is None or is_gone(process)

    async def remove_leftover(self, sandbox_id: str) -> None:
        """Also one cut off before its metadata was written, or whose metadata is unreadable:
        its cgroups, disk and uid claim are found by its id and removed the way `terminate`
        would."""
        try:
            await (await self.attach(sandbox_id)).terminate()
            return
        except SandboxError:
            pass
        uid = await asyncio.to_thread(self.slots.uid_of, sandbox_id)
        cgroups = self.backend.group(group_name(sandbox_id), uid)
        await cgroups.kill_all()  # both do nothing for groups that are not there
        await cgroups.remove()
        image, mountpoint = self.disk_dir / f"{sandbox_id}.ext4", self.sandbox_dir / sandbox_id
        await remove_disk(image, mountpoint, native=self.native_disk)
        await asyncio.to_thread(self.slots.release_owner, sandbox_id)

    async def attach(self, sandbox_id: str) -> LocalSandbox:
        with timed(self.timer, "attach"):
            return await self._attach(sandbox_id)

    async def _attach(self, sandbox_id: str) -> LocalSandbox:
        layout = Layout(self.sandbox_dir / check_sandbox_id(sandbox_id))
        try:
            meta = await asyncio.to_thread(read_meta, layout)  # on the disk: it is mounted
        except SandboxNotFound:
            await remount_after_reboot(self.disk_dir / f"{sandbox_id}.ext4", layout.root)
            meta = await asyncio.to_thread(read_meta, layout)
        if meta.get("provider") != self.name:
            raise SandboxNotFound(f"sandbox {sandbox_id} was not created by the local provider")
        return LocalSandbox(self, sandbox_id, layout, meta)

    # -- images ---------------------------------------------------------------------------------

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        """From the newest prewarmed ancestor when there is one (prewarm/reset_builder.py)."""
        self.check_host()
        return await self.resets.build(
            source_repo, commit, setup, self._run_setup, self._run_in_place
        )

    async def prewarm(
        self, source_repo: Path, commit: str, setup: str, *, rebuild: bool = False
    ) -> PrewarmedImage:
        self.check_host()
        return await self.prewarmer.prewarm(
            source_repo, commit, setup, self._run_setup, rebuild=rebuild
        )

    async def discard_prewarmed(
        self, source_repo: Path, reference: str, *, protect: Collection[str] = ()
    ) -> None:
        live = await asyncio.to_thread(self.live_images)
        await self.prewarmer.discard(reference, protect=protect, live=live)

    def live_images(self) -> set[str]:
        """Images bound into the sandboxes that exist now."""
        found = set()
        for folder in self.sandbox_dir.iterdir() if self.sandbox_dir.is_dir() else ():
            with contextlib.suppress(SandboxError):
                if not folder.name.startswith(".") and (folder / "meta.json").is_file():
                    found.add(str(read_meta(Layout(folder)).get("image")))
        return found

    async def _ready_image_and_disk_size(self, spec: SandboxSpec) -> tuple[SandboxSpec, int]:
        """The spec naming the image's folder (without its origin label), mounted if need be,
        and the size of its disk: the files read in one thread."""
        image = Path(image_path(spec.image))
        record, size_mb = await asyncio.to_thread(
            lambda: (read_ready(image.parent), disk_mb_for(spec))
        )
        if record is not None and not await ensure_mounted(image.parent, record):
            raise SandboxCreateError(f"image {image} lost its prewarmed base; build it again")
        if not image.is_dir():
            raise SandboxCreateError(f"image {image} is not a built checkout (see build_image)")
        return dataclasses.replace(spec, image=str(image)), size_mb

    async def _run_in_place(self, repo: Path, build_dir: Path, setup: str) -> dict[str, Any]:
        """A reset's incremental step: the tree's ownership is already right (reset_builder.py)."""
        return await self._run_setup(repo, build_dir, setup, own_tree=False)

    async def _run_setup(
        self, repo: Path, build_dir: Path, setup: str, *, own_tree: bool = True
    ) -> dict[str, Any]:
        uid = self.build_uid
        if own_tree:
            await asyncio.to_thread(chown_tree, repo, uid, uid)
        os.chown(build_dir, uid, uid)
        write_etc(build_dir.parent / "etc", uid, uid)
        cgroups = self.backend.group(group_name(f"build-{secrets.token_hex(6)}"))
        cgroups.create(self.build_limits)
        filter_fd = seccomp_memfd()
        try:
            async with self._build_egress(build_dir.parent / "egress.sock") as socket_path:
                result = await self._build_in_sandbox(
                    repo, build_dir, setup, cgroups, filter_fd, socket_path
                )
        finally:
            close_fds(filter_fd)
            await cgroups.kill_all()
            await cgroups.remove()
        state = read_state(build_dir)
        if state is None:
            detail = (result.stderr or result.stdout).decode(errors="replace").strip()[-300:]
            raise SandboxCreateError(f"the build sandbox did not start: {detail or 'no output'}")
        return state

    @contextlib.asynccontextmanager
    async def _build_egress(self, socket_path: Path) -> AsyncIterator[Path | None]:
        """Builds have no network interface either; the egress proxy lets them reach only
        `build_allow_domains` (the package registries), or nothing when that is empty."""
        if not self.build_allow_domains:
            yield None
            return
        proxy = egress.EgressProxy(
            str(socket_path), self.build_allow_domains, run_id="build", resolve=self.egress_resolve
        )
        async with proxy:
            yield socket_path

    async def _build_in_sandbox(
        self,
        repo: Path,
        build_dir: Path,
        setup: str,
        cgroups: SandboxGroup,
        filter_fd: int | None,
        egress_socket: Path | None,
    ) -> ExecResult:
        binds = [
            Bind(repo, "/repo", True),
            Bind(build_dir, "/out", True),
            self.runner_bind(),
        ]
        fixed = dir_env({"repo": "/repo", "out": "/out"})
        if egress_socket is not None:
            binds += egress.binds(egress_socket)
            setup = egress.wrap_command(setup)
            fixed |= egress.proxy_env()
        command = BwrapCommand(
            uid=self.build_uid,
            gid=self.build_uid,
            etc_dir=build_dir.parent / "etc",
            binds=binds,
            chdir="/repo",
            tmp_mb=self.build_limits.disk_mb,
            as_pid_1=True,
            die_with_parent=True,
            seccomp_fd=filter_fd,
            extra_etc=BUILD_ETC_FILES,
        )
        runner = self.rlimits(self.build_limits)
        runner += runner_command(self.runner, self.build_limits, setup, -1, self.build_timeout_s)
        env = build_env(BASE_ENV, self.build_env, fixed=fixed)
        return await run_bounded(
            joined(cgroups.procs_files(), command.argv(runner)),
            env=env,
            cwd="/",
            timeout_s=self.build_timeout_s + 60,
            pass_fds=[filter_fd] if filter_fd is not None else [],
        )


def disk_mb_for(spec: SandboxSpec) -> int:
    """The sandbox disk: room for the world and case files, `limits.disk_mb` more, ext4's share."""
    content = tree_size(spec.world_dir) if spec.world_dir.is_dir() else 0
    content += sum(len(data) for data in spec.case_files.values())
    return disk_size_mb(content, spec.limits.disk_mb)


HOST_TOOLS = {  # what the provider runs on the host, and the Debian package that has it
    "bwrap": "bubblewrap",
    "setpriv": "util-linux",
    "prlimit": "util-linux",
    "mkfs.ext4": "e2fsprogs",
    "mount": "mount",
    "git": "git",
}


FORCE_NONE = (
    "set EVALBOT_SANDBOX_CGROUPS=none to run without cgroups (docs/sandbox.md), or use another "
    "provider (EVALBOT_PROVIDER=modal)"
)


def host_problem(cgroup_root: Path, cgroups: str = "auto") -> str | None:
    """What stops the provider on this host, with the fix, in one sentence; None if nothing.
    Without cgroups the provider still runs (no-cgroup mode), unless a cgroup mode is forced."""
    if os.geteuid() != 0:
        return "it must run as root (cgroups, loop disks, a uid per sandbox); run evalbot as root"
    for tool, package in HOST_TOOLS.items():
        if shutil.which(tool, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") is None:
            return f"{tool} is not installed; install it (Debian: apt-get install {package})"
    if not RUNNER.stat().st_mode & 0o004:
        return f"{RUNNER} must be readable by everyone (the sandbox users run it)"
    if not Path(SANDBOX_PYTHON).is_file():
        return f"{SANDBOX_PYTHON} (the runner's interpreter inside sandboxes) is missing"
    _, problem = select_backend(cgroups, cgroup_root, Path("/nonexistent"))
    if problem and cgroups in ("v1", "v2"):
        return f"{problem}; {FORCE_NONE}"
    return problem
