"""`modal.client.ModalClient`, the control plane, as far as the SDK's calls for our code path go.

Implemented RPCs (everything else answers UNIMPLEMENTED naming the RPC): ClientHello, AuthTokenGet,
EnvironmentGetOrCreate, AppGetOrCreate, ImageGetOrCreate, ImageJoinStreaming, ImageFromId,
ImageGetByTag, ImagePublish, SecretGetOrCreate, SecretList, VolumeGetOrCreate, VolumeListFiles2,
VolumePutFiles2, SandboxCreateV2, SandboxWaitV2, SandboxTerminateV2, SandboxTagsGetV2,
SandboxListV2, SandboxGetTaskIdV2, SandboxGetCommandRouterAccess, and the V1 forms SandboxWait,
SandboxTerminate, SandboxTagsGet, SandboxList, SandboxGetTaskId, TaskGetCommandRouterAccess
(V1-shaped ids are never minted here: the SDK 1.6 creates V2 sandboxes by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf import empty_pb2
from grpclib import GRPCError, Status
from grpclib.server import Stream
from modal_proto import api_pb2
from modal_proto.api_grpc import ModalClientBase

from tests.fakes.modal_server import containers
from tests.fakes.modal_server.auth import Issuer, check_auth_token, check_token
from tests.fakes.modal_server.state import Cloud, new_id

RpcStream = Stream[Any, Any]
G = api_pb2.GenericResult
CREATE = api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING
NETWORK = {
    api_pb2.NetworkAccess.UNSPECIFIED: "open",
    api_pb2.NetworkAccess.OPEN: "open",
    api_pb2.NetworkAccess.BLOCKED: "blocked",
    api_pb2.NetworkAccess.ALLOWLIST: "allowlist",
}
MAX_TIMEOUT_S = 24 * 3600
IMAGE_BUILDER_VERSION = "2025.06"
LIST_PAGE = 100


def with_unimplemented(cls: type) -> type:
    """Every RPC the class leaves abstract answers UNIMPLEMENTED with its name."""

    def fallback(name: str) -> Callable[..., Any]:
        async def unimplemented(self: Any, stream: RpcStream) -> None:
            raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not implemented by the test server")

        return unimplemented

    for name in list(getattr(cls, "__abstractmethods__", ())):
        setattr(cls, name, fallback(name))
    cls.__abstractmethods__ = frozenset()  # type: ignore[attr-defined]
    return cls


def task_id_of(sandbox_id: str) -> str:
    return f"ta-{sandbox_id[3:]}V"  # the SDK recognises V2 tasks by the trailing "V"


def sandbox_id_of(task_id: str) -> str:
    if not (task_id.startswith("ta-") and task_id.endswith("V")):
        raise GRPCError(Status.NOT_FOUND, f"Task {task_id} not found")
    return f"sb-{task_id[3:-1]}"


def result_of(finish: str | None, folder: Path) -> api_pb2.GenericResult | None:
    if finish is None:
        return None
    if finish == "terminated":
        return G(status=G.GENERIC_STATUS_TERMINATED, exception="Sandbox terminated")
    if finish == "timeout":
        return G(status=G.GENERIC_STATUS_TIMEOUT, exception="Sandbox timed out")
    log = ""
    with contextlib.suppress(OSError):
        log = (folder / "launch.log").read_text(errors="replace")[-500:]
    return G(status=G.GENERIC_STATUS_FAILURE, exitcode=1, exception=f"container exited: {log}")


@with_unimplemented
class ControlPlane(ModalClientBase):
    def __init__(self, cloud: Cloud, issuer: Issuer, urls: dict[str, str]) -> None:
        self.cloud = cloud
        self.issuer = issuer
        self.urls = urls  # "router": the task command router, "blocks": the block store
        self.building: dict[str, asyncio.Task[None]] = {}

    async def _recv(self, stream: RpcStream, *, v2: bool = False) -> Any:
        check_token(stream.metadata or {})
        if v2:
            check_auth_token(self.issuer, stream.metadata or {})
        request = await stream.recv_message()
        self._inject_fault(stream, request)
        return request

    def _inject_fault(self, stream: RpcStream, request: Any) -> None:
        faults = self.cloud.knobs().faults
        if not faults:
            return
        rpc = str(getattr(stream, "_method_name", "")).rpartition("/")[2]
        fields = ("deployment_name", "app_name", "tag", "sandbox_id")
        names = [getattr(request, field, "") for field in fields]
        for key in (rpc, *(f"{rpc}:{name}" for name in names if name)):
            if key in faults:
                status, sep, message = faults[key].partition(":")
                if sep and status in Status.__members__:
                    raise GRPCError(Status[status], message.strip())
                raise GRPCError(Status.PERMISSION_DENIED, faults[key])

    # -- client, apps -------------------------------------------------------------------------

    async def ClientHello(self, stream: RpcStream) -> None:
        await self._recv(stream)
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AuthTokenGet(self, stream: RpcStream) -> None:
        await self._recv(stream)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=self.issuer.issue(sub="c")))

    async def EnvironmentGetOrCreate(self, stream: RpcStream) -> None:
        """One environment, "main" (image builds ask it for the image builder version)."""
        req = await self._recv(stream)
        if req.deployment_name not in ("", "main"):
            raise GRPCError(Status.NOT_FOUND, f"Environment '{req.deployment_name}' not found")
        settings = api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(
                environment_id="en-modaltestservermain000",
                metadata=api_pb2.EnvironmentMetadata(name="main", settings=settings),
            )
        )

    async def AppGetOrCreate(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        app_id = self.cloud.app_id(req.app_name, req.object_creation_type == CREATE)
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    # -- images -------------------------------------------------------------------------------

    async def ImageGetOrCreate(self, stream: RpcStream) -> None:
        """Images are root folders; an image built from nothing is empty (its containers get the
        host's /usr and /etc), one on a base image starts from the base's files. Dockerfile
        commands are recorded, not run."""
        req = await self._recv(stream)
        digest = hashlib.sha256(req.image.SerializeToString(deterministic=True)).hexdigest()
        image_id = f"im-{digest[:24]}"
        folder = self.cloud.root / "images" / image_id
        if (folder / "rootfs").is_dir():
            await stream.send_message(
                api_pb2.ImageGetOrCreateResponse(
                    image_id=image_id, result=G(status=G.GENERIC_STATUS_SUCCESS)
                )
            )
            return
        bases = [base.image_id for base in req.image.base_images]
        for base in bases:
            self.cloud.image_dir(base)
        if image_id not in self.building:
            self.building[image_id] = asyncio.create_task(self._build(folder, bases))
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id))

    async def _build(self, folder: Path, bases: list[str]) -> None:
        staging = folder.with_name(f".{folder.name}.build")
        shutil.rmtree(staging, ignore_errors=True)
        if bases:
            await containers.copy_tree(
                self.cloud.image_dir(bases[0]) / "rootfs", staging / "rootfs"
            )
        else:
            (staging / "rootfs").mkdir(parents=True)
        staging.rename(folder)

    async def ImageJoinStreaming(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        build = self.building.get(req.image_id)
        if build is not None:
            await asyncio.shield(build)
        self.cloud.image_dir(req.image_id)
        await stream.send_message(
            api_pb2.ImageJoinStreamingResponse(result=G(status=G.GENERIC_STATUS_SUCCESS), eof=True)
        )

    async def ImageFromId(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        self.cloud.image_dir(req.image_id)
        await stream.send_message(api_pb2.ImageFromIdResponse(image_id=req.image_id))

    async def ImageGetByTag(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        image_id = self.cloud.image_by_tag(req.tag)
        await stream.send_message(api_pb2.ImageGetByTagResponse(image_id=image_id))

    async def ImagePublish(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        self.cloud.publish(req.tag, req.image_id)
        await stream.send_message(api_pb2.ImagePublishResponse())

    async def ImageNameDelete(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        self.cloud.unpublish(req.tag)
        await stream.send_message(empty_pb2.Empty())

    # -- secrets ------------------------------------------------------------------------------

    async def SecretGetOrCreate(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        kind, name, env = req.object_creation_type, req.deployment_name, dict(req.env_dict)
        if kind == api_pb2.OBJECT_CREATION_TYPE_UNSPECIFIED:
            record = self.cloud.secret(name)
            missing = sorted(set(req.required_keys) - set(record["env"]))
            if missing:
                raise GRPCError(
                    Status.NOT_FOUND, f"Secret '{name}' is missing required keys: {missing}"
                )
        elif kind == CREATE:
            try:
                record = self.cloud.secret(name)
            except GRPCError:
                record = self.cloud.put_secret(name, env, replace=False)
        elif kind == api_pb2.OBJECT_CREATION_TYPE_CREATE_FAIL_IF_EXISTS:
            record = self.cloud.put_secret(name, env, replace=False)
        elif kind == api_pb2.OBJECT_CREATION_TYPE_CREATE_OVERWRITE_IF_EXISTS:
            record = self.cloud.put_secret(name, env, replace=True)
        else:
            raise GRPCError(Status.UNIMPLEMENTED, f"SecretGetOrCreate with creation type {kind}")
        await stream.send_message(
            api_pb2.SecretGetOrCreateResponse(
                secret_id=record["id"], metadata=_secret_metadata(record)
            )
        )

    async def SecretList(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        before = req.pagination.created_before or float("inf")
        records = sorted(self.cloud.secrets(), key=lambda r: r["created_at"], reverse=True)
        records = [r for r in records if r["created_at"] < before]
        if req.pagination.max_objects > 0:
            records = records[: req.pagination.max_objects]
        items = [
            api_pb2.SecretListItem(
                label=r["name"],
                secret_id=r["id"],
                created_at=r["created_at"],
                metadata=_secret_metadata(r),
            )
            for r in records
        ]
        await stream.send_message(api_pb2.SecretListResponse(items=items))

    # -- volumes ------------------------------------------------------------------------------

    async def VolumeGetOrCreate(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        if req.object_creation_type not in (api_pb2.OBJECT_CREATION_TYPE_UNSPECIFIED, CREATE):
            raise GRPCError(Status.UNIMPLEMENTED, "VolumeGetOrCreate with this creation type")
        volume_id = self.cloud.volume(req.deployment_name, req.object_creation_type == CREATE)
        version = api_pb2.VolumeFsVersion.VOLUME_FS_VERSION_V2
        await stream.send_message(
            api_pb2.VolumeGetOrCreateResponse(
                volume_id=volume_id,
                version=version,
                metadata=api_pb2.VolumeMetadata(version=version, name=req.deployment_name),
            )
        )

    async def VolumeListFiles2(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        _, data = self.cloud.volume_data(req.volume_id)
        top = data / req.path.strip("/")
        if not top.resolve().is_relative_to(data.resolve()) or not top.exists():
            raise GRPCError(Status.NOT_FOUND, f"No such file or directory: {req.path}")
        if top.is_dir():
            found = sorted(top.rglob("*") if req.recursive else top.iterdir())
        else:
            found = [top]
        entries = [_volume_entry(p, data) for p in found]
        for start in range(0, len(entries), LIST_PAGE):
            batch = entries[start : start + LIST_PAGE]
            await stream.send_message(api_pb2.VolumeListFiles2Response(entries=batch))

    async def VolumePutFiles2(self, stream: RpcStream) -> None:
        """Files arrive as 8 MiB blocks named by their SHA-256; missing blocks are PUT over HTTP
        to the block store (server.py), then the call is repeated and the files are written."""
        req = await self._recv(stream)
        _, data = self.cloud.volume_data(req.volume_id)
        missing = []
        for file_index, spec in enumerate(req.files):
            for block_index, block in enumerate(spec.blocks):
                sha = block.contents_sha256.hex()
                if not self.cloud.block_path(sha).exists():
                    url = f"{self.urls['blocks']}/blocks/{sha}"
                    missing.append(
                        api_pb2.VolumePutFiles2Response.MissingBlock(
                            file_index=file_index, block_index=block_index, put_url=url
                        )
                    )
        if missing:
            await stream.send_message(api_pb2.VolumePutFiles2Response(missing_blocks=missing))
            return
        await asyncio.to_thread(self._write_files, data, req)
        await stream.send_message(api_pb2.VolumePutFiles2Response())

    def _write_files(self, data: Path, req: Any) -> None:
        targets = []
        for spec in req.files:
            target = data / spec.path.strip("/")
            if not target.resolve().is_relative_to(data.resolve()):
                raise GRPCError(Status.INVALID_ARGUMENT, f"Invalid path {spec.path!r}")
            if target.exists() and req.disallow_overwrite_existing_files:
                raise GRPCError(Status.ALREADY_EXISTS, f"{spec.path}: already exists")
            targets.append((spec, target))
        for spec, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{new_id('', 8)}")
            with open(tmp, "wb") as handle:
                for block in spec.blocks:
                    handle.write(self.cloud.block_path(block.contents_sha256.hex()).read_bytes())
                handle.truncate(spec.size)
            tmp.chmod((spec.mode or 0o644) & 0o7777)
            tmp.replace(target)

    # -- sandboxes ----------------------------------------------------------------------------

    async def SandboxCreateV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        definition = req.definition
        if not self.cloud.app_exists(req.app_id):
            raise GRPCError(Status.NOT_FOUND, f"App {req.app_id} not found")
        if definition.entrypoint_args:
            raise GRPCError(Status.UNIMPLEMENTED, "the test server runs no entrypoint command")
        if not 0 < definition.timeout_secs <= MAX_TIMEOUT_S:
            raise GRPCError(
                Status.INVALID_ARGUMENT,
                f"Sandbox timeout must be between 1 and {MAX_TIMEOUT_S} seconds",
            )
        if definition.workdir and not definition.workdir.startswith("/"):
            raise GRPCError(Status.INVALID_ARGUMENT, "workdir must be an absolute path")
        rootfs = self.cloud.image_dir(definition.image_id) / "rootfs"
        secret_env, secret_names = self._env(definition.secret_ids, req.secret_sources)
        env = {**containers.BASE_ENV, **secret_env}
        access = definition.network_access
        network = NETWORK[access.network_access_type]
        mounts = {}
        for mount in definition.volume_mounts:
            volume_name, data = self.cloud.volume_data(mount.volume_id)
            mounts[mount.mount_path] = {
                "source": str(data), "read_only": mount.read_only, "name": volume_name,
            }  # fmt: skip
        sandbox_id = new_id("sb-", 24)
        tags = {t.tag_name: t.tag_value for t in req.tags}
        key = tags.get("run") or definition.name or None  # the same across a creation's attempts
        knobs = self.cloud.knobs()
        created, ready_at = self.cloud.admit(sandbox_id, knobs, key)
        resources = definition.resources
        meta = {
            "id": sandbox_id, "task_id": task_id_of(sandbox_id), "app_id": req.app_id,
            "image_id": definition.image_id, "name": definition.name or None,
            "tags": tags,
            "created_at": created, "ready_at": ready_at, "timeout": definition.timeout_secs,
            "workdir": definition.workdir or None,
            "cpu": [resources.milli_cpu / 1000, resources.milli_cpu_max / 1000 or None],
            "memory": [resources.memory_mb, resources.memory_mb_max or None],
            "runtime": definition.runtime or None,
            "network": network,
            "block_network": network == "blocked",
            "outbound_domain_allowlist": (
                list(access.allowed_domains) if network == "allowlist" else None
            ),
            "outbound_cidr_allowlist": (
                list(access.allowed_cidrs) if network == "allowlist" else None
            ),
            "secrets": secret_names,
            "env_names": sorted(env), "mounts": mounts,
            "monitor": None, "terminated_at": None, "finish": None,
        }  # fmt: skip
        folder = self.cloud.sandbox_dir(sandbox_id)
        folder.mkdir(parents=True)
        # Shielded: a creation whose request is cancelled (the client went away, the server is
        # stopping) still completes, as Modal's does; its sandbox is recorded and listed by its
        # tags, and a stopping server kills it with the rest (server.terminate_all).
        launching = asyncio.ensure_future(
            containers.launch(folder, rootfs, meta, env, knobs.launch_delay_s)
        )
        try:
            await asyncio.shield(launching)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await launching
            if not launching.done() or launching.cancelled() or launching.exception():
                await self._launch_failed(folder, meta)
            raise
        except BaseException:
            await self._launch_failed(folder, meta)
            raise
        await stream.send_message(
            api_pb2.SandboxCreateV2Response(
                sandbox_id=sandbox_id,
                task_id=meta["task_id"],
                metadata=api_pb2.SandboxHandleMetadata(app_id=req.app_id),
                command_router_access=self._router_access(meta["task_id"]),
            )
        )

    async def _launch_failed(self, folder: Path, meta: dict[str, Any]) -> None:
        self.cloud.started_or_gone(meta["id"])
        await asyncio.to_thread(containers.terminate, folder, meta)

    def _env(self, secret_ids: Any, sources: Any) -> tuple[dict[str, str], list[str]]:
        """The sandbox's environment from its Secrets and `env`, in order; and the named
        Secrets' names."""
        env: dict[str, str] = {}
        names: list[str] = []
        for source in sources:
            if source.secret_id:
                record = self.cloud.secret_by_id(source.secret_id)
                env.update(record["env"])
                names.append(record["name"])
            else:
                env.update(dict(source.env.contents))
        for secret_id in secret_ids:
            record = self.cloud.secret_by_id(secret_id)
            if record["name"] not in names:
                env.update(record["env"])
                names.append(record["name"])
        return env, names

    def _router_access(self, task_id: str) -> api_pb2.CommandRouterAccess:
        jwt = self.issuer.issue(task_id=task_id)
        return api_pb2.CommandRouterAccess(url=self.urls["router"], jwt=jwt)

    def _sandbox(self, sandbox_id: str) -> tuple[Path, dict[str, Any], str | None]:
        meta = self.cloud.sandbox_meta(sandbox_id)
        folder = self.cloud.sandbox_dir(sandbox_id)
        return folder, meta, containers.finish_of(folder, meta)

    async def SandboxWaitV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        await self._wait(stream, req)

    async def SandboxWait(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._wait(stream, req)

    async def _wait(self, stream: RpcStream, req: Any) -> None:
        deadline = time.monotonic() + max(0.0, req.timeout)
        while True:
            folder, meta, finish = self._sandbox(req.sandbox_id)
            if finish is not None or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        result = result_of(finish, folder)
        handle = api_pb2.SandboxHandleMetadata(app_id=meta["app_id"], result=result)
        await stream.send_message(api_pb2.SandboxWaitResponse(result=result, metadata=handle))

    async def SandboxTerminateV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        await self._terminate(stream, req.sandbox_id)

    async def SandboxTerminate(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._terminate(stream, req.sandbox_id)

    async def _terminate(self, stream: RpcStream, sandbox_id: str) -> None:
        folder, meta, _ = self._sandbox(sandbox_id)
        await asyncio.to_thread(containers.terminate, folder, meta)
        self.cloud.started_or_gone(sandbox_id)
        await stream.send_message(api_pb2.SandboxTerminateResponse())

    async def SandboxTagsGetV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        await self._tags(stream, req.sandbox_id)

    async def SandboxTagsGet(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._tags(stream, req.sandbox_id)

    async def _tags(self, stream: RpcStream, sandbox_id: str) -> None:
        _, meta, _ = self._sandbox(sandbox_id)
        tags = [api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in meta["tags"].items()]
        await stream.send_message(api_pb2.SandboxTagsGetResponse(tags=tags))

    async def SandboxListV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        await self._list(stream, req)

    async def SandboxList(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._list(stream, req)

    async def _list(self, stream: RpcStream, req: Any) -> None:
        wanted = {t.tag_name: t.tag_value for t in req.tags}
        before = req.before_timestamp or float("inf")
        found = []
        for meta in self.cloud.sandbox_metas():
            folder = self.cloud.sandbox_dir(meta["id"])
            finish = containers.finish_of(folder, meta)
            if req.app_id and meta["app_id"] != req.app_id:
                continue
            if (finish is not None and not req.include_finished) or meta["created_at"] >= before:
                continue
            if any(meta["tags"].get(k) != v for k, v in wanted.items()):
                continue
            found.append((meta, result_of(finish, folder)))
        found.sort(key=lambda item: item[0]["created_at"], reverse=True)
        infos = [
            api_pb2.SandboxInfo(
                id=meta["id"],
                created_at=meta["created_at"],
                app_id=meta["app_id"],
                image_id=meta["image_id"],
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in meta["tags"].items()],
                task_info=api_pb2.TaskInfo(id=meta["task_id"], result=result),
                metadata=api_pb2.SandboxHandleMetadata(app_id=meta["app_id"], result=result),
            )
            for meta, result in found[:LIST_PAGE]
        ]
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=infos))

    async def SandboxGetTaskIdV2(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        await self._task_id(stream, req.sandbox_id)

    async def SandboxGetTaskId(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._task_id(stream, req.sandbox_id)

    async def _task_id(self, stream: RpcStream, sandbox_id: str) -> None:
        folder, meta, finish = self._sandbox(sandbox_id)
        result = result_of(finish, folder)
        await stream.send_message(
            api_pb2.SandboxGetTaskIdResponse(task_id=meta["task_id"], task_result=result)
        )

    async def SandboxGetCommandRouterAccess(self, stream: RpcStream) -> None:
        req = await self._recv(stream, v2=True)
        sandbox_id = req.sandbox_id or sandbox_id_of(req.task_id)
        await self._access(stream, sandbox_id, api_pb2.SandboxGetCommandRouterAccessResponse)

    async def TaskGetCommandRouterAccess(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._access(
            stream, sandbox_id_of(req.task_id), api_pb2.TaskGetCommandRouterAccessResponse
        )

    async def _access(self, stream: RpcStream, sandbox_id: str, response: Any) -> None:
        _, meta, finish = self._sandbox(sandbox_id)
        if finish is not None:
            raise GRPCError(
                Status.FAILED_PRECONDITION, f"Sandbox {sandbox_id} has already finished"
            )
        access = self._router_access(meta["task_id"])
        await stream.send_message(response(url=access.url, jwt=access.jwt))


def _secret_metadata(record: dict[str, Any]) -> api_pb2.SecretMetadata:
    return api_pb2.SecretMetadata(
        name=record["name"],
        keys=sorted(record["env"]),
        creation_info=api_pb2.CreationInfo(created_at=record["created_at"]),
    )


def _volume_entry(path: Path, data: Path) -> api_pb2.FileEntry:
    info = path.lstat()
    kind = api_pb2.FileEntry.DIRECTORY if path.is_dir() else api_pb2.FileEntry.FILE
    if path.is_symlink():
        kind = api_pb2.FileEntry.SYMLINK
    return api_pb2.FileEntry(
        path=path.relative_to(data).as_posix(), type=kind, mtime=int(info.st_mtime),
        size=info.st_size,
    )  # fmt: skip
