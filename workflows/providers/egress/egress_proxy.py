"""The egress proxy: the only way out of a sandbox, and only to allowlisted domains.

A sandbox has no network interface but `lo`. This proxy runs OUTSIDE it, on the host, listening on a
unix socket that is bound into the sandbox; a tiny forwarder inside (egress_forward.py) bridges
127.0.0.1:3128 to that socket, and the sandbox gets HTTP_PROXY/HTTPS_PROXY pointing there. The proxy
accepts `CONNECT host:port` (HTTPS and any TLS) and plain-HTTP requests in absolute form, and opens
the upstream connection only when the host is allowlisted:

    api.openai.com        exactly that host, ports 80 and 443
    *.example.com         any subdomain (a.example.com, b.a.example.com), not example.com itself
    registry.local:8443   a port other than 80/443 must be named

Everything else gets `403` and a denial, logged with the run id and recorded (JSON) for the run's
record. A name that resolves to a loopback, private, link-local or otherwise non-global address is
refused too (no DNS-rebinding way into the host's own services) unless it was pinned with
`--resolve name=address` by the operator (tests pin names to 127.0.0.1).

Standard library only, and self-contained: the `local` provider starts it as a detached script
(`python3 -I -S egress_proxy.py --socket ... --allow ...`) that outlives the worker like the runner,
and runs it in-process (`EgressProxy`) around builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PORTS = (80, 443)
MAX_HEAD = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
MAX_RECORDED = 200
CHUNK = 1 << 16
HOP_HEADERS = ("proxy-connection", "proxy-authorization", "connection", "keep-alive")

log = logging.getLogger("evalbot.egress")


# -- policy -------------------------------------------------------------------------------------


def normalize_host(host: str) -> str | None:
    """Lower-case, no trailing dot, no brackets; None when it is not a plausible host name."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-._:")
    if not host or len(host) > 253 or not set(host) <= allowed:
        return None
    return host


@dataclass(frozen=True)
class Rule:
    host: str  # "example.com" or, for a wildcard, the suffix ".example.com"
    wildcard: bool
    ports: tuple[int, ...]

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        return host.endswith(self.host) if self.wildcard else host == self.host


def parse_rule(entry: str, default_ports: tuple[int, ...] = DEFAULT_PORTS) -> Rule:
    text = entry.strip().lower()
    ports = default_ports
    name, sep, port = text.rpartition(":")
    if sep and port.isdigit() and "]" not in port and name.count(":") == 0:
        text, ports = name, (int(port),)
    wildcard = text.startswith("*.")
    host = normalize_host(text[2:] if wildcard else text)
    if host is None or "*" in text[2 if wildcard else 0 :]:
        raise ValueError(f"{entry!r} is not a domain, *.domain or domain:port")
    return Rule(f".{host}" if wildcard else host, wildcard, ports)


class Allowlist:
    """Which (host, port) a sandbox may reach; empty = nothing."""

    def __init__(self, entries: Iterable[str], default_ports: tuple[int, ...] = DEFAULT_PORTS):
        self.rules = [parse_rule(entry, default_ports) for entry in entries if entry.strip()]

    def allows(self, host: str, port: int) -> bool:
        name = normalize_host(host)
        return name is not None and any(rule.matches(name, port) for rule in self.rules)


