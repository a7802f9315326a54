"""A faithful fake of the Modal SDK surface the `modal` provider uses, with real local containers.

`FakeModal(root)` is one fake Modal workspace. Pass it where the provider expects the `modal`
module: it has `Sandbox`, `Image`, `Volume`, `Secret`, `App`, `exception` (the SDK's own exception
module, so errors are the SDK's types) and `stream_type`. Methods follow the SDK's synchronicity
interface: `await sdk.Sandbox.create.aio(...)`; the secret-management calls also work blocking.

Everything the workspace holds lives under `root`, so several processes (a worker that dies, a fresh
one that reattaches) share one "cloud":

    root/control.json            creation times and starting sandboxes (flock'd: the server's rate
                                 limit and starting quota apply across processes)
    root/sandboxes/<sb-id>/      meta.json, root/ (the container's file system), ctl/ (agent
                                 socket, exec outputs, env.json), launch.log
    root/images/<im-id>/rootfs/  an image: what its containers find at / (plus the host's /usr)
    root/published/<name>:<tag>  the image id published under that name
    root/volumes/<name>/data/    a Volume's files
    root/secrets/<name>.json     a named Secret
    root/apps/<name>             an App id

A sandbox is a real container: bubblewrap with new pid/ipc/uts (and, unless neither `block_network`
nor an allowlist is given, network) namespaces, the sandbox's own root folder as `/`, the host's
/usr and /etc read-only, its Volumes bind-mounted (read-only when mounted `.read_only()`), and
tests/fakes/modal_fake_container.py as pid 1 serving exec and the filesystem calls from inside — so
paths and symlinks resolve in the container exactly as they would on Modal. Each container outlives
the process that created it; `terminate` (or the sandbox timeout) kills it and everything in it.

Modelled behaviour: creation returns at once and the container becomes usable `start_latency_s`
later (exec and filesystem calls wait for it, as on Modal); a server-side creation rate limit
(`create_rate_per_s`, sliding one-second window) and a cap on sandboxes still starting
(`max_starting`) answer `ResourceExhaustedError`; `from_id` of an unknown id is `NotFoundError`;
filesystem calls on a finished sandbox are `NotFoundError` ("The Sandbox is unavailable"), exec is
`SandboxTerminatedError`; an exec past its deadline returns -1 from `wait()`. Not modelled: CPU and
memory limits (recorded in meta.json, not enforced), the domain allowlist (an allowlisted sandbox
has no network at all here), GPUs, tunnels, stdin, memory snapshots.
"""

# The fake mirrors the SDK's signatures (`timeout` parameters: ASYNC109) and polls small local
# files the way the SDK polls its server (ASYNC110, ASYNC230).
# ruff: noqa: ASYNC109, ASYNC110, ASYNC230

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import json
import os
import re
import secrets as random_tokens
import shutil
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import modal.exception as modal_exception
import modal.stream_type as modal_stream_type
from modal.stream_type import StreamType
from modal.types import FileEntry, FileEntryType, FileInfo, FileType

from workflows.providers.common.launch import launch_detached
from workflows.providers.common.procs import is_alive, kill, start_time

AGENT = Path(__file__).with_name("modal_fake_container.py")
SYSTEM_LINKS = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}
MOUNTPOINTS = ("usr", "etc", "proc", "dev", "__modal")
NOT_IN_SNAPSHOTS = {*SYSTEM_LINKS, *MOUNTPOINTS, "mnt"}
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TAG = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
BASE_IMAGE_ID = "im-debianslim0000000000000"
POLL_S = 0.01


def _new_id(prefix: str) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return prefix + "".join(random_tokens.choice(alphabet) for _ in range(22))


def _check_name(name: str, kind: str) -> None:
    if not NAME.fullmatch(name) or name.startswith("ap-"):
        raise modal_exception.InvalidError(f"Invalid {kind} name: '{name}'.")


def _run_blocking(coro: Awaitable[Any]) -> Any:
    """A blocking call of an async method, from any thread (synchronicity runs its own loop)."""
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))  # type: ignore[arg-type]
        except BaseException as failure:
            error.append(failure)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


class _Method:
    """A method as synchronicity exposes it: `.aio(...)` to await, or call it to block."""

    def __init__(self, function: Callable[..., Awaitable[Any]]) -> None:
        self.function = function

    def __get__(self, instance: Any, owner: type) -> _Bound:
        return _Bound(self.function, instance if instance is not None else owner)


