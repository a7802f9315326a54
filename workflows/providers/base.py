"""The sandbox provider contract. Every provider (local, process, modal) implements it and passes
the same conformance suite (tests/workflows/providers/test_conformance.py).

A sandbox is laid out as the agent repository contract says (docs/architecture.md), at these
paths inside it:

    /repo   the built agent repository at the arm's commit (read-only)
    /world  a private, writable copy of the case's world
    /case   case.json and attachments (read-only)
    /out    where the agent writes answer.md / answer.json, transcript.jsonl, usage.json

Providers that cannot mount at those paths (the `process` provider) expose the real locations to the
agent as EVALBOT_REPO_DIR, EVALBOT_WORLD_DIR, EVALBOT_CASE_DIR and EVALBOT_OUT_DIR; every provider
sets these variables, so agents should read them (falling back to the fixed paths).

Errors: every method raises a subclass of SandboxError; nothing else escapes a provider.

`Sandbox.start(command)` runs the service's in-sandbox runner (workflows/providers/common/runner.py,
stdlib only), which runs `command` (a shell string, /bin/sh -c) as the unprivileged agent user with
/repo as working directory, enforces `limits.wall_timeout_s`, caps /out/stdout.log and
/out/stderr.log at `limits.stdout_limit_mb` each (killing the agent when exceeded), and keeps
/out/.state.json, rewritten atomically (write + rename):

    {"status": "running" | "finished", "pid": int, "started_at": float (epoch s),
     "finished_at": float | null, "exit_code": int | null, "signal": int | null,
     "termination": null | "timeout" | "output_limit" | "killed"}

`status` is "finished" exactly once, after the agent and all its children are gone. A state file
that says "running" while the sandbox has no live runner means the runner died (e.g. the worker
host lost the sandbox); the execute stage then reruns or fails the cell.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator, Collection, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class SandboxError(Exception):
    """Base class: an infrastructure problem, never the agent's fault."""


class SandboxCreateError(SandboxError):
    """The sandbox could not be created (bad image, provider refused, out of capacity)."""


class SandboxNotFound(SandboxError):
    """`attach` found no sandbox with that id (terminated, expired, or never created)."""


class SandboxFileError(SandboxError):
    """A file could not be read or written (missing, too large, or outside the allowed roots)."""


class SandboxRateLimited(SandboxError):
    """The provider asked us to slow down; retry with backoff."""


class ProviderRefused(SandboxError):
    """The provider refuses to run in this configuration (e.g. `process` not explicitly allowed)."""


class HostUnsupported(ProviderRefused):
    """The provider cannot run on this host at all (no bubblewrap, no usable cgroups, no token).
    The message is one sentence naming the cause and the fix; nothing is the agent's fault."""


class PrewarmInUse(SandboxError):
    """`discard_prewarmed` refused: a built image still in use starts from that prewarmed image."""


