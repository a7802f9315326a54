"""The `modal` provider: every run in a Modal Sandbox (docs/modal.md has the design).

The SDK module is passed in (`ModalProvider(modal)`, by the factory registered under "modal");
it is always the real `modal` package — tests point it at the Modal test server
(tests/fakes/modal_server) through its own environment variables. Everything goes through the SDK's
async interface (`.aio`), with public calls only, but for the two wrappers of modal_private.py.

A sandbox, as created here:

    image       the arm's image (modal_images.py), /repo inside it
    env         the spec's env and EVALBOT_{REPO,WORLD,CASE,OUT}_DIR = /repo, /world, /case, /out
    secrets     modal.Secret.from_name(group) for each of spec.secret_groups
    volumes     the world's Volume, read-only at /mnt/evalbot-world (modal_volumes.py)
    network     outbound_domain_allowlist=allow_domains, or block_network when there are none
    cpu/memory  from the limits, as (request, limit) pairs: reserved and capped
    timeout     limits.wall_timeout_s + modal.timeout_margin_s (collect comes after the run)
    runtime     settings.modal.runtime ("vm" for agents that run Docker inside)
    tags        evalbot=run, experiment, run (so a stray sandbox can be found and reaped)

Set-up, once the sandbox is running: one upload (a tar of the case files, the runner and
/evalbot/meta.json) and one command that unpacks it and copies the world into /world — the agent's
private, writable copy. `start` launches the runner (workflows/providers/common/runner.py) in the
background with `exec`; the runner keeps /out/.state.json, which is read through the filesystem API.
Any worker can `attach` by sandbox id (`Sandbox.from_id`) and carry on.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import re
import tarfile
import time
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from workflows.prewarm.image_label import image_path
from workflows.providers.base import (
    ExecResult,
    FileInfo,
    PrewarmedImage,
    ResourceLimits,
    ResourceUsage,
    RunSandbox,
    Sandbox,
    SandboxCreateError,
    SandboxError,
    SandboxFileError,
    SandboxNotFound,
    SandboxProvider,
    SandboxSpec,
)
from workflows.providers.common import RUNNER
from workflows.providers.common.sandbox_layout import build_env, dir_env
from workflows.providers.modal.modal_admission import Admission, AdmissionLimits
from workflows.providers.modal.modal_files import ModalFiles, creation_error, sdk_error
from workflows.providers.modal.modal_images import ModalImageBuilder
from workflows.providers.modal.modal_private import delete_image_name
from workflows.providers.modal.modal_volumes import WorldVolumes
from workflows.settings import Settings

SANDBOX_DIRS = {"repo": "/repo", "world": "/world", "case": "/case", "out": "/out"}
WORLD_MOUNT = "/mnt/evalbot-world"
STATE_FILE = "/out/.state.json"
META_FILE = "/evalbot/meta.json"
MIB = 1 << 20
MAX_OUTPUT = 1 << 20
EXEC_GRACE_S = 10.0
SANDBOX_ID = r"sb-[A-Za-z0-9]{1,64}"
SETUP = f"""set -e
mkdir -p /world /case /out /evalbot
tar -xf /evalbot/bundle.tar -C /
rm -f /evalbot/bundle.tar
if [ -d {WORLD_MOUNT}/world ]; then cp -a {WORLD_MOUNT}/world/. /world/; fi
test -d /repo || {{ echo "the image has no /repo" >&2; exit 3; }}
"""
# $@ = the runner's command line. Starts it at most once per sandbox (mkdir is atomic).
START = (
    "mkdir /evalbot/started 2>/dev/null || exit 0; echo $$ > /evalbot/runner.pid; "
    'exec "$@" </dev/null >>/evalbot/runner.log 2>&1'
)
# Exit 0 when the runner recorded in /evalbot/runner.pid is alive (and not a zombie).
RUNNER_ALIVE = (
    'pid=$(cat /evalbot/runner.pid 2>/dev/null) && [ -n "$pid" ] || exit 1; '
    '[ -r /proc/$pid/stat ] || exit 1; set -- $(sed "s/.*) //" /proc/$pid/stat); '
    '[ "$1" != Z ] && [ "$1" != X ] || exit 1; '
    'tr "\\0" " " </proc/$pid/cmdline | grep -q /evalbot/runner.py'
)


@dataclass(frozen=True)
class ModalConfig:
    app_name: str = "evalbot"
    runtime: str | None = None  # "vm": Modal's VM runtime, for agents that run Docker inside
    base_image: str = ""  # what image builds start from: "" = Image.debian_slim()
    python: str = "python3"  # the runner's interpreter inside images
    timeout_margin_s: int = 3600
    start_timeout_s: float = 120.0
    build_timeout_s: int = 1800
    build_cpu: float = 2.0
    build_memory_mb: int = 4096
    build_allow_domains: tuple[str, ...] = ()  # the only hosts build sandboxes reach
    spool_dir: Path | None = None  # where iter_file spools downloads (None: the system temp dir)
    admission: AdmissionLimits = field(default_factory=AdmissionLimits)

    @classmethod
    def from_settings(cls, settings: Settings) -> ModalConfig:
        return cls(
            app_name=settings.modal.app_name,
            runtime=settings.modal.runtime,
            base_image=settings.modal.base_image,
            timeout_margin_s=settings.modal.timeout_margin_s,
            spool_dir=settings.data_dir / "modal-spool",
            build_allow_domains=tuple(settings.sandbox.build_allow_domains),
            admission=AdmissionLimits(
                creates_per_s=settings.modal.creates_per_s,
                max_starting=settings.modal.max_starting,
                max_attempts=settings.modal.create_attempts,
            ),
        )


def check_case_files(files: Mapping[str, bytes]) -> None:
    for name in files:
        parts = PurePosixPath(name).parts
        if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\x00" in name:
            raise SandboxCreateError(
                f"case file name {name!r} must be a relative path inside /case"
            )


def make_bundle(files: Mapping[str, bytes], meta: Mapping[str, Any]) -> bytes:
    """A tar of what set-up unpacks at /: case files, the runner, the sandbox's meta."""
    buffer = io.BytesIO()
    entries = [(f"case/{name}", data, 0o644) for name, data in files.items()]
    entries += [("evalbot/runner.py", RUNNER.read_bytes(), 0o644)]
    entries += [("evalbot/meta.json", json.dumps(dict(meta)).encode(), 0o600)]
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class ModalSandbox(Sandbox):
    def __init__(self, provider: ModalProvider, handle: Any, meta: dict[str, Any] | None) -> None:
        self.provider = provider
        self.sdk = provider.sdk
        self.handle = handle
        self.id = str(handle.object_id)
        self.files = ModalFiles(self.sdk, handle, self.id, provider.config.spool_dir)
        self._meta = meta
        self._terminated_at: float | None = None

    @contextlib.contextmanager
    def errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except self.sdk.exception.Error as error:
            raise sdk_error(self.sdk, error, f"{what} in sandbox {self.id}") from None

    async def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = dict(json.loads(await self._read_meta()))
        return self._meta

    async def _read_meta(self) -> bytes:
        with self.files.errors(META_FILE):
            data: bytes = await self.handle.filesystem.read_bytes.aio(META_FILE)
        return data

    # -- set-up and the runner ------------------------------------------------------------------

    async def setup(self, bundle: bytes) -> None:
        with self.files.errors("/evalbot/bundle.tar"):
            await self.handle.filesystem.write_bytes.aio(bundle, "/evalbot/bundle.tar")
        done = await self.run(["sh", "-c", SETUP], timeout_s=600, workdir="/")
        if done.exit_code != 0:
            detail = done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.exit_code}"
            raise SandboxCreateError(f"could not set up sandbox {self.id}: {detail}")

    async def start(self, command: str, env: dict[str, str] | None = None) -> None:
        if await self.read_state() is not None:
            return  # a retried start: the runner is there (or was)
        limits = ResourceLimits(**(await self.meta())["limits"])
        argv = [
            self.provider.config.python, "-I", "-S", "/evalbot/runner.py", "--out", "/out",
            "--cwd", "/repo", "--timeout", f"{limits.wall_timeout_s:g}",
            "--log-limit", str(limits.stdout_limit_mb * MIB),
            "--fsize", str(limits.file_size_mb * MIB), "--", command,
        ]  # fmt: skip
        extra = build_env({}, env or {}, fixed=dir_env(SANDBOX_DIRS))
        stream = self.sdk.stream_type.StreamType.DEVNULL
        with self.errors("starting the runner"):
            process = await self.handle.exec.aio(
                "sh", "-c", START, "start", *argv,
                env=extra, workdir="/", stdout=stream, stderr=stream,
            )  # fmt: skip
        await self._wait_started(process)

    async def _wait_started(self, process: Any) -> None:
        """Until the runner's state file exists: callers never see a started sandbox without it."""
        deadline = time.monotonic() + self.provider.config.start_timeout_s
        pause = 0.05  # doubled up to 0.4 s: each look is three filesystem calls
        while await self.read_state() is None:
            with self.errors("starting the runner"):
                code = await process.poll.aio()
            if code is not None and code != 0:
                raise SandboxError(
                    f"the runner of sandbox {self.id} did not start: {await self._log()}"
                )
            if code == 0 and not await self.runner_alive() and await self.read_state() is None:
                raise SandboxError(f"the runner of sandbox {self.id} exited without its state")
            if time.monotonic() > deadline:
                raise SandboxError(f"the runner of sandbox {self.id} did not start in time")
            await asyncio.sleep(pause)
            pause = min(2 * pause, 0.4)

    async def _log(self) -> str:
        with contextlib.suppress(SandboxError):
            with self.files.errors("/evalbot/runner.log"):
                raw = await self.handle.filesystem.read_bytes.aio("/evalbot/runner.log")
            lines = raw.decode(errors="replace").strip().splitlines()
            return " / ".join(lines[-3:]) or "no log"
        return "no log"

    async def read_state(self, path: str = STATE_FILE) -> dict[str, Any] | None:
        """The runner's state, or None while it is missing or being replaced."""
        try:
            if path == STATE_FILE:
                raw = await self.files.read(path, 1 << 16)
            else:
                with self.files.errors(path):
                    raw = await self.handle.filesystem.read_bytes.aio(path)
            state = json.loads(raw)
        except (SandboxFileError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    async def runner_alive(self) -> bool:
        try:
            checked = await self.run(["sh", "-c", RUNNER_ALIVE], timeout_s=30, workdir="/")
        except SandboxError:
            return False
        return checked.exit_code == 0

    # -- commands -------------------------------------------------------------------------------

    async def exec(self, command: list[str], timeout_s: float = 60) -> ExecResult:
        return await self.run(command, timeout_s=timeout_s, workdir="/repo")

    async def run(self, command: Sequence[str], *, timeout_s: float, workdir: str) -> ExecResult:
        """A command to completion; at most 1 MiB of each stream is kept (the rest is drained)."""
        if not command:
            raise SandboxError("exec needs a command")
        stdout = stderr = b""
        with self.errors("exec"):
            process = await self.handle.exec.aio(
                *command, timeout=max(1, math.ceil(timeout_s)), workdir=workdir, text=False
            )
            try:
                stdout, stderr, code = await asyncio.wait_for(
                    asyncio.gather(
                        _drain(process.stdout), _drain(process.stderr), process.wait.aio()
                    ),
                    timeout_s + EXEC_GRACE_S,
                )
            except TimeoutError:
                code = -1
        if code == -1:  # Modal's answer when the exec deadline killed the command
            raise SandboxError(f"the command did not finish within {timeout_s:g} s")
        return ExecResult(exit_code=code, stdout=stdout, stderr=stderr)

    # -- files ----------------------------------------------------------------------------------

    async def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes:
        return await self.files.read(path, max_bytes)

    async def write_file(self, path: str, data: bytes) -> None:
        await self.files.write(path, data)

    async def iter_file(self, path: str, chunk_size: int = 1 << 16) -> AsyncIterator[bytes]:
        async for chunk in self.files.iter_chunks(path, chunk_size):
            yield chunk

    async def list_files(self, root: str) -> list[FileInfo]:
        return await self.files.list_tree(root)

    # -- accounting and the end -----------------------------------------------------------------

    async def usage(self) -> ResourceUsage:
        """The runner's measurements, plus what Modal bills: reserved CPU and memory over the
        sandbox's life so far (Modal bills the greater of reserved and used)."""
        state = (await self.read_state()) if self._terminated_at is None else None
        with contextlib.suppress(SandboxError):
            await self.meta()
        meta = self._meta or {}
        rusage = (state or {}).get("rusage") or {}
        limits = ResourceLimits(**meta.get("limits", {}))
        end = self._terminated_at or time.time()
        lifetime = max(0.0, end - float(meta.get("created_at", end)))
        cpu = float(rusage.get("cpu_seconds", 0.0))
        return ResourceUsage(
            cpu_seconds=cpu,
            peak_memory_mb=float(rusage.get("max_rss_mb", 0.0)),
            wall_seconds=round(_wall(state or {}), 3),
            disk_limit_hit=bool((state or {}).get("disk_full")),
            sandbox_seconds=round(lifetime, 3),
            billed_cpu_seconds=round(max(cpu, limits.cpu * lifetime), 3),
            memory_mb_seconds=round(limits.memory_mb * lifetime, 1),
        )

    async def terminate(self) -> None:
        exc = self.sdk.exception
        try:
            await self.handle.terminate.aio()
        except (exc.NotFoundError, exc.SandboxTerminatedError):
            pass
        except exc.Error as error:
            raise sdk_error(self.sdk, error, f"terminating sandbox {self.id}") from None
        if self._terminated_at is None:
            self._terminated_at = time.time()


async def _drain(stream: Any, limit: int = MAX_OUTPUT) -> bytes:
    kept = bytearray()
    async for chunk in stream:
        data = chunk.encode() if isinstance(chunk, str) else chunk
        if len(kept) < limit:
            kept += data[: limit - len(kept)]
    return bytes(kept)


def _wall(state: Mapping[str, Any]) -> float:
    started, finished = state.get("started_at"), state.get("finished_at")
    if not isinstance(started, int | float):
        return 0.0
    end = finished if isinstance(finished, int | float) else time.time()
    return max(0.0, float(end) - float(started))


class ModalProvider(SandboxProvider):
    name = "modal"
    quick_provision = False
    injects_secret_groups = True

    def __init__(self, sdk: Any, config: ModalConfig | None = None) -> None:
        self.sdk = sdk
        self.config = config or ModalConfig()
        if self.config.spool_dir is not None:
            self.config.spool_dir.mkdir(parents=True, exist_ok=True)
        self.admission = Admission(self.config.admission, self.is_refusal)
        self.worlds = WorldVolumes(sdk)
        self.images = ModalImageBuilder(self)
        self._app: Any = None
        self._image_handles: dict[str, Any] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> ModalProvider:
        import modal

        return cls(modal, ModalConfig.from_settings(settings))

    def is_refusal(self, error: BaseException) -> bool:
        """Modal refused for rate or quota reasons: retry later, never the agent's fault."""
        return isinstance(error, self.sdk.exception.ResourceExhaustedError)

    async def app(self) -> Any:
        if self._app is None:
            try:
                self._app = await self.sdk.App.lookup.aio(
                    self.config.app_name, create_if_missing=True
                )
            except self.sdk.exception.Error as error:
                what = f"looking up the Modal App {self.config.app_name}"
                raise creation_error(self.sdk, error, what) from None
        return self._app

    async def image(self, reference: str) -> Any:
        """An image handle by id (im-...) or published name, resolved once per reference.

        Resolving goes through `Image.build(app)`, which loads a named or id'd image without
        building anything; `Image.hydrate` cannot (the SDK refuses to hydrate images on demand).
        A reference may carry the origin fragment `build_image` adds (image_label.py)."""
        reference = image_path(reference)
        if reference in self._image_handles:
            return self._image_handles[reference]
        if not reference:
            raise SandboxCreateError("no image was given: build_image returns one (docs/modal.md)")
        exc = self.sdk.exception
        app = await self.app()
        try:
            if reference.startswith("im-"):
                image = self.sdk.Image.from_id(reference)
            else:
                image = self.sdk.Image.from_name(reference)
            await image.build.aio(app)
        except (exc.NotFoundError, exc.InvalidError):
            raise SandboxCreateError(
                f"image {reference} does not exist on Modal: build it (build_image), prewarm it "
                "(evalbot prewarm) or publish it under that name"
            ) from None
        except exc.Error as error:
            raise creation_error(self.sdk, error, f"looking up image {reference}") from None
        self._image_handles[reference] = image
        return image

    # -- create ---------------------------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> ModalSandbox:
        check_case_files(spec.case_files)
        env = build_env({}, spec.env, fixed=dir_env(SANDBOX_DIRS))
        image = await self.image(spec.image)
        try:
            world, version = await self.worlds.volume_for(spec.world_dir)
        except self.sdk.exception.Error as error:
            what = f"putting world {spec.world_dir.name} on a Modal Volume"
            raise creation_error(self.sdk, error, what) from None
        meta = {
            "run_id": spec.run_id, "image": spec.image, "world_version": version,
            "limits": spec.limits.as_dict(), "created_at": time.time(),
        }  # fmt: skip
        bundle = make_bundle(spec.case_files, meta)
        async with self.admission.starting():
            try:
                handle = await self._admitted(spec, image=image, world=world, env=env)
            except asyncio.CancelledError:
                # cancelled while Modal was creating it: the sandbox may exist without our
                # knowing its id, so find it by its run tag
                await asyncio.shield(self._remove_run_sandboxes(spec.run_id))
                raise
            sandbox = ModalSandbox(self, handle, meta)
            try:
                await sandbox.setup(bundle)
            except BaseException:
                with contextlib.suppress(SandboxError):
                    await asyncio.shield(sandbox.terminate())
                raise
        return sandbox

    async def _remove_run_sandboxes(self, run_id: str, looks: int = 3) -> None:
        """Terminate what a creation cancelled mid-call left; looks again briefly, since Modal may
        finish creating it after the call was cancelled."""
        for look in range(looks):
            with contextlib.suppress(SandboxError):
                for sandbox_id in await self.sandboxes_of(run_id):
                    await self.remove_leftover(sandbox_id)
            if look < looks - 1:
                await asyncio.sleep(0.5)

    async def _admitted(self, spec: SandboxSpec, **parts: Any) -> Any:
        app = await self.app()
        try:
            return await self.admission.create(lambda: self._create(app, spec, **parts))
        except self.sdk.exception.Error as error:
            raise creation_error(self.sdk, error, "Modal could not create the sandbox") from None

    async def _create(
        self, app: Any, spec: SandboxSpec, *, image: Any, world: Any, env: Any
    ) -> Any:
        limits = spec.limits
        labels = {"evalbot": "run", "run": spec.run_id, **spec.labels}
        return await self.sdk.Sandbox.create.aio(
            app=app,
            image=image,
            env=env,
            secrets=[self.sdk.Secret.from_name(group) for group in spec.secret_groups],
            volumes={WORLD_MOUNT: world},
            timeout=int(limits.wall_timeout_s + self.config.timeout_margin_s),
            workdir="/repo",
            cpu=(limits.cpu, limits.cpu),
            memory=(limits.memory_mb, limits.memory_mb),
            runtime=self.config.runtime,
            block_network=not spec.allow_domains,
            outbound_domain_allowlist=list(spec.allow_domains) or None,
            tags={key: str(value) for key, value in labels.items()},
        )

    async def builder_sandbox(self, sha: str, base: str | None = None) -> ModalSandbox:
        """A sandbox for building an image of `sha`: from `base` (a prewarmed image) or the base
        image, no world, and network only to the build allowlist (the package registries)."""
        config = self.config
        if base or config.base_image:
            image = await self.image(base or config.base_image)
        else:
            image = self.sdk.Image.debian_slim()
        app = await self.app()
        tags = {"evalbot": "build", "commit": sha}
        domains = list(config.build_allow_domains)

        async def make() -> Any:
            return await self.sdk.Sandbox.create.aio(
                app=app, image=image, timeout=config.build_timeout_s + 600, workdir="/",
                cpu=config.build_cpu, memory=config.build_memory_mb, runtime=config.runtime,
                block_network=not domains, outbound_domain_allowlist=domains or None, tags=tags,
            )  # fmt: skip

        async with self.admission.starting():
            try:
                handle = await self.admission.create(make)
            except self.sdk.exception.Error as error:
                raise SandboxCreateError(
                    f"Modal could not create a build sandbox: {error}"
                ) from None
        return ModalSandbox(self, handle, {"limits": {}, "created_at": time.time()})

    # -- attach, images -------------------------------------------------------------------------

    async def attach(self, sandbox_id: str) -> ModalSandbox:
        if not re.fullmatch(SANDBOX_ID, sandbox_id or ""):
            raise SandboxNotFound(f"no sandbox has the id {sandbox_id!r} (not a Modal sandbox id)")
        exc = self.sdk.exception
        try:
            handle = await self.sdk.Sandbox.from_id.aio(sandbox_id)
            finished = await handle.poll.aio()
        except (exc.NotFoundError, exc.InvalidError):
            raise SandboxNotFound(f"sandbox {sandbox_id} does not exist") from None
        except exc.Error as error:
            raise sdk_error(self.sdk, error, f"attaching to sandbox {sandbox_id}") from None
        if finished is not None:
            raise SandboxNotFound(f"sandbox {sandbox_id} has finished (exit {finished})")
        return ModalSandbox(self, handle, None)

    async def build_image(self, source_repo: Path, commit: str, setup: str) -> str:
        return await self.images.build(source_repo, commit, setup)

    async def prewarm(
        self, source_repo: Path, commit: str, setup: str, *, rebuild: bool = False
    ) -> PrewarmedImage:
        return await self.images.prewarm(source_repo, commit, setup, rebuild=rebuild)

    async def discard_prewarmed(
        self, source_repo: Path, reference: str, *, protect: Collection[str] = ()
    ) -> None:
        """Unpublish a prewarmed name. The images built from it are snapshots of their own, and a
        live sandbox keeps its image, so nothing is ever in use (`protect` has nothing to do)."""
        try:
            await delete_image_name(reference)
        except self.sdk.exception.NotFoundError:
            return
        except self.sdk.exception.Error as error:
            raise sdk_error(self.sdk, error, f"deleting image name {reference}") from None

    # -- what is running ------------------------------------------------------------------------

    async def sandboxes_of(self, run_id: str) -> list[str]:
        found = await self.tagged({"evalbot": "run", "run": run_id})
        return [sandbox.object_id for sandbox in found]

    async def run_sandboxes(self) -> list[RunSandbox]:
        found = []
        for handle in await self.tagged({"evalbot": "run"}):
            try:
                tags = await handle.get_tags.aio()
            except self.sdk.exception.NotFoundError:
                continue  # finished since it was listed
            except self.sdk.exception.Error as error:
                what = f"reading the tags of {handle.object_id}"
                raise sdk_error(self.sdk, error, what) from None
            found.append(
                RunSandbox(handle.object_id, tags.get("experiment", ""), tags.get("run", ""))
            )
        return found

    async def tagged(self, tags: Mapping[str, str]) -> list[Any]:
        """The running sandboxes of our app that carry all of `tags`."""
        app = await self.app()
        found = []
        try:
            async for sandbox in self.sdk.Sandbox.list.aio(app_id=app.app_id, tags=dict(tags)):
                found.append(sandbox)
        except self.sdk.exception.Error as error:
            raise sdk_error(self.sdk, error, "listing sandboxes") from None
        return found