class _Bound:
    def __init__(self, function: Callable[..., Awaitable[Any]], target: Any) -> None:
        self.function = function
        self.target = target

    async def aio(self, *args: Any, **kwargs: Any) -> Any:
        return await self.function(self.target, *args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _run_blocking(self.function(self.target, *args, **kwargs))


# -- the workspace ---------------------------------------------------------------------------------


@dataclass
class CloudStats:
    """What this process saw the fake server do (the benchmark checks the limits with it)."""

    accepted: list[float] = field(default_factory=list)  # creation times (server clock)
    rejected: list[tuple[float, str]] = field(default_factory=list)  # (time, "rate" | "starting")
    peak_starting: int = 0
    ready_delays: list[float] = field(default_factory=list)

    def max_per_window(self, window_s: float = 1.0) -> int:
        """The most creations accepted within any `window_s`-long window."""
        times, best, start = sorted(self.accepted), 0, 0
        for end, moment in enumerate(times):
            while moment - times[start] >= window_s:
                start += 1
            best = max(best, end - start + 1)
        return best


class FakeModal:
    def __init__(
        self,
        root: Path,
        *,
        start_latency_s: float | Callable[[], float] = 0.0,
        create_rate_per_s: float | None = None,
        max_starting: int | None = None,
        python: str = "/usr/bin/python3",
    ) -> None:
        self.root = root.absolute()
        for folder in ("sandboxes", "images", "published", "volumes", "secrets", "apps"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        (self.root / "images" / BASE_IMAGE_ID / "rootfs").mkdir(parents=True, exist_ok=True)
        self.start_latency_s = start_latency_s
        self.create_rate_per_s = create_rate_per_s
        self.max_starting = max_starting
        self.python = python
        self.stats = CloudStats()
        self.exception = modal_exception
        self.stream_type = modal_stream_type
        self.Sandbox: type[FakeSandbox] = type("Sandbox", (FakeSandbox,), {"cloud": self})
        self.Image: type[FakeImage] = type("Image", (FakeImage,), {"cloud": self})
        self.Volume: type[FakeVolume] = type("Volume", (FakeVolume,), {"cloud": self})
        self.Secret: type[FakeSecret] = type("Secret", (FakeSecret,), {"cloud": self})
        self.App: type[FakeApp] = type("App", (FakeApp,), {"cloud": self})
        self.Secret.objects = FakeSecretManager(self)

    # -- admission on the "server" ------------------------------------------------------------

    def latency(self) -> float:
        latency = self.start_latency_s
        return float(latency() if callable(latency) else latency)

    @contextlib.contextmanager
    def _control(self) -> Any:
        path = self.root / "control.json"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 1 << 24)
            state = json.loads(raw) if raw else {"creations": [], "starting": {}}
            yield state
            data = json.dumps(state).encode()
            os.lseek(fd, 0, os.SEEK_SET)
            os.truncate(fd, 0)
            os.write(fd, data)
        finally:
            os.close(fd)

    def admit(self, sandbox_id: str, ready_at: float) -> float:
        """Apply the server's limits to one creation; returns the creation time."""
        with self._control() as state:
            now = time.time()
            state["creations"] = [t for t in state["creations"] if now - t < 1.0]
            state["starting"] = {k: t for k, t in state["starting"].items() if t > now}
            rate = self.create_rate_per_s
            if rate is not None and len(state["creations"]) >= rate:
                self.stats.rejected.append((now, "rate"))
                raise modal_exception.ResourceExhaustedError(
                    f"Sandbox creation rate limit exceeded ({rate:g}/s); retry with backoff"
                )
            if self.max_starting is not None and len(state["starting"]) >= self.max_starting:
                self.stats.rejected.append((now, "starting"))
                raise modal_exception.ResourceExhaustedError(
                    f"Too many sandboxes starting at once ({self.max_starting}); retry later"
                )
            state["creations"].append(now)
            state["starting"][sandbox_id] = ready_at
            self.stats.accepted.append(now)
            self.stats.peak_starting = max(self.stats.peak_starting, len(state["starting"]))
            return now

    def started_or_gone(self, sandbox_id: str) -> None:
        with self._control() as state:
            state["starting"].pop(sandbox_id, None)

    # -- objects by name ----------------------------------------------------------------------

    def sandbox_dir(self, sandbox_id: str) -> Path:
        if not re.fullmatch(r"sb-[A-Za-z0-9]{1,64}", sandbox_id):
            raise modal_exception.InvalidError(f"Invalid sandbox id: {sandbox_id!r}")
        return self.root / "sandboxes" / sandbox_id

    def image_dir(self, image_id: str) -> Path:
        if not re.fullmatch(r"im-[A-Za-z0-9]{1,64}", image_id):
            raise modal_exception.InvalidError(f"Invalid image id: {image_id!r}")
        folder = self.root / "images" / image_id
        if not (folder / "rootfs").is_dir():
            raise modal_exception.NotFoundError(f"Image {image_id} not found")
        return folder

    def published(self, name: str) -> Path:
        base, _, tag = name.partition(":")
        _check_name(base, "Image")
        if not TAG.fullmatch(tag or "latest"):
            raise modal_exception.InvalidError(f"Invalid image tag: '{tag}'")
        return self.root / "published" / f"{base}:{tag or 'latest'}"

    def secret_path(self, name: str) -> Path:
        _check_name(name, "Secret")
        return self.root / "secrets" / f"{name}.json"

    def read_secret(self, name: str) -> dict[str, str]:
        try:
            return dict(json.loads(self.secret_path(name).read_text()))
        except FileNotFoundError:
            raise modal_exception.NotFoundError(f"Secret '{name}' not found") from None

    def volume_dir(self, name: str, create: bool) -> Path:
        _check_name(name, "Volume")
        folder = self.root / "volumes" / name
        if create:
            (folder / "data").mkdir(parents=True, exist_ok=True)
        if not (folder / "data").is_dir():
            raise modal_exception.NotFoundError(f"Volume '{name}' not found")
        return folder


# -- apps, secrets, images, volumes ------------------------------------------------------------


class FakeApp:
    cloud: FakeModal

    def __init__(self, name: str, app_id: str) -> None:
        self.name = name
        self.app_id = app_id

    @_Method
    async def lookup(cls, name: str, *, create_if_missing: bool = False, **_: Any) -> FakeApp:
        _check_name(name, "App")
        path = cls.cloud.root / "apps" / name
        if not path.exists():
            if not create_if_missing:
                raise modal_exception.NotFoundError(f"App '{name}' not found")
            with contextlib.suppress(FileExistsError), open(path, "x") as handle:
                handle.write(_new_id("ap-"))
        return cls(name, path.read_text())


class FakeSecret:
    cloud: FakeModal
    objects: FakeSecretManager

    def __init__(self, name: str | None, values: dict[str, str] | None = None) -> None:
        self.name = name
        self.values = values

    @classmethod
    def from_name(cls, name: str, **_: Any) -> FakeSecret:
        return cls(name)

    @classmethod
    def from_dict(cls, env_dict: Mapping[str, str | None]) -> FakeSecret:
        return cls(None, {k: v for k, v in env_dict.items() if v is not None})

    def resolve(self) -> dict[str, str]:
        if self.values is not None:
            return dict(self.values)
        assert self.name is not None
        return self.cloud.read_secret(self.name)

    @_Method
    async def _create_deployed(
        cls,
        deployment_name: str,
        env_dict: dict[str, str],
        client: Any = None,
        environment_name: str | None = None,
        overwrite: bool = False,
    ) -> str:
        path = cls.cloud.secret_path(deployment_name)
        if path.exists() and not overwrite:
            raise modal_exception.AlreadyExistsError(f"Secret '{deployment_name}' already exists")
        _write_json(path, {str(k): str(v) for k, v in env_dict.items()})
        return _new_id("st-")

    @_Method
    async def update(self, env_dict: dict[str, str]) -> None:
        assert self.name is not None
        current = self.cloud.read_secret(self.name)
        _write_json(self.cloud.secret_path(self.name), {**current, **env_dict})


class FakeSecretManager:
    def __init__(self, cloud: FakeModal) -> None:
        self.cloud = cloud

    @_Method
    async def create(
        self, name: str, env_dict: dict[str, str], *, allow_existing: bool = False, **_: Any
    ) -> None:
        path = self.cloud.secret_path(name)
        if path.exists():
            if allow_existing:
                return
            raise modal_exception.AlreadyExistsError(f"Secret '{name}' already exists")
        _write_json(path, dict(env_dict))

    @_Method
    async def list(self, **_: Any) -> list[FakeSecret]:
        names = sorted(p.stem for p in (self.cloud.root / "secrets").glob("*.json"))
        return [self.cloud.Secret(name) for name in names]

    @_Method
    async def delete(self, name: str, *, allow_missing: bool = False, **_: Any) -> None:
        try:
            self.cloud.secret_path(name).unlink()
        except FileNotFoundError:
            if not allow_missing:
                raise modal_exception.NotFoundError(f"Secret '{name}' not found") from None


class FakeImage:
    """An image: a rootfs folder. Handles from from_id/from_name resolve on use, as in the SDK."""

    cloud: FakeModal

    def __init__(self, image_id: str | None = None, name: str | None = None) -> None:
        self._object_id = image_id
        self._name = name

    @property
    def object_id(self) -> str:
        if self._object_id is None:
            raise modal_exception.InvalidError("Image has not been hydrated")
        return self._object_id

    @classmethod
    def debian_slim(cls, python_version: str | None = None, **_: Any) -> FakeImage:
        return cls(BASE_IMAGE_ID)

    @classmethod
    def from_id(cls, image_id: str, **_: Any) -> FakeImage:
        return cls(image_id)

    @classmethod
    def from_name(cls, name: str, **_: Any) -> FakeImage:
        return cls(None, name)

    def resolve(self) -> Path:
        if self._object_id is None:
            assert self._name is not None
            try:
                self._object_id = self.cloud.published(self._name).read_text()
            except FileNotFoundError:
                raise modal_exception.NotFoundError(f"Image '{self._name}' not found") from None
        return self.cloud.image_dir(self._object_id) / "rootfs"

    @_Method
    async def hydrate(self, client: Any = None) -> FakeImage:
        await asyncio.to_thread(self.resolve)
        return self

    @_Method
    async def build(self, app: Any = None) -> FakeImage:
        await asyncio.to_thread(self.resolve)
        return self

    @_Method
    async def publish(self, name: str, **_: Any) -> None:
        await asyncio.to_thread(self.resolve)
        target = self.cloud.published(name)
        tmp = target.with_name(f".{target.name}.{random_tokens.token_hex(4)}")
        tmp.write_text(self.object_id)
        tmp.replace(target)


class FakeVolume:
    cloud: FakeModal

    def __init__(self, name: str, create: bool, read_only: bool = False) -> None:
        self.name = name
        self.create = create
        self.is_read_only = read_only

    @classmethod
    def from_name(cls, name: str, *, create_if_missing: bool = False, **_: Any) -> FakeVolume:
        return cls(name, create_if_missing)

    def read_only(self) -> FakeVolume:
        return type(self)(self.name, self.create, read_only=True)

    def data(self) -> Path:
        return self.cloud.volume_dir(self.name, self.create) / "data"

    @_Method
    async def hydrate(self, client: Any = None) -> FakeVolume:
        await asyncio.to_thread(self.data)
        return self

    @_Method
    async def listdir(self, path: str, *, recursive: bool = False) -> list[FileEntry]:
        top = self.data() / path.strip("/")
        if not top.exists():
            raise modal_exception.NotFoundError(f"{path} does not exist in volume {self.name}")
        found = top.rglob("*") if recursive else top.iterdir()
        return [_volume_entry(p, self.data()) for p in sorted(found)] if top.is_dir() else []

    @property
    def batch_upload(self) -> _BatchUploadFactory:
        """`vol.batch_upload.aio(force)`: an async context manager, as in the SDK."""
        return _BatchUploadFactory(self)


def _volume_entry(path: Path, data: Path) -> FileEntry:
    kind = FileEntryType.DIRECTORY if path.is_dir() else FileEntryType.FILE
    info = path.lstat()
    return FileEntry(
        path=path.relative_to(data).as_posix(),
        type=kind,
        mtime=int(info.st_mtime),
        size=info.st_size,
    )


class _BatchUploadFactory:
    def __init__(self, volume: FakeVolume) -> None:
        self.volume = volume

    def __call__(self, force: bool = False) -> _BatchUpload:
        raise NotImplementedError("the fake models the async form only: batch_upload.aio()")

    def aio(self, force: bool = False) -> _BatchUpload:
        if self.volume.is_read_only:
            raise modal_exception.InvalidError("Read-only Volume cannot be uploaded to")
        return _BatchUpload(self.volume, force)


class _BatchUpload:
    """Files are staged, then committed together when the block exits without an error."""

    def __init__(self, volume: FakeVolume, force: bool) -> None:
        self.volume = volume
        self.force = force
        self.files: list[tuple[Path | BinaryIO, str]] = []

    async def __aenter__(self) -> _BatchUpload:
        return self

    async def __aexit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is None:
            await asyncio.to_thread(self._commit)

    def put_file(
        self, local_file: Path | str | BinaryIO, remote_path: str, mode: int | None = None
    ) -> None:
        source = Path(local_file) if isinstance(local_file, str | Path) else local_file
        self.files.append((source, remote_path))

    def put_directory(
        self, local_path: Path | str, remote_path: str, recursive: bool = True
    ) -> None:
        local = Path(local_path)
        found = local.rglob("*") if recursive else local.iterdir()
        for path in sorted(found):
            if path.is_file() and not path.is_symlink():
                relative = path.relative_to(local).as_posix()
                self.files.append((path, f"{remote_path.rstrip('/')}/{relative}"))

    def _commit(self) -> None:
        data = self.volume.data()
        for _, remote in self.files:
            target = data / remote.strip("/")
            if target.exists() and not self.force:
                raise FileExistsError(f"{remote} already exists in volume {self.volume.name}")
        for source, remote in self.files:
            target = data / remote.strip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{random_tokens.token_hex(4)}")
            if isinstance(source, Path):
                shutil.copyfile(source, tmp)
                tmp.chmod(source.stat().st_mode & 0o777)
            else:
                tmp.write_bytes(source.read())
            tmp.replace(target)


# -- sandboxes ------------------------------------------------------------------------------------


def _write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    tmp = path.with_name(f".{path.name}.{random_tokens.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    tmp.replace(path)


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((folder / "meta.json").read_bytes()))
    except FileNotFoundError:
        raise modal_exception.NotFoundError(f"Sandbox {folder.name} not found") from None


class FakeSandbox:
    cloud: FakeModal

    def __init__(self, sandbox_id: str, meta: dict[str, Any]) -> None:
        self.object_id = sandbox_id
        self.meta = meta
        self.folder = self.cloud.sandbox_dir(sandbox_id)
        self._filesystem = FakeFilesystem(self)
        self._created_here = False
        self._ready_seen = False

    @property
    def filesystem(self) -> FakeFilesystem:
        return self._filesystem

    # -- create / from_id ---------------------------------------------------------------------

    @_Method
    async def create(
        cls,
        *args: str,
        app: FakeApp | None = None,
        image: FakeImage | None = None,
        env: Mapping[str, str | None] | None = None,
        secrets: Iterable[FakeSecret] | None = None,
        volumes: Mapping[str, FakeVolume] | None = None,
        timeout: int | None = 300,
        workdir: str | None = None,
        cpu: float | tuple[float, float] | None = None,
        memory: int | tuple[int, int] | None = None,
        runtime: str | None = None,
        block_network: bool = False,
        outbound_domain_allowlist: Iterable[str] | None = None,
        tags: Mapping[str, str] | None = None,
        name: str | None = None,
        verbose: bool = False,
        **unsupported: Any,
    ) -> FakeSandbox:
        if unsupported:
            raise NotImplementedError(f"the fake does not model {sorted(unsupported)}")
        if args:
            raise NotImplementedError("the fake runs no entrypoint command; use exec")
        if app is None:
            raise modal_exception.InvalidError("App is required to create a Sandbox")
        if runtime not in (None, "gvisor", "vm"):
            raise modal_exception.InvalidError(f"Unknown runtime {runtime!r}")
        if block_network and outbound_domain_allowlist:
            raise modal_exception.InvalidError("block_network and an outbound allowlist conflict")
        cloud = cls.cloud
        image = image or cloud.Image.debian_slim()
        rootfs = await asyncio.to_thread(image.resolve)
        container_env = {**BASE_ENV}
        for secret in secrets or ():
            container_env.update(await asyncio.to_thread(secret.resolve))
        container_env.update({k: v for k, v in (env or {}).items() if v is not None})
        mounts = {
            path: await asyncio.to_thread(_mount_of, volume)
            for path, volume in (volumes or {}).items()
        }
        sandbox_id = _new_id("sb-")
        ready_at = time.time() + cloud.latency()
        created = await asyncio.to_thread(cloud.admit, sandbox_id, ready_at)
        meta = {
            "id": sandbox_id, "app_id": app.app_id, "image_id": image.object_id, "name": name,
            "tags": dict(tags or {}), "created_at": created, "ready_at": ready_at,
            "timeout": timeout, "workdir": workdir, "cpu": cpu, "memory": memory,
            "runtime": runtime,
            "block_network": block_network,
            "outbound_domain_allowlist": list(outbound_domain_allowlist or []) or None,
            "secrets": [s.name for s in secrets or ()], "env_names": sorted(container_env),
            "mounts": mounts, "monitor": None, "terminated_at": None, "returncode": None,
        }  # fmt: skip
        sandbox = cls(sandbox_id, meta)
        sandbox._created_here = True
        try:
            await sandbox._launch(rootfs, container_env)
        except BaseException:
            cloud.started_or_gone(sandbox_id)
            raise
        return sandbox

    async def _launch(self, rootfs: Path, env: dict[str, str]) -> None:
        folder, root, ctl = self.folder, self.folder / "root", self.folder / "ctl"
        folder.mkdir(parents=True)
        await _copy_tree(rootfs, root)
        await asyncio.to_thread(_prepare_root, root, self.meta["mounts"])
        (ctl / "procs").mkdir(parents=True)
        _write_json(ctl / "env.json", env)
        _write_json(folder / "meta.json", self.meta)
        argv = _bwrap(root, ctl, self.meta, self.cloud.python)
        pid = await launch_detached(argv, env=dict(BASE_ENV), log=folder / "launch.log")
        self.meta["monitor"] = {"pid": pid, "start_time": start_time(pid) or 0}
        _write_json(folder / "meta.json", self.meta)

    @_Method
    async def from_id(cls, sandbox_id: str, client: Any = None) -> FakeSandbox:
        folder = cls.cloud.sandbox_dir(sandbox_id)
        return cls(sandbox_id, await asyncio.to_thread(_read_meta, folder))

    # -- lifecycle ------------------------------------------------------------------------------

    def _running(self) -> bool:
        monitor = self.meta.get("monitor")
        if self.meta.get("terminated_at") is not None or not monitor:
            return False
        return is_alive(monitor["pid"], monitor["start_time"])

    def _refresh(self) -> None:
        with contextlib.suppress(modal_exception.NotFoundError):
            self.meta = _read_meta(self.folder)

    async def _wait_ready(self) -> None:
        """Calls on a sandbox that is still starting wait for it, as on Modal."""
        delay = self.meta["ready_at"] - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        socket_path = self.folder / "ctl" / "agent.sock"
        deadline = time.monotonic() + 30
        while not socket_path.exists():
            if not self._running() or time.monotonic() > deadline:
                break
            await asyncio.sleep(POLL_S)
        if not self._ready_seen:
            self._ready_seen = True
            if self._created_here:
                self.cloud.stats.ready_delays.append(time.time() - self.meta["created_at"])
                await asyncio.to_thread(self.cloud.started_or_gone, self.object_id)

    @_Method
    async def poll(self) -> int | None:
        await asyncio.to_thread(self._refresh)
        if self._running():
            return None
        return int(self.meta.get("returncode") or (124 if self._timed_out() else 137))

    def _timed_out(self) -> bool:
        with contextlib.suppress(OSError):
            return (self.folder / "ctl" / "exit").read_text() == "timeout"
        return False

    @_Method
    async def wait_until_ready(self, *, timeout: int = 300) -> None:
        await self._wait_ready()

    @_Method
    async def terminate(self, *, wait: bool = False) -> int | None:
        await asyncio.to_thread(self._terminate)
        return 137 if wait else None

    def _terminate(self) -> None:
        """SIGKILL every process of the container (its pid 1 first: the kernel then kills the
        rest), then the bwrap monitor, and wait until none is left."""
        self._refresh()
        monitor = self.meta.get("monitor")
        ns_file = self.folder / "ctl" / "ns"
        deadline = time.monotonic() + 5
        while monitor and self._running() and not ns_file.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)  # the container is still coming up: wait for its namespace
        _kill_namespace(ns_file)
        if monitor and is_alive(monitor["pid"], monitor["start_time"]):
            kill(monitor["pid"], monitor["start_time"], signal.SIGKILL)
        _wait_namespace_empty(ns_file)
        if self.meta.get("terminated_at") is None:
            self.meta["terminated_at"] = time.time()
            self.meta["returncode"] = 124 if self._timed_out() else 137
            _write_json(self.folder / "meta.json", self.meta)
        self.cloud.started_or_gone(self.object_id)
        shutil.rmtree(self.folder / "root", ignore_errors=True)

    @_Method
    async def get_tags(self) -> dict[str, str]:
        return dict(self.meta.get("tags") or {})

    @_Method
    async def snapshot_filesystem(self, timeout: int = 55, **_: Any) -> FakeImage:
        await self._require_running()
        image_id = _new_id("im-")
        target = self.cloud.root / "images" / image_id
        staging = self.cloud.root / "images" / f".{image_id}"
        await _copy_tree(self.folder / "root", staging / "rootfs", skip=NOT_IN_SNAPSHOTS)
        staging.rename(target)
        return self.cloud.Image(image_id)

    async def _require_running(self) -> None:
        await self._wait_ready()
        if not self._running():
            raise modal_exception.SandboxTerminatedError()

    # -- exec -----------------------------------------------------------------------------------

    @_Method
    async def exec(
        self,
        *args: str,
        stdout: StreamType = StreamType.PIPE,
        stderr: StreamType = StreamType.PIPE,
        timeout: int | None = None,
        workdir: str | None = None,
        env: Mapping[str, str | None] | None = None,
        secrets: Iterable[FakeSecret] | None = None,
        text: bool = True,
        bufsize: int = -1,
    ) -> FakeContainerProcess:
        if not args or not all(isinstance(a, str) for a in args):
            raise modal_exception.InvalidError("exec needs a command of strings")
        if stdout not in (StreamType.PIPE, StreamType.DEVNULL) or stderr not in (
            StreamType.PIPE,
            StreamType.DEVNULL,
        ):
            raise NotImplementedError("the fake models PIPE and DEVNULL streams only")
        await self._require_running()
        exec_env = dict(env or {})
        for secret in secrets or ():
            exec_env.update(await asyncio.to_thread(secret.resolve))
        exec_id = f"e{random_tokens.token_hex(6)}"
        request = {
            "op": "exec", "id": exec_id, "argv": list(args), "env": exec_env,
            "workdir": workdir or self.meta.get("workdir") or "/", "timeout": timeout,
            "stdout": stdout == StreamType.PIPE, "stderr": stderr == StreamType.PIPE,
        }  # fmt: skip
        await self._request(request, "exec")
        return FakeContainerProcess(self, exec_id, text, stdout, stderr)

    async def _request(self, request: dict[str, Any], operation: str) -> dict[str, Any]:
        reader, writer = await self._connect(operation)
        try:
            writer.write(json.dumps(request).encode() + b"\n")
            await writer.drain()
            return _check_reply(await reader.readline(), request.get("path", ""))
        finally:
            writer.close()

    async def _connect(self, operation: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The agent's socket, through /proc/self/fd (its real path may exceed 108 bytes)."""
        if not self._running():
            raise _unavailable(operation, self._why_gone())
        fd = os.open(self.folder / "ctl", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return await asyncio.open_unix_connection(f"/proc/self/fd/{fd}/agent.sock")
        except (FileNotFoundError, ConnectionRefusedError) as error:
            raise _unavailable(operation, f"agent socket: {error!r}") from None
        finally:
            os.close(fd)

    def _why_gone(self) -> str:
        """For the fake's own diagnostics (appended to the SDK's message)."""
        if self.meta.get("terminated_at") is not None:
            return "terminated"
        try:
            log = (self.folder / "launch.log").read_text(errors="replace").strip()[-300:]
        except OSError:
            log = ""
        return f"container exited ({'timeout' if self._timed_out() else log or 'no log'})"


def _unavailable(operation: str, detail: str = "") -> Exception:
    suffix = f" [fake: {detail}]" if detail else ""
    if operation == "exec":
        return modal_exception.SandboxTerminatedError(f"Sandbox has terminated{suffix}")
    return modal_exception.NotFoundError(
        f"The Sandbox is unavailable. This Sandbox may have already shut down.{suffix}"
    )


def _check_reply(line: bytes, path: str) -> dict[str, Any]:
    if not line:
        raise _unavailable(path, "the agent closed the connection without an answer")
    reply = dict(json.loads(line))
    if reply.get("ok"):
        return reply
    kind, message = reply.get("kind"), f"{reply.get('message')}: {path}"
    errors = {
        "NotFound": modal_exception.SandboxFilesystemNotFoundError,
        "NotDirectory": modal_exception.SandboxFilesystemNotADirectoryError,
        "IsDirectory": modal_exception.SandboxFilesystemIsADirectoryError,
        "PermissionDenied": modal_exception.SandboxFilesystemPermissionError,
        "AlreadyExists": modal_exception.SandboxFilesystemPathAlreadyExistsError,
        "DirectoryNotEmpty": modal_exception.SandboxFilesystemDirectoryNotEmptyError,
    }
    raise errors.get(str(kind), modal_exception.SandboxFilesystemError)(message)


def _mount_of(volume: FakeVolume) -> dict[str, Any]:
    return {"source": str(volume.data()), "read_only": volume.is_read_only, "name": volume.name}


async def _copy_tree(source: Path, dest: Path, skip: Iterable[str] = ()) -> None:
    dest.mkdir(parents=True)
    names = [p.name for p in source.iterdir() if p.name not in set(skip)]
    if not names:
        return
    process = await asyncio.create_subprocess_exec(
        "cp", "-a", "--reflink=auto", "--", *(str(source / n) for n in names), str(dest),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, error = await process.communicate()
    if process.returncode != 0:
        raise modal_exception.InternalError(f"copying the image failed: {error.decode()[-300:]}")


def _prepare_root(root: Path, mounts: Mapping[str, Mapping[str, Any]]) -> None:
    for name, target in SYSTEM_LINKS.items():
        if not os.path.lexists(root / name):
            os.symlink(target, root / name)
    for name in (*MOUNTPOINTS, "tmp", "root"):
        (root / name).mkdir(exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    for path in mounts:
        (root / path.strip("/")).mkdir(parents=True, exist_ok=True)


def _bwrap(root: Path, ctl: Path, meta: Mapping[str, Any], python: str) -> list[str]:
    argv = [
        "bwrap",
        "--bind",
        str(root),
        "/",
        "--ro-bind",
        "/usr",
        "/usr",
        "--ro-bind",
        "/etc",
        "/etc",
    ]
    argv += ["--proc", "/proc", "--dev", "/dev", "--bind", str(ctl), "/__modal"]
    for path, mount in meta["mounts"].items():
        argv += ["--ro-bind" if mount["read_only"] else "--bind", mount["source"], path]
    argv += ["--ro-bind", str(AGENT), "/__modal/agent.py"]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "modal"]
    if meta["block_network"] or meta["outbound_domain_allowlist"] is not None:
        argv.append("--unshare-net")
    # No --die-with-parent: bwrap's parent is the launcher shell, which exits at once (the
    # container must outlive whoever created it); terminate kills the namespace instead.
    argv += ["--as-pid-1", "--chdir", "/"]
    return [*argv, python, "-I", "-S", "/__modal/agent.py", str(meta["timeout"] or 0)]


def _kill_namespace(ns_file: Path) -> None:
    try:
        namespace = ns_file.read_text()
    except OSError:
        return
    for pid in os.listdir("/proc"):
        if pid.isdigit() and _in_namespace(pid, namespace):
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def _wait_namespace_empty(ns_file: Path, timeout_s: float = 10) -> None:
    """Until no live process is left in the sandbox's pid namespace."""
    try:
        namespace = ns_file.read_text()
    except OSError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_in_namespace(pid, namespace) for pid in os.listdir("/proc") if pid.isdigit()):
            return
        time.sleep(POLL_S)


def _in_namespace(pid: str, namespace: str) -> bool:
    try:
        if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
            return False
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


# -- exec'd processes ---------------------------------------------------------------------------


class FakeContainerProcess:
    def __init__(
        self, sandbox: FakeSandbox, exec_id: str, text: bool, stdout: StreamType, stderr: StreamType
    ) -> None:
        self.sandbox = sandbox
        self.exec_id = exec_id
        procs = sandbox.folder / "ctl" / "procs"
        self.rc_path = procs / f"{exec_id}.rc"
        self._returncode: int | None = None
        self._stdout = FakeStreamReader(self, procs / f"{exec_id}.out", text, stdout)
        self._stderr = FakeStreamReader(self, procs / f"{exec_id}.err", text, stderr)

    @property
    def stdout(self) -> FakeStreamReader:
        return self._stdout

    @property
    def stderr(self) -> FakeStreamReader:
        return self._stderr

    @property
    def returncode(self) -> int:
        if self._returncode is None:
            raise modal_exception.InvalidError("The process has not finished yet")
        return self._returncode

    def _check(self) -> int | None:
        if self._returncode is None:
            with contextlib.suppress(FileNotFoundError, ValueError):
                self._returncode = int(self.rc_path.read_text())
        if self._returncode is None and not self.sandbox._running():
            self._returncode = 137  # the sandbox ended under it
        return self._returncode

    @_Method
    async def poll(self) -> int | None:
        return self._check()

    @_Method
    async def wait(self) -> int:
        while (code := self._check()) is None:
            await asyncio.sleep(POLL_S)
        return code


class FakeStreamReader:
    """A process's output, streamed while it runs (from the file the container agent writes)."""

    def __init__(
        self, process: FakeContainerProcess, path: Path, text: bool, kind: StreamType
    ) -> None:
        self.process = process
        self.path = path
        self.text = text
        self.devnull = kind == StreamType.DEVNULL

    async def _chunks(self) -> AsyncIterator[bytes]:
        if self.devnull:
            return
        handle = None
        try:
            while True:
                if handle is None and self.path.exists():
                    handle = open(self.path, "rb")  # noqa: SIM115 - closed in finally
                chunk = handle.read(1 << 16) if handle is not None else b""
                if chunk:
                    yield chunk
                    continue
                if self.process._check() is not None:
                    if handle is not None and (rest := handle.read()):
                        yield rest
                    return
                await asyncio.sleep(POLL_S)
        finally:
            if handle is not None:
                handle.close()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._decoded()

    async def _decoded(self) -> AsyncIterator[Any]:
        async for chunk in self._chunks():
            yield chunk.decode(errors="replace") if self.text else chunk

    @_Method
    async def read(self) -> Any:
        data = b"".join([chunk async for chunk in self._chunks()])
        return data.decode(errors="replace") if self.text else data


# -- the filesystem API ---------------------------------------------------------------------------


def _file_info(raw: Mapping[str, Any]) -> FileInfo:
    return FileInfo(
        name=raw["name"], path=raw["path"], type=FileType(raw["type"]), size=raw["size"],
        mode=raw["mode"], permissions=raw["permissions"], owner=raw["owner"],
        group=raw["group"], modified_time=raw["modified_time"],
        symlink_target=raw.get("symlink_target"),
    )  # fmt: skip


def _absolute(path: str, operation: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise modal_exception.InvalidError(f"{operation}: remote path must be absolute: {path!r}")
    return path


class FakeFilesystem:
    """`sandbox.filesystem`: served by the agent inside the container (Modal runs its fs tools
    there too), so paths and symlinks are the container's."""

    def __init__(self, sandbox: FakeSandbox) -> None:
        self.sandbox = sandbox

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        await self.sandbox._wait_ready()
        return await self.sandbox._request(request, request["op"])

    @_Method
    async def stat(self, remote_path: str) -> FileInfo:
        reply = await self._call({"op": "stat", "path": _absolute(remote_path, "stat")})
        return _file_info(reply["info"])

    @_Method
    async def list_files(self, remote_path: str) -> list[FileInfo]:
        reply = await self._call({"op": "list", "path": _absolute(remote_path, "list_files")})
        return [_file_info(entry) for entry in reply["entries"]]

    @_Method
    async def make_directory(self, remote_path: str, *, create_parents: bool = True) -> None:
        path = _absolute(remote_path, "make_directory")
        await self._call({"op": "mkdir", "path": path, "parents": create_parents})

    @_Method
    async def remove(self, remote_path: str, *, recursive: bool = False) -> None:
        path = _absolute(remote_path, "remove")
        await self._call({"op": "remove", "path": path, "recursive": recursive})

    @_Method
    async def read_bytes(self, remote_path: str) -> bytes:
        return b"".join([chunk async for chunk in self._read(remote_path, "read_bytes")])

    @_Method
    async def read_text(self, remote_path: str) -> str:
        return (await self.read_bytes.aio(remote_path)).decode()

    @_Method
    async def copy_to_local(self, remote_path: str, local_path: str | os.PathLike[str]) -> None:
        target = Path(local_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".modal-sandbox-fs-tmp-{random_tokens.token_hex(3)}"
        try:
            with open(tmp, "wb") as handle:
                async for chunk in self._read(remote_path, "copy_to_local"):
                    handle.write(chunk)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)

    async def _read(self, remote_path: str, operation: str) -> AsyncIterator[bytes]:
        path = _absolute(remote_path, operation)
        await self.sandbox._wait_ready()
        reader, writer = await self.sandbox._connect(operation)
        try:
            writer.write(json.dumps({"op": "read", "path": path}).encode() + b"\n")
            await writer.drain()
            reply = _check_reply(await reader.readline(), path)
            remaining = int(reply["size"])
            while chunk := await reader.read(1 << 16):
                remaining -= len(chunk)
                yield chunk
            if remaining > 0:  # the file shrank while read, or the sandbox went away
                with contextlib.suppress(FileNotFoundError):
                    await self.stat.aio(path)
        finally:
            writer.close()

    @_Method
    async def write_bytes(self, data: bytes | bytearray | memoryview, remote_path: str) -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("data must be bytes-like")
        await self._write(io.BytesIO(bytes(data)), _absolute(remote_path, "write_bytes"))

    @_Method
    async def write_text(self, data: str, remote_path: str) -> None:
        await self.write_bytes.aio(data.encode(), remote_path)

    @_Method
    async def copy_from_local(self, local_path: str | os.PathLike[str], remote_path: str) -> None:
        with open(local_path, "rb") as handle:
            await self._write(handle, _absolute(remote_path, "copy_from_local"))

    async def _write(self, source: BinaryIO, path: str) -> None:
        await self.sandbox._wait_ready()
        reader, writer = await self.sandbox._connect("write")
        try:
            writer.write(json.dumps({"op": "write", "path": path}).encode() + b"\n")
            while chunk := source.read(1 << 16):
                writer.write(chunk)
                await writer.drain()
            writer.write_eof()
            _check_reply(await reader.readline(), path)
        finally:
            writer.close()


def host_problem() -> str | None:
    """Why the fake's containers cannot run here, or None."""
    if os.geteuid() != 0:
        return "the fake Modal's containers need root (bubblewrap with namespaces)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    if not Path("/usr/bin/python3").is_file():
        return "/usr/bin/python3 (the interpreter inside the fake's containers) is missing"
    return None