def is_public(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_global
    except ValueError:
        return False


# -- the record of a run's egress ---------------------------------------------------------------


@dataclass
class EgressRecord:
    """Counts and denials; rewritten atomically to `path` (e.g. /out/.egress.json) on change."""

    run_id: str
    path: str | None = None
    allowed: int = 0
    denied: int = 0
    denials: list[dict[str, Any]] = field(default_factory=list)
    _dir_fd: int | None = field(default=None, repr=False)

    def allow(self) -> None:
        self.allowed += 1
        self.save()

    def deny(self, host: str, port: int, reason: str) -> None:
        self.denied += 1
        if len(self.denials) < MAX_RECORDED:
            self.denials.append({"at": round(time.time(), 3), "host": host[:253], "port": port,
                                 "reason": reason})  # fmt: skip
        log.warning("egress denied run=%s host=%s port=%d reason=%s", self.run_id, host[:253],
                    port, reason)  # fmt: skip
        self.save()

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "allowed": self.allowed, "denied": self.denied,
                "denials": self.denials}  # fmt: skip

    def save(self) -> None:
        """Write atomically without following links: the folder (/out) belongs to the agent, which
        could plant symlinks there; the folder is opened once and every name is resolved in it."""
        if self.path is None:
            return
        folder, name = os.path.split(self.path)
        temp = f".{name}.{os.urandom(6).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            if self._dir_fd is None:
                self._dir_fd = os.open(folder, os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            fd = os.open(temp, flags, 0o644, dir_fd=self._dir_fd)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.as_dict(), handle)
            os.replace(temp, name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
        except OSError as error:
            log.warning("egress record %s not written: %s", self.path, error)


# -- the proxy ----------------------------------------------------------------------------------


class Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class Request:
    method: str
    host: str
    port: int
    head: bytes  # what to send upstream first (empty for CONNECT)


def parse_head(head: bytes) -> Request:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise Refused(400, "malformed request line")
    method, target, version = parts
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not port.isdigit():
            raise Refused(400, "CONNECT needs host:port")
        return Request(method, host.strip("[]"), int(port), b"")
    if not target.lower().startswith("http://"):
        raise Refused(400, "only CONNECT and absolute http:// requests are proxied")
    rest = target[len("http://") :]
    authority, slash, path = rest.partition("/")
    host, colon, port = authority.rpartition(":")
    if not colon or not port.isdigit():
        host, port = authority, "80"
    headers = [line for line in lines[1:] if line and not _is_hop(line)]
    origin = [f"{method} {slash or '/'}{path} {version}", *headers, "Connection: close", "", ""]
    return Request(method, host.strip("[]"), int(port), "\r\n".join(origin).encode("latin-1"))


def _is_hop(line: str) -> bool:
    return line.split(":", 1)[0].strip().lower() in HOP_HEADERS


class EgressProxy:
    """The proxy server on a unix socket. `async with` it, or `await start()` / `await close()`."""

    def __init__(
        self,
        socket_path: str,
        allow: Iterable[str],
        *,
        run_id: str = "",
        record_path: str | None = None,
        resolve: Mapping[str, str] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.allowlist = Allowlist(allow)
        self.record = EgressRecord(run_id, record_path)
        self.pinned = {normalize_host(k) or k: v for k, v in (resolve or {}).items()}
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> EgressProxy:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def start(self) -> None:
        self.record.save()
        listener = bind_unix(self.socket_path)
        self._server = await asyncio.start_unix_server(self._handle, sock=listener, limit=MAX_HEAD)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        try:
            request = parse_head(head)
            upstream = await self._open(request)
        except Refused as refusal:
            writer.write(_reply(refusal.status, refusal.reason))
            await writer.drain()
            return
        up_reader, up_writer = upstream
        if request.method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(request.head)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))

    async def _open(self, request: Request) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = normalize_host(request.host) or request.host
        if not self.allowlist.allows(host, request.port):
            self.record.deny(host, request.port, "not in allow_domains")
            raise Refused(403, f"{host}:{request.port} is not in this run's allow_domains")
        address = await self._address(host, request.port)
        try:
            opened = await asyncio.wait_for(
                asyncio.open_connection(address, request.port, limit=CHUNK), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as error:
            raise Refused(502, f"cannot reach {host}:{request.port} ({error})") from None
        self.record.allow()
        return opened

    async def _address(self, host: str, port: int) -> str:
        if host in self.pinned:
            return self.pinned[host]
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            raise Refused(502, f"cannot resolve {host}") from None
        addresses = [str(info[4][0]) for info in infos]
        if not addresses or not all(is_public(a) for a in addresses):
            self.record.deny(host, port, "resolves to a non-public address")
            raise Refused(403, f"{host} resolves to a non-public address")
        return addresses[0]


def _reply(status: int, reason: str) -> bytes:
    names = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}
    body = f"evalbot egress proxy: {reason}\n".encode()
    return (
        f"HTTP/1.1 {status} {names.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


def bind_unix(path: str) -> socket.socket:
    """A listening unix socket at `path`, mode 0666 (sandbox users connect to it). Long paths go
    through /proc/self/fd, so the 108-byte limit of sun_path does not apply."""
    folder, name = os.path.split(os.path.abspath(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dir_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        listener.bind(f"/proc/self/fd/{dir_fd}/{name}")
    finally:
        os.close(dir_fd)
    os.chmod(path, 0o666)  # noqa: S103 - sandbox users must connect; the folder guards it
    listener.listen(128)
    listener.setblocking(False)
    return listener


# -- as a detached process ----------------------------------------------------------------------


USAGE = (
    "usage: egress_proxy.py --socket PATH --run-id ID [--allow DOMAIN]... [--record PATH] "
    "[--resolve NAME=ADDRESS]... [--ready-fd N] [--max-seconds S]"
)


def parse_args(argv: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {"allow": [], "resolve": {}, "record": None, "ready_fd": -1,
                               "max_seconds": 0.0, "run_id": "", "socket": ""}  # fmt: skip
    pairs = iter(argv)
    for flag in pairs:
        value = next(pairs, None)
        if value is None or not flag.startswith("--"):
            raise SystemExit(USAGE)
        key = flag[2:].replace("-", "_")
        if key == "allow":
            options["allow"].append(value)
        elif key == "resolve":
            name, _, address = value.partition("=")
            options["resolve"][name] = address
        elif key in ("ready_fd", "max_seconds"):
            options[key] = float(value) if key == "max_seconds" else int(value)
        elif key in options:
            options[key] = value
        else:
            raise SystemExit(USAGE)
    if not options["socket"]:
        raise SystemExit(USAGE)
    return options


async def serve(options: dict[str, Any]) -> None:
    proxy = EgressProxy(
        options["socket"],
        options["allow"],
        run_id=options["run_id"],
        record_path=options["record"],
        resolve=options["resolve"],
    )
    await proxy.start()
    if options["ready_fd"] >= 0:
        os.write(options["ready_fd"], b"ready")
        os.close(options["ready_fd"])
    deadline = time.monotonic() + options["max_seconds"] if options["max_seconds"] else None
    try:
        while os.path.exists(options["socket"]):  # the sandbox was torn down: stop
            if deadline is not None and time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
    finally:
        await proxy.close()


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(message)s", level=logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
