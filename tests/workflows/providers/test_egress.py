"""The egress proxy: allowlist matching, the proxy over real sockets against a local HTTP server,
and `local` sandboxes: an allowlisted domain is reachable through the proxy, any other is refused
and recorded with the run id, and a run without an allowlist has no route out at all."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.workflows.providers.kits import Kit, git, run_to_end
from workflows.prewarm.image_label import image_path
from workflows.providers.base import SandboxSpec
from workflows.providers.egress.egress_proxy import Allowlist, EgressProxy, parse_head, parse_rule
from workflows.providers.local import LocalProvider, LocalSandbox

pytestmark = pytest.mark.timeout(120)

PINNED = {name: "127.0.0.1" for name in ("allowed.test", "denied.test", "registry.test")}


# -- policy -------------------------------------------------------------------------------------


def test_exact_wildcard_and_port_rules() -> None:
    allow = Allowlist(["api.openai.com", "*.example.com", "registry.local:8443"])
    assert allow.allows("api.openai.com", 443) and allow.allows("API.OpenAI.com.", 80)
    assert not allow.allows("api.openai.com", 8080)  # other ports must be named
    assert not allow.allows("openai.com", 443) and not allow.allows("xapi.openai.com", 443)
    assert allow.allows("a.example.com", 443) and allow.allows("b.a.example.com", 443)
    assert not allow.allows("example.com", 443)  # *.suffix is subdomains only
    assert not allow.allows("evilexample.com", 443)
    assert allow.allows("registry.local", 8443) and not allow.allows("registry.local", 443)
    assert not Allowlist([]).allows("api.openai.com", 443)


@pytest.mark.parametrize("entry", ["*", "a.*.com", "exa mple.com", "", "*."])
def test_malformed_rules_are_rejected(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_rule(entry) if entry else parse_rule(" ")


def test_request_heads_are_parsed_and_rewritten() -> None:
    connect = parse_head(b"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
    assert (connect.method, connect.host, connect.port, connect.head) == (
        "CONNECT",
        "api.test",
        443,
        b"",
    )
    plain = parse_head(
        b"GET http://api.test:8080/a?b=1 HTTP/1.1\r\nHost: api.test\r\n"
        b"Proxy-Authorization: x\r\nConnection: keep-alive\r\n\r\n"
    )
    assert (plain.host, plain.port) == ("api.test", 8080)
    assert plain.head == b"GET /a?b=1 HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"
    assert parse_head(b"GET http://api.test HTTP/1.0\r\n\r\n").port == 80


# -- the proxy over real sockets ----------------------------------------------------------------


@pytest.fixture
async def origin() -> AsyncIterator[int]:
    """A local HTTP server answering `hello <path>`; yields its port."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        path = head.split(b" ")[1]
        body = b"hello " + path
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def ask(socket_path: Path, request: bytes, then: bytes = b"") -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    writer.write(request)
    if then:
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(then)
    reply = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return reply


async def test_proxy_allows_only_the_allowlist(tmp_path: Path, origin: int) -> None:
    record = tmp_path / "egress.json"
    proxy = EgressProxy(
        str(tmp_path / "proxy.sock"),
        [f"allowed.test:{origin}", f"localhost:{origin}"],
        run_id="exp/case/arm/0",
        record_path=str(record),
        resolve=PINNED,
    )
    async with proxy:
        sock = tmp_path / "proxy.sock"
        plain = await ask(sock, f"GET http://allowed.test:{origin}/a HTTP/1.1\r\n\r\n".encode())
        tunnel = await ask(
            sock,
            f"CONNECT allowed.test:{origin} HTTP/1.1\r\n\r\n".encode(),
            then=b"GET /b HTTP/1.0\r\n\r\n",
        )
        denied = await ask(sock, f"CONNECT denied.test:{origin} HTTP/1.1\r\n\r\n".encode())
        # allowlisted, but resolves to the host's own loopback without being pinned: refused
        rebound = await ask(sock, f"CONNECT localhost:{origin} HTTP/1.1\r\n\r\n".encode())
    assert plain.startswith(b"HTTP/1.0 200") and plain.endswith(b"hello /a")
    assert tunnel.endswith(b"hello /b")
    assert denied.startswith(b"HTTP/1.1 403") and b"not in this run's allow_domains" in denied
    assert rebound.startswith(b"HTTP/1.1 403")
    saved = json.loads(record.read_text())
    assert saved["run_id"] == "exp/case/arm/0"
    assert (saved["allowed"], saved["denied"]) == (2, 2)
    assert [(d["host"], d["reason"]) for d in saved["denials"]] == [
        ("denied.test", "not in allow_domains"),
        ("localhost", "resolves to a non-public address"),
    ]
    assert not (tmp_path / "proxy.sock").exists()