class FileKind(StrEnum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"
    OTHER = "other"


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the listed root, posix
    kind: FileKind
    size: int


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class ResourceLimits:
    cpu: float = 1.0
    memory_mb: int = 2048
    pids: int = 256
    file_size_mb: int = 512
    disk_mb: int = 1024
    wall_timeout_s: int = 1800
    stdout_limit_mb: int = 16

    def as_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class SandboxSpec:
    """What a run's sandbox is made of. `image` is provider-specific: for `local` and `process`
    the path of a built checkout; for `modal` an image reference."""

    run_id: str
    image: str
    world_dir: Path
    case_files: dict[str, bytes]  # name -> content, placed under /case
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    env: dict[str, str] = field(default_factory=dict)
    allow_domains: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    # Named secret groups for providers that hold the values themselves (injects_secret_groups,
    # e.g. Modal Secrets); other providers get the values resolved into `env` instead.
    secret_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceUsage:
    cpu_seconds: float = 0.0
    peak_memory_mb: float = 0.0
    wall_seconds: float = 0.0
    oom_killed: bool = False  # the memory limit killed a process
    pids_limit_hit: bool = False  # a fork was refused by the process limit
    disk_limit_hit: bool = False  # /out + /world reached limits.disk_mb (writes failed: ENOSPC)
    # What a metered provider bills (0 where nothing is billed): how long the sandbox has existed,
    # the CPU core-seconds billed (the greater of used and reserved), memory MiB held x seconds.
    sandbox_seconds: float = 0.0
    billed_cpu_seconds: float = 0.0
    memory_mb_seconds: float = 0.0


@dataclass(frozen=True)
class PrewarmedImage:
    """A prewarmed image (docs/prewarm.md): the agent repository built at a commit of main, kept so
    that `build_image` of a descendant commit only pays for the delta. `reference` is
    provider-specific: for `local` a read-only snapshot folder, for `modal` a named image."""

    reference: str
    commit: str
    build_seconds: float
    size_bytes: int | None = None
    reused: bool = False  # `prewarm` found this commit's image current and built nothing


@dataclass(frozen=True)
class RunSandbox:
    """A sandbox that exists for a run, as the provider lists it (for reaping)."""

    id: str
    experiment: str
    run: str


class BlockingFiles(Protocol):
    """A sandbox's files read by plain blocking calls (a folder on this host), for work that runs
    in a thread of its own: the same meaning and errors as Sandbox's methods of these names."""

    def read_file(self, path: str, max_bytes: int) -> bytes: ...
    def iter_file(self, path: str, chunk_size: int) -> Iterator[bytes]: ...
    def list_files(self, root: str) -> list[FileInfo]: ...


class Sandbox(abc.ABC):
    """A handle on one created sandbox. Safe to re-obtain with `SandboxProvider.attach(id)`."""

    id: str

    @property
    def labels(self) -> dict[str, str]:
        """The labels its spec gave it, where the provider keeps them ({}: it does not)."""
        return {}

    def blocking_files(self) -> BlockingFiles | None:
        """Its files by blocking calls when they are on this host (the collector then reads them
        all in one thread, docs/engine.md "Collect"); None: only through the async methods."""
        return None

    @abc.abstractmethod
    async def start(self, command: str, env: dict[str, str] | None = None) -> None:
        """Start the runner on `command` in the background and return at once (see module doc)."""

    @abc.abstractmethod
    async def exec(self, command: list[str], timeout_s: float = 60) -> ExecResult:
        """Run a short command to completion inside the sandbox (bounded output)."""

    @abc.abstractmethod
    async def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        """Read a file at a sandbox path (e.g. `/out/.state.json`); SandboxFileError if too big."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes) -> None: ...

    @abc.abstractmethod
    def iter_file(self, path: str, chunk_size: int = 1 << 16) -> AsyncIterator[bytes]:
        """Stream a file in chunks, never holding it whole in memory."""

    @abc.abstractmethod
    async def list_files(self, root: str) -> list[FileInfo]:
        """Everything below `root` without following symlinks."""

    @abc.abstractmethod
    async def usage(self) -> ResourceUsage: ...

    @abc.abstractmethod
    async def runner_alive(self) -> bool:
        """Whether the runner started by `start` is still running."""

    @abc.abstractmethod
    async def terminate(self) -> None:
        """Kill everything in the sandbox and free it. Idempotent."""


class SandboxProvider(abc.ABC):
    name: str
    # True when `create` and `terminate` take milliseconds (local, process): the engine then runs
    # them as local activities, saving two task round trips per run. Remote providers (Modal) keep
    # them as regular activities on a rate-limited queue.
    quick_provision: bool = False
    # True when sandboxes live on the worker's host (local, process): with host affinity on, a
    # run's stages after provision go to that host's task queue (docs/engine.md, "Host queues").
    host_bound: bool = False
    # True when the provider injects SandboxSpec.secret_groups itself (Modal Secrets); the engine
    # then passes group names, not values.
    injects_secret_groups: bool = False

    def check_host(self) -> None:
        """Raise HostUnsupported when this provider cannot run on this host at all; called
        before an experiment's first cell and when a worker starts. The default checks nothing."""
        return None

    def reap_orphans(self, grace_s: float = 60.0) -> list[int]:
        """Free what sandboxes cut off mid-create left behind (workers call this at start);
        returns what was freed. Providers without such leftovers keep this default."""
        return []

    def close(self) -> None:
        """Stop the helper processes this provider started (the process provider's spawner);
        sandboxes are left running (a restarted worker reattaches). The default has none."""
        return None

    async def sandboxes_of(self, run_id: str) -> list[str]:
        """Ids of sandboxes that exist for `run_id`. Before provisioning a run, the engine
        removes these (`remove_leftover`): they are leftovers of an earlier attempt whose worker
        died before its teardown (one run has one attempt at a time). Providers that cannot
        list keep []."""
        return []

    async def run_sandboxes(self) -> list[RunSandbox]:
        """Every sandbox of a run that exists now, whoever created it (docs/modal.md, "Reaping":
        the reaper terminates those no run needs). Providers whose sandboxes end with their
        worker keep []."""
        return []

    async def remove_leftover(self, sandbox_id: str) -> None:
        """Terminate a sandbox an earlier attempt left, even one cut off mid-create (which
        `attach` may not find); gone already is fine."""
        with contextlib.suppress(SandboxNotFound):
            await (await self.attach(sandbox_id)).terminate()

    @abc.abstractmethod
    async def create(self, spec: SandboxSpec) -> Sandbox: ...

    @abc.abstractmethod
    async def attach(self, sandbox_id: str) -> Sandbox:
        """Re-obtain a sandbox created earlier (possibly by a worker that has since died)."""

    @abc.abstractmethod
    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        """Check out `commit` of `source_repo`, run `setup` in a sandbox at /repo, and return an
        image reference usable as SandboxSpec.image. Cached per (repo, commit): building the same
        commit twice, even concurrently, builds once. A reference may end in a `#kind=...`
        fragment saying how it was built (prewarmed reset, full or cold build: see
        workflows/prewarm/image_label.py); `create` must accept what `build_image` returned."""

    # -- prewarmed images (optional; docs/prewarm.md) -------------------------------------------

    async def prewarm(
        self, source_repo: Path, commit: str, setup: str, *, rebuild: bool = False
    ) -> PrewarmedImage:
        """Build `commit` with `setup` into a new prewarmed image. Afterwards `build_image` of any
        commit X starts from the newest prewarmed image whose commit is an ancestor of X, checks X
        out on top and runs the repository's `build.incremental` (or `setup` when the dependency
        manifest changed), instead of building from scratch. When the newest prewarmed image
        already is of `commit`, it is marked current and returned (`reused`) unless `rebuild`."""
        raise ProviderRefused(f"the {self.name} provider cannot prewarm images")

    async def discard_prewarmed(
        self, source_repo: Path, reference: str, *, protect: Collection[str] = ()
    ) -> None:
        """Delete a prewarmed image (and the built images derived from it). Raises PrewarmInUse,
        deleting nothing, while a live sandbox or a built image of a `protect`ed commit (arms of
        running experiments) derives from it. Deleting an image that is gone is a no-op."""
        raise ProviderRefused(f"the {self.name} provider cannot prewarm images")
