"""The Modal test server process: the control plane and the task command router on one grpclib
port, and a small HTTP block store (Volume uploads PUT their blocks there) on a second port.

Run it with `python -m tests.fakes.modal_server --root DIR --port 0 --ready-file FILE`; once both
ports listen it writes `{"port", "http_port", "pid"}` to the ready file. SIGTERM (or SIGINT) stops
it after terminating every sandbox still running in its cloud.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import json
import os
import secrets as random_tokens
import signal
from pathlib import Path

from aiohttp import web
from grpclib.events import RecvRequest, listen
from grpclib.server import Server

from tests.fakes.modal_server import containers
from tests.fakes.modal_server.auth import Issuer
from tests.fakes.modal_server.control_plane import ControlPlane
from tests.fakes.modal_server.router import Router
from tests.fakes.modal_server.state import Cloud, Knobs, write_json

HOST = "127.0.0.1"
# how long a stopping server lets cancelled requests finish (a creation under way completes and
# records its container) before it kills every container; the fixture waits 30 s in all
STOP_REQUESTS_S = 20


def block_store(cloud: Cloud) -> web.Application:
    async def put_block(request: web.Request) -> web.Response:
        sha = request.match_info["sha"]
        body = await request.read()
        if hashlib.sha256(body).hexdigest() != sha:
            return web.Response(status=400, text="block content does not match its SHA-256")
        path = cloud.block_path(sha)
        tmp = path.with_name(f".{sha}.{random_tokens.token_hex(4)}")
        tmp.write_bytes(body)
        tmp.replace(path)
        return web.Response(body=f"stored:{sha}".encode())

    app = web.Application(client_max_size=64 << 20)
    app.router.add_put("/blocks/{sha}", put_block)
    return app


async def serve(root: Path, port: int, ready_file: Path | None, knobs: Knobs) -> None:
    cloud = Cloud(root)
    cloud.configure(**vars(knobs))
    runner = web.AppRunner(block_store(cloud))
    await runner.setup()
    site = web.TCPSite(runner, HOST, 0)
    await site.start()
    http_port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    issuer = Issuer(random_tokens.token_bytes(32))
    urls: dict[str, str] = {"blocks": f"http://{HOST}:{http_port}"}
    # Both classes fill their unimplemented RPCs in at import time (with_unimplemented).
    control_plane = ControlPlane(cloud, issuer, urls)  # type: ignore[abstract]
    router = Router(cloud, issuer)  # type: ignore[abstract]
    server = Server([control_plane, router])
    rpc_counts = count_rpcs(server)
    await server.start(HOST, port)
    grpc_port = server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    urls["router"] = f"http://{HOST}:{grpc_port}"
    if ready_file is not None:
        write_json(ready_file, {"port": grpc_port, "http_port": http_port, "pid": os.getpid()})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    writer = asyncio.ensure_future(write_rpc_counts(cloud, rpc_counts, stop))
    await stop.wait()
    await writer
    server.close()  # cancels the running requests; a creation under way still completes
    await runner.cleanup()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(server.wait_closed(), STOP_REQUESTS_S)
    await asyncio.to_thread(terminate_all, cloud)


def count_rpcs(server: Server) -> collections.Counter[str]:
    """Requests received, by method name (`/modal.client.ModalClient/SandboxCreate` → its last
    part), for benchmarks: RPCs per cell."""
    counts: collections.Counter[str] = collections.Counter()

    async def received(event: RecvRequest) -> None:
        counts[event.method_name.rsplit("/", 1)[-1]] += 1

    listen(server, RecvRequest, received)
    return counts


async def write_rpc_counts(
    cloud: Cloud, counts: collections.Counter[str], stop: asyncio.Event
) -> None:
    """Into `<root>/rpc_counts.json` each second while the server runs, and once at its end."""
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 1)
        write_json(cloud.root / "rpc_counts.json", dict(counts))


def terminate_all(cloud: Cloud) -> None:
    """Kill every running container first (quick), then finish each off (wait, record, remove its
    files, slow): a few hundred containers must all be dead before whoever stops the server gives
    up waiting and kills it."""
    running = []
    for meta in cloud.sandbox_metas():
        folder = cloud.sandbox_dir(meta["id"])
        if containers.finish_of(folder, meta) is None:
            containers.kill_now(folder, meta)
            running.append((folder, meta))
    for folder, meta in running:
        containers.terminate(folder, meta)


def describe(ready_file: Path) -> dict[str, int]:
    return dict(json.loads(ready_file.read_text()))
