"""A local fake of the GitHub REST API, over real HTTP, recording every call.

It serves the endpoints the bot reaches through PyGithub: repositories, pulls, issue comments
(list/create/edit), reactions, labels, commit statuses, check runs (list/create/update), compare,
collaborator permission, and the GitHub App endpoints (JWT-authenticated `GET /app`, repository
installation, installation access tokens). Responses follow GitHub's shapes closely enough for
PyGithub, under an optional path prefix (`/api/v3`, as on GitHub Enterprise).

    server = FakeGitHub().start()
    server.add_pull(pull_json)              # e.g. a fixture payload's "pull_request"
    server.set_permission("o/r", "alice", "write")
    ... PyGithub with base_url=server.base_url ...
    server.calls_to("POST", r"/issues/\\d+/comments")
    server.stop()
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.http_server import FakeHttpServer

JSON = dict[str, Any]
REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # without the prefix, e.g. /repos/o/r/pulls/2
    query: dict[str, list[str]]
    body: Any
    auth: str  # "token:<login>", "jwt", or "none"
    status: int


@dataclass
class Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int


@dataclass
class Identity:
    login: str
    type: str = "User"
    id: int = 1

    def json(self) -> JSON:
        return {"login": self.login, "id": self.id, "type": self.type}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class State:
    repos: dict[str, JSON] = field(default_factory=dict)
    pulls: dict[tuple[str, int], JSON] = field(default_factory=dict)
    permissions: dict[tuple[str, str], str] = field(default_factory=dict)
    comments: dict[int, JSON] = field(default_factory=dict)
    check_runs: dict[int, JSON] = field(default_factory=dict)
    statuses: dict[tuple[str, str], list[JSON]] = field(default_factory=dict)
    merge_bases: dict[tuple[str, str, str], str] = field(default_factory=dict)
    tokens: dict[str, tuple[Identity, float]] = field(default_factory=dict)
    installations: dict[str, int] = field(default_factory=dict)


class FakeGitHub(FakeHttpServer):
    """The fake server. Thread-safe; `calls` lists every request in arrival order."""

    poll_interval_s = 0.02

    def __init__(
        self,
        *,
        prefix: str = "/api/v3",
        app_id: int = 4242,
        app_slug: str = "evalbot",
        token_ttl_s: float = 3600.0,
        default_permission: str = "read",
    ) -> None:
        super().__init__()
        self.prefix = prefix.rstrip("/")
        self.app_id = app_id
        self.app_slug = app_slug
        self.token_ttl_s = token_ttl_s
        self.default_permission = default_permission
        self.state = State()
        self.calls: list[Call] = []
        self.failures: list[Failure] = []
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.app_private_key = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        self._app_public_key = key.public_key()
        self._routes = _routes(self)

    # -- lifecycle ---------------------------------------------------------------------------------

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"fake": self})

    @property
    def base_url(self) -> str:
        """What PyGithub's base_url should be."""
        return self.root + self.prefix

    # -- seeding -----------------------------------------------------------------------------------

    def add_repo(self, full_name: str, *, clone_url: str | None = None) -> JSON:
        with self.lock:
            owner, name = full_name.split("/")
            repo = {
                "id": next(self._ids),
                "name": name,
                "full_name": full_name,
                "owner": {"login": owner, "id": next(self._ids), "type": "User"},
                "private": False,
                "default_branch": "main",
                "url": f"{self.base_url}/repos/{full_name}",
                "html_url": f"https://github.example/{full_name}",
                "clone_url": clone_url or f"https://github.example/{full_name}.git",
            }
            self.state.repos[full_name] = repo
            self.state.installations.setdefault(full_name, 1)
            return repo

    def add_pull(self, pull: JSON, *, clone_url: str | None = None) -> JSON:
        """Serve `pull` (a GitHub pull request object) at its base repository."""
        pull = copy.deepcopy(pull)
        full_name = pull["base"]["repo"]["full_name"]
        with self.lock:
            if full_name not in self.state.repos:
                self.add_repo(full_name, clone_url=clone_url)
            if clone_url:
                pull["base"]["repo"]["clone_url"] = clone_url
            self.state.pulls[(full_name, int(pull["number"]))] = pull
        return pull

    def pull(self, repo: str, number: int) -> JSON:
        with self.lock:
            return self.state.pulls[(repo, number)]

    def set_permission(self, repo: str, login: str, permission: str) -> None:
        with self.lock:
            self.state.permissions[(repo, login)] = permission

    def set_merge_base(self, repo: str, base: str, head: str, merge_base: str) -> None:
        with self.lock:
            self.state.merge_bases[(repo, base, head)] = merge_base

    def add_token(self, token: str, login: str) -> None:
        """A personal access token acting as `login`."""
        with self.lock:
            self.state.tokens[token] = (Identity(login, "User", next(self._ids)), float("inf"))

    def add_comment(
        self, repo: str, number: int, body: str, login: str, *, type: str = "User"
    ) -> JSON:
        with self.lock:
            return self._new_comment(repo, number, body, Identity(login, type, 7))

    def fail(self, method: str, path_regex: str, *, status: int = 502, times: int = 1) -> None:
        """Answer the next `times` matching requests with `status` (an outage)."""
        with self.lock:
            self.failures.append(Failure(method, re.compile(path_regex), status, times))

    def recover(self) -> None:
        """End every injected failure still pending (the outage is over)."""
        with self.lock:
            self.failures.clear()

    # -- inspection --------------------------------------------------------------------------------

    def calls_to(self, method: str, path_regex: str) -> list[Call]:
        pattern = re.compile(path_regex)
        with self.lock:
            return [c for c in self.calls if c.method == method and pattern.search(c.path)]

    def comments_on(self, repo: str, number: int) -> list[JSON]:
        with self.lock:
            return [
                copy.deepcopy(c)
                for c in self.state.comments.values()
                if c["_repo"] == repo and c["_number"] == number
            ]

    def check_runs_for(self, repo: str) -> list[JSON]:
        with self.lock:
            return [copy.deepcopy(r) for r in self.state.check_runs.values() if r["_repo"] == repo]

    def reactions_on(self, comment_id: int) -> list[str]:
        with self.lock:
            return [r["content"] for r in self.state.comments[comment_id]["_reactions"]]

    # -- request handling --------------------------------------------------------------------------

    def handle(
        self, method: str, raw_path: str, headers: Any, body: bytes
    ) -> tuple[int, Any, JSON]:
        split = urlsplit(raw_path)
        path = unquote(split.path)
        if path.startswith(self.prefix):
            path = path[len(self.prefix) :] or "/"
        query = parse_qs(split.query)
        data = json.loads(body) if body else None
        with self.lock:
            auth, identity = self._authenticate(headers.get("Authorization", ""))
            status, payload, extra = self._route(method, path, query, data, identity)
            self.calls.append(Call(method, path, query, data, auth, status))
        return status, payload, extra

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], data: Any, who: Any
    ) -> tuple[int, Any, JSON]:
        injected = self._injected_failure(method, path)
        if injected:
            return injected, {"message": "Injected failure"}, {}
        for verb, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if verb == method and match:
                try:
                    return handler(match.groupdict(), query, data, who)
                except ApiError as error:
                    return error.status, {"message": str(error)}, {}
        return 404, {"message": "Not Found"}, {}

    def _injected_failure(self, method: str, path: str) -> int | None:
        for failure in self.failures:
            if failure.times > 0 and failure.method == method and failure.pattern.search(path):
                failure.times -= 1
                return failure.status
        return None

    def _authenticate(self, header: str) -> tuple[str, Identity | str | None]:
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer" and credential.count(".") == 2:
            return "jwt", self._verify_jwt(credential)
        if scheme.lower() in ("token", "bearer") and credential in self.state.tokens:
            identity, expires = self.state.tokens[credential]
            if expires > time.time():
                return f"token:{identity.login}", identity
        return "none", None

    def _verify_jwt(self, token: str) -> str | None:
        try:
            claims = jwt.decode(token, self._app_public_key, algorithms=["RS256"])
        except jwt.PyJWTError:
            return None
        return "app" if str(claims.get("iss")) == str(self.app_id) else None

    # -- helpers used by the routes ----------------------------------------------------------------

    def repo(self, match: dict[str, str]) -> JSON:
        full_name = f"{match['owner']}/{match['name']}"
        repo = self.state.repos.get(full_name)
        if repo is None:
            raise ApiError(404, "Not Found")
        return repo

    def new_id(self) -> int:
        return next(self._ids)

    def _new_comment(self, repo: str, number: int, body: str, who: Identity) -> JSON:
        comment_id = next(self._ids)
        now = _now()
        comment = {
            "id": comment_id,
            "body": body,
            "user": who.json(),
            "url": f"{self.base_url}/repos/{repo}/issues/comments/{comment_id}",
            "html_url": f"https://github.example/{repo}/pull/{number}#issuecomment-{comment_id}",
            "issue_url": f"{self.base_url}/repos/{repo}/issues/{number}",
            "created_at": now,
            "updated_at": now,
            "author_association": "NONE",
            "_repo": repo,
            "_number": number,
            "_reactions": [],
        }
        self.state.comments[comment_id] = comment
        return comment