# -- local sandboxes ----------------------------------------------------------------------------

PROBE = """
import json, os, socket, sys, urllib.error, urllib.request

def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return [reply.status, reply.read().decode()]
    except urllib.error.HTTPError as error:
        return [error.code, ""]
    except Exception as error:
        return ["error", type(error).__name__]

def connect(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return "connected"
    except OSError as error:
        return "failed: " + type(error).__name__

def tunnel(target):
    try:
        conn = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        conn.sendall(("CONNECT %s HTTP/1.1\\r\\n\\r\\n" % target).encode())
        head = conn.recv(4096)
        conn.sendall(b"GET /tunnel HTTP/1.0\\r\\n\\r\\n")
        body = b""
        while chunk := conn.recv(4096):
            body += chunk
        return [head.split(b"\\r\\n")[0].decode(), body.decode()]
    except OSError as error:
        return ["error", type(error).__name__]

port = int(sys.argv[1])
result = {
    "proxy_env": os.environ.get("HTTPS_PROXY"),
    "interfaces": sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
    "routes": open("/proc/net/route").read().splitlines()[1:],
    "socket_bound": os.path.exists("/evalbot/egress.sock"),
    "host_loopback": connect("127.0.0.1", port),
}
if result["proxy_env"]:
    result["allowed"] = fetch("http://allowed.test:%d/plain" % port)
    result["denied"] = fetch("http://denied.test:%d/plain" % port)
    result["tunnel"] = tunnel("allowed.test:%d" % port)
json.dump(result, open("/out/result.json", "w"))
"""


@pytest.fixture
def egress_provider(local_kit: Kit) -> LocalProvider:
    return LocalProvider(
        local_kit.base / "sandboxes",
        local_kit.base / "images",
        start_timeout_s=20,
        egress_resolve=PINNED,
    )


async def probe(
    kit: Kit, provider: LocalProvider, tmp_path: Path, port: int, allow: tuple[str, ...]
) -> tuple[LocalSandbox, dict[str, Any]]:
    world = tmp_path / "world"
    world.mkdir()
    (world / "probe.py").write_text(PROBE)
    spec = kit.spec(run_id="exp/egress-case/head/0")
    spec = SandboxSpec(**{**spec.__dict__, "world_dir": world, "allow_domains": allow})
    sandbox = await provider.create(spec)
    assert isinstance(sandbox, LocalSandbox)
    try:
        state = await run_to_end(sandbox, f"python3 /world/probe.py {port}", timeout_s=60)
        assert state["exit_code"] == 0, await sandbox.read_file("/out/stderr.log")
        return sandbox, json.loads(await sandbox.read_file("/out/result.json"))
    except BaseException:
        await sandbox.terminate()
        raise


