"""`modal.task_command_router.TaskCommandRouter`: exec and snapshots inside a sandbox's container.

The SDK reaches it at the URL `SandboxCreateV2` / `SandboxGetCommandRouterAccess` hand out (the
same port as the control plane; plain http is accepted because the server is on localhost), with the
task's JWT as a bearer token. Implemented RPCs (everything else answers UNIMPLEMENTED):
TaskExecStart, TaskExecPoll, TaskExecWait, TaskExecStdioRead, TaskExecStdinWrite,
TaskExecStdinWriteStream, TaskExecStdinStatus, TaskSnapshotFilesystem, SandboxWaitUntilReady.

Calls on a sandbox that is still starting wait for it; calls on a finished one answer NOT_FOUND
(the SDK's filesystem API turns that into NotFoundError "The Sandbox is unavailable..."). An exec
killed by its own `timeout` never reports an exit status: the SDK's client-side exec deadline
expires and it reports -1, which is what the SDK shows for a timed-out exec.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpclib import GRPCError, Status
from grpclib.server import Stream
from modal_proto import task_command_router_pb2 as sr_pb2
from modal_proto.task_command_router_grpc import TaskCommandRouterBase

from tests.fakes.modal_server import containers
from tests.fakes.modal_server.auth import Issuer, check_bearer
from tests.fakes.modal_server.control_plane import sandbox_id_of, with_unimplemented
from tests.fakes.modal_server.state import Cloud, new_id, write_json

RpcStream = Stream[Any, Any]
CHUNK = 1 << 16
POLL_S = 0.005  # first wait between looks at an exec's files; doubles up to POLL_MAX_S
POLL_MAX_S = 0.1
PIPE_OUT = sr_pb2.TaskExecStdoutConfig.TASK_EXEC_STDOUT_CONFIG_PIPE
PIPE_ERR = sr_pb2.TaskExecStderrConfig.TASK_EXEC_STDERR_CONFIG_PIPE


@dataclass
class Stdin:
    written: int = 0
    closed: bool = False
    lock: asyncio.Lock | None = None


@with_unimplemented
class Router(TaskCommandRouterBase):
    def __init__(self, cloud: Cloud, issuer: Issuer) -> None:
        self.cloud = cloud
        self.issuer = issuer
        self.stdin: dict[tuple[str, str], Stdin] = {}
        self.snapshots: dict[str, str] = {}
        self.ready_seen: set[str] = set()

    async def _recv(self, stream: RpcStream) -> Any:
        request = await stream.recv_message()
        if request is None:
            raise GRPCError(Status.INVALID_ARGUMENT, "no request message")
        check_bearer(self.issuer, stream.metadata or {}, request.task_id)
        return request

    def _sandbox(self, task_id: str) -> tuple[Path, dict[str, Any]]:
        sandbox_id = sandbox_id_of(task_id)
        meta = self.cloud.sandbox_meta(sandbox_id)
        folder = self.cloud.sandbox_dir(sandbox_id)
        if containers.finish_of(folder, meta) is not None:
            raise GRPCError(Status.NOT_FOUND, f"Task {task_id} has finished")
        return folder, meta

    async def _ready(self, task_id: str) -> tuple[Path, dict[str, Any]]:
        folder, meta = self._sandbox(task_id)
        await containers.wait_ready(folder, meta)
        if meta["id"] not in self.ready_seen:
            self.ready_seen.add(meta["id"])
            self.cloud.record_ready(time.time() - meta["created_at"])
        return folder, meta

    # -- exec -----------------------------------------------------------------------------------

    async def TaskExecStart(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        folder, meta = await self._ready(req.task_id)
        key = (req.task_id, req.exec_id)
        if not req.command_args:
            raise GRPCError(Status.INVALID_ARGUMENT, "exec needs a command")
        if req.workdir and not req.workdir.startswith("/"):
            raise GRPCError(Status.INVALID_ARGUMENT, "workdir must be an absolute path")
        if key not in self.stdin:  # exec_start is retried with the same exec id: start once
            self.stdin[key] = Stdin(lock=asyncio.Lock())
            env = dict(req.env)
            for source in req.secret_sources:
                if source.secret_id:
                    env.update(self.cloud.secret_by_id(source.secret_id)["env"])
                else:
                    env.update(dict(source.env.contents))
            for secret_id in req.secret_ids:
                env.update(self.cloud.secret_by_id(secret_id)["env"])
            request = {
                "op": "exec", "id": req.exec_id, "argv": list(req.command_args), "env": env,
                "workdir": req.workdir or meta.get("workdir") or "/",
                "timeout": req.timeout_secs or None,
                "stdout": req.stdout_config == PIPE_OUT, "stderr": req.stderr_config == PIPE_ERR,
            }  # fmt: skip
            reply = await containers.agent_call(folder, request)
            if not reply.get("ok"):
                raise GRPCError(Status.INTERNAL, f"exec failed: {reply.get('message')}")
            # The exec is known to a server restarted on the same cloud, too.
            marker = containers.exec_paths(folder, req.exec_id)[2].with_suffix(".exec")
            write_json(marker, {"id": req.exec_id, "argv": request["argv"]})
        await stream.send_message(sr_pb2.TaskExecStartResponse())

    def _status(self, folder: Path, meta: dict[str, Any], exec_id: str) -> int | None:
        code = containers.exit_code(folder, exec_id)
        if code is None and containers.finish_of(folder, meta) is not None:
            return 137  # the sandbox ended under it
        return code

    @staticmethod
    def _exit(response: Any, code: int | None) -> Any:
        if code is None or code == -1:  # -1: its deadline killed it (see the module doc)
            return response()
        if code > 128:
            return response(signal=code - 128)
        return response(code=code)

    async def TaskExecPoll(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        folder, meta = self._sandbox_any(req.task_id)
        self._known(req.task_id, req.exec_id)
        code = self._status(folder, meta, req.exec_id)
        await stream.send_message(self._exit(sr_pb2.TaskExecPollResponse, code))

    async def TaskExecWait(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        folder, meta = self._sandbox_any(req.task_id)
        self._known(req.task_id, req.exec_id)
        delay = POLL_S
        while (code := self._status(folder, meta, req.exec_id)) is None or code == -1:
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)
            meta = self.cloud.sandbox_meta(meta["id"])
        await stream.send_message(self._exit(sr_pb2.TaskExecWaitResponse, code))

    def _sandbox_any(self, task_id: str) -> tuple[Path, dict[str, Any]]:
        """The sandbox, finished or not (an exec's status outlives its sandbox's end)."""
        sandbox_id = sandbox_id_of(task_id)
        return self.cloud.sandbox_dir(sandbox_id), self.cloud.sandbox_meta(sandbox_id)

    def _known(self, task_id: str, exec_id: str) -> Stdin:
        key = (task_id, exec_id)
        if key not in self.stdin:
            folder = self.cloud.sandbox_dir(sandbox_id_of(task_id))
            marker = containers.exec_paths(folder, exec_id)[2].with_suffix(".exec")
            if not marker.exists():
                raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found")
            self.stdin[key] = Stdin(lock=asyncio.Lock())  # started by an earlier server process
        return self.stdin[key]

    async def TaskExecStdioRead(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        folder, meta = self._sandbox_any(req.task_id)
        self._known(req.task_id, req.exec_id)
        out, err, _ = containers.exec_paths(folder, req.exec_id)
        path = out if req.file_descriptor == sr_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT else err
        async for chunk in self._tail(path, req.offset, folder, meta, req.exec_id):
            await stream.send_message(sr_pb2.TaskExecStdioReadResponse(data=chunk))

    async def _tail(
        self, path: Path, offset: int, folder: Path, meta: dict[str, Any], exec_id: str
    ) -> AsyncIterator[bytes]:
        """The exec's output from `offset` while it runs, then the rest (see `tail_output`)."""
        sandbox_id = meta["id"]

        def finished() -> bool:
            latest = self.cloud.sandbox_meta(sandbox_id)
            return self._status(folder, latest, exec_id) is not None

        async for chunk in tail_output(path, offset, finished):
            yield chunk

    # -- stdin ----------------------------------------------------------------------------------

    async def TaskExecStdinWrite(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        folder, _ = self._sandbox(req.task_id)
        state = self._known(req.task_id, req.exec_id)
        await self._write_stdin(folder, req.exec_id, state, req.offset, [req.data], req.eof)
        await stream.send_message(sr_pb2.TaskExecStdinWriteResponse())

    async def TaskExecStdinWriteStream(self, stream: RpcStream) -> None:
        first = await stream.recv_message()
        if first is None or not first.HasField("start"):
            raise GRPCError(Status.INVALID_ARGUMENT, "the stream must begin with a start message")
        start = first.start
        check_bearer(self.issuer, stream.metadata or {}, start.task_id)
        folder, _ = self._sandbox(start.task_id)
        state = self._known(start.task_id, start.exec_id)
        ended = False

        async def chunks() -> AsyncIterator[bytes]:
            nonlocal ended
            while (message := await stream.recv_message()) is not None:
                if message.HasField("end"):
                    ended = True
                    return
                if message.data:
                    yield message.data

        await self._write_stdin(folder, start.exec_id, state, start.offset, chunks(), None)
        if ended:
            await self._write_stdin(folder, start.exec_id, state, state.written, [], True)
        await stream.send_message(sr_pb2.TaskExecStdinWriteStreamResponse())

    async def _write_stdin(
        self, folder: Path, exec_id: str, state: Stdin, offset: int, data: Any, eof: bool | None
    ) -> None:
        """Write `data` (bytes chunks, sync or async) at `offset`: a prefix already written is
        skipped (retries resend it); `eof` closes stdin."""
        assert state.lock is not None
        async with state.lock:
            if state.closed:
                if eof and not _has_data(data):
                    return
                raise GRPCError(Status.FAILED_PRECONDITION, f"stdin of exec {exec_id} is closed")
            if offset > state.written:
                raise GRPCError(
                    Status.OUT_OF_RANGE, f"stdin offset {offset} is past {state.written} bytes"
                )
            skip = state.written - offset

            async def body() -> AsyncIterator[bytes]:
                nonlocal skip
                async for chunk in _aiter(data):
                    if skip >= len(chunk):
                        skip -= len(chunk)
                        continue
                    chunk, skip = chunk[skip:], 0
                    yield chunk

            request = {"op": "stdin", "id": exec_id, "eof": bool(eof)}
            reply = await containers.agent_call(folder, request, body())
            if not reply.get("ok"):
                state.closed = True
                raise GRPCError(Status.FAILED_PRECONDITION, str(reply.get("message")))
            state.written += int(reply["bytes"])
            state.closed = bool(eof)

    async def TaskExecStdinStatus(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        state = self._known(req.task_id, req.exec_id)
        await stream.send_message(
            sr_pb2.TaskExecStdinStatusResponse(num_bytes_written=state.written, closed=state.closed)
        )

    # -- sandbox-level calls --------------------------------------------------------------------

    async def TaskSnapshotFilesystem(self, stream: RpcStream) -> None:
        """A new image holding the container's files (without the host's /usr, /etc, mounts)."""
        req = await self._recv(stream)
        folder, _ = await self._ready(req.task_id)
        image_id = self.snapshots.get(req.snapshot_id) if req.snapshot_id else None
        if image_id is None:
            image_id = new_id("im-")
            staging = self.cloud.root / "images" / f".{image_id}"
            await containers.copy_tree(
                folder / "root", staging / "rootfs", skip=containers.NOT_IN_SNAPSHOTS
            )
            write_json(staging / "meta.json", {"snapshot_of": folder.name, "ttl": req.ttl_seconds})
            staging.rename(self.cloud.root / "images" / image_id)
            if req.snapshot_id:
                self.snapshots[req.snapshot_id] = image_id
        await stream.send_message(sr_pb2.TaskSnapshotFilesystemResponse(image_id=image_id))

    async def SandboxWaitUntilReady(self, stream: RpcStream) -> None:
        req = await self._recv(stream)
        await self._ready(req.task_id)
        await stream.send_message(sr_pb2.SandboxWaitUntilReadyTcrResponse(ready_at=time.time()))


async def tail_output(
    path: Path, offset: int, finished: Callable[[], bool]
) -> AsyncIterator[bytes]:
    """An output file from `offset` until its exec has finished and every byte is sent.

    The agent writes an exec's exit status only once its output is complete (the process has
    exited, or the filesystem tool closed its files), so the status is looked at FIRST and the file
    then read to its end: when the status was there before that read, the read saw everything.
    Looking at the status after finding nothing to read would lose output that appeared (with its
    status) in between: an empty stdout with exit code 0, which the SDK's `filesystem.stat` fails
    to parse.
    """
    handle = None
    delay = POLL_S
    try:
        while True:
            done = finished()
            if handle is None and path.exists():
                handle = open(path, "rb")  # noqa: SIM115, ASYNC230 - a local file, closed below
                handle.seek(offset)
            sent = False
            while handle is not None and (chunk := handle.read(CHUNK)):
                sent = True
                yield chunk
            if done:
                return
            if sent:
                delay = POLL_S
                continue
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)
    finally:
        if handle is not None:
            handle.close()


def _has_data(data: Any) -> bool:
    return isinstance(data, list) and any(data)


async def _aiter(data: Any) -> AsyncIterator[bytes]:
    if isinstance(data, list):
        for chunk in data:
            if chunk:
                yield bytes(chunk)
    else:
        async for chunk in data:
            yield bytes(chunk)