def public(item: JSON) -> JSON:
    """The object without the fake's bookkeeping keys (those starting with '_')."""
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Route = tuple[str, re.Pattern[str], Callable[..., tuple[int, Any, JSON]]]


def _routes(fake: FakeGitHub) -> list[Route]:
    from tests.fakes import github_routes as r  # the handlers, one per endpoint

    table = [
        ("GET", "/app", r.get_app),
        ("POST", r"/app/installations/(?P<installation>\d+)/access_tokens", r.create_token),
        ("GET", "/user", r.get_user),
        ("GET", f"{REPO}/installation", r.get_installation),
        ("GET", REPO, r.get_repo),
        ("GET", rf"{REPO}/pulls/(?P<number>\d+)", r.get_pull),
        ("GET", rf"{REPO}/issues/(?P<number>\d+)/comments", r.list_comments),
        ("POST", rf"{REPO}/issues/(?P<number>\d+)/comments", r.create_comment),
        ("GET", rf"{REPO}/issues/comments/(?P<id>\d+)", r.get_comment),
        ("PATCH", rf"{REPO}/issues/comments/(?P<id>\d+)", r.edit_comment),
        ("DELETE", rf"{REPO}/issues/comments/(?P<id>\d+)", r.delete_comment),
        ("POST", rf"{REPO}/issues/comments/(?P<id>\d+)/reactions", r.create_reaction),
        ("DELETE", rf"{REPO}/issues/(?P<number>\d+)/labels/(?P<label>.+)", r.remove_label),
        ("GET", rf"{REPO}/collaborators/(?P<user>[^/]+)/permission", r.get_permission),
        ("POST", rf"{REPO}/statuses/(?P<sha>[0-9a-f]+)", r.create_status),
        ("GET", rf"{REPO}/commits/(?P<sha>[0-9a-f]+)/statuses", r.list_statuses),
        ("GET", rf"{REPO}/commits/(?P<sha>[0-9a-f]+)/check-runs", r.list_check_runs),
        ("POST", rf"{REPO}/check-runs", r.create_check_run),
        ("GET", rf"{REPO}/check-runs/(?P<id>\d+)", r.get_check_run),
        ("PATCH", rf"{REPO}/check-runs/(?P<id>\d+)", r.edit_check_run),
        ("GET", rf"{REPO}/compare/(?P<base>[^.]+)\.\.\.(?P<head>.+)", r.compare),
    ]
    return [(verb, re.compile(pattern), _bound(fake, fn)) for verb, pattern, fn in table]


def _bound(fake: FakeGitHub, fn: Callable[..., tuple[int, Any, JSON]]) -> Callable[..., Any]:
    def call(match: dict[str, str], query: dict[str, list[str]], data: Any, who: Any) -> Any:
        return fn(fake, match, query, data, who)

    return call


def new_installation_token(fake: FakeGitHub, installation: int) -> tuple[str, float]:
    token = "ghs_" + secrets.token_hex(16)
    expires = time.time() + fake.token_ttl_s
    bot = Identity(f"{fake.app_slug}[bot]", "Bot", 900000 + installation)
    fake.state.tokens[token] = (bot, expires)
    return token, expires


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    fake: FakeGitHub

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, payload, extra = self.fake.handle(self.command, self.path, self.headers, body)
        data = b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return