async def test_a_run_reaches_its_allowlist_through_the_proxy_and_nothing_else(
    local_kit: Kit, egress_provider: LocalProvider, tmp_path: Path, origin: int
) -> None:
    sandbox, result = await probe(
        local_kit, egress_provider, tmp_path, origin, (f"allowed.test:{origin}",)
    )
    try:
        record = json.loads(await sandbox.read_file("/out/.egress.json"))
        log = sandbox.layout.log.read_text()
    finally:
        await sandbox.terminate()
    assert result["proxy_env"] == "http://127.0.0.1:3128"
    assert result["allowed"] == [200, "hello /plain"]
    assert result["tunnel"][0] == "HTTP/1.1 200 Connection established"
    assert result["tunnel"][1].startswith("HTTP/1.0 200 OK")
    assert result["tunnel"][1].endswith("\r\n\r\nhello /tunnel")
    assert result["denied"][0] == 403
    assert result["interfaces"] == ["lo"] and result["routes"] == []
    assert result["host_loopback"].startswith("failed")  # still no direct way out
    assert record["run_id"] == "exp/egress-case/head/0"
    assert [d["host"] for d in record["denials"]] == ["denied.test"]
    assert "egress denied run=exp/egress-case/head/0 host=denied.test" in log


async def test_a_run_without_allowlist_has_no_route_out(
    local_kit: Kit, egress_provider: LocalProvider, tmp_path: Path, origin: int
) -> None:
    sandbox, result = await probe(local_kit, egress_provider, tmp_path, origin, ())
    await sandbox.terminate()
    assert result["proxy_env"] is None and result["socket_bound"] is False
    assert result["interfaces"] == ["lo"]
    assert result["routes"] == []  # IPv4: not even a default route
    assert result["host_loopback"].startswith("failed")


async def test_terminate_stops_the_proxy(
    local_kit: Kit, egress_provider: LocalProvider, tmp_path: Path, origin: int
) -> None:
    sandbox, _ = await probe(local_kit, egress_provider, tmp_path, origin, ("allowed.test",))
    proxy = json.loads(sandbox.layout.meta.read_text())["egress"]
    await sandbox.terminate()
    assert (
        not Path(f"/proc/{proxy['pid']}/cmdline").exists()
        or b"egress_proxy" not in Path(f"/proc/{proxy['pid']}/cmdline").read_bytes()
    )


FETCH = """
import json, os, urllib.error, urllib.request, sys
port = int(sys.argv[1])
result = {"proxy": os.environ.get("HTTPS_PROXY")}
for name in ("registry.test", "denied.test"):
    try:
        with urllib.request.urlopen("http://%s:%d/simple" % (name, port), timeout=5) as reply:
            result[name] = reply.status
            result["body"] = reply.read().decode()
    except urllib.error.HTTPError as error:
        result[name] = error.code
        result[name + "-body"] = error.read().decode()
    except Exception as error:
        result[name] = type(error).__name__
json.dump(result, open("fetched.json", "w"))
"""


async def test_builds_reach_only_the_build_allowlist(
    local_kit: Kit, tmp_path: Path, origin: int
) -> None:
    repo = tmp_path / "agent"
    repo.mkdir()
    (repo / "fetch.py").write_text(FETCH)
    await asyncio.to_thread(
        subprocess.run, ["git", "init", "-q", "-b", "main", str(repo)], check=True
    )
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "fetcher")
    setup = f"python3 fetch.py {origin}"
    allowed = LocalProvider(
        tmp_path / "sandboxes",
        tmp_path / "images",
        build_allow_domains=[f"registry.test:{origin}"],
        egress_resolve=PINNED,
    )
    image = image_path(await allowed.build_image(repo, "main", setup))
    fetched = json.loads((Path(image) / "fetched.json").read_text())
    assert fetched["proxy"] == "http://127.0.0.1:3128"
    assert (fetched["registry.test"], fetched["body"]) == (200, "hello /simple")
    assert fetched["denied.test"] == 403 and "allow_domains" in fetched["denied.test-body"]
    offline = LocalProvider(tmp_path / "sandboxes2", tmp_path / "images2", egress_resolve=PINNED)
    image = image_path(await offline.build_image(repo, "main", setup))
    fetched = json.loads((Path(image) / "fetched.json").read_text())
    assert fetched["proxy"] is None and fetched["registry.test"] == "URLError"  # no route out
