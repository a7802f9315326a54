"""Hostile deliveries that reach the handlers, and the tally of where each one stopped.

`Door` spies on `Router.run` (the one call that hands a delivery to its handlers) so each case
counts as *reached a handler*, *passed the signature but no handler acts on it* (unknown events,
`ping`, ignored actions, payload errors found while routing) or *rejected at the door* (401, 413,
unparseable JSON). Each case is also checked: no 5xx, no GitHub request other than reads and
polite replies (comments, reactions, installation tokens), and no experiment started that the
unmutated payloads would not start. `Tally.problems` lists every breach; tests assert it is empty,
and the mutation checks assert that a broken build makes it non-empty.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import strategies as st

from bot.webhooks.routing import Router
from bot.webhooks.signature import sign
from tests.bot.payloads import SECRET, load, pr_comment, pull_event
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

PATH = "/github/webhook"
POLITE = [  # what a handler may send GitHub for any input: reads, replies, reactions, a token
    ("GET", re.compile(r".*", re.DOTALL)),
    ("POST", re.compile(r"/app/installations/\d+/access_tokens")),
    ("POST", re.compile(r"/repos/[^/]+/[^/]+/issues/\d+/comments")),
    ("POST", re.compile(r"/repos/[^/]+/[^/]+/issues/comments/\d+/reactions")),
]


def seeds() -> dict[str, tuple[str, dict[str, Any]]]:
    """One real payload per event and action the bot acts on, each one a handler runs for."""
    return {
        "issue_comment.created": ("issue_comment", pr_comment("/eval tiny --trials 1")),
        "pull_request.labeled": ("pull_request", pull_event("labeled", label="eval:tiny")),
        "pull_request.opened": ("pull_request", pull_event("opened")),
        "pull_request.reopened": ("pull_request", pull_event("reopened")),
        "pull_request.synchronize": ("pull_request", pull_event("synchronize")),
        "pull_request.closed": ("pull_request", pull_event("closed")),
        "ping": ("ping", load("ping")),
        "issue_comment.edited": ("issue_comment", pr_comment("/eval tiny", action="edited")),
    }


def paths(payload: Any, prefix: tuple[Any, ...] = (), depth: int = 4) -> list[tuple[Any, ...]]:
    """Every key path of `payload` down to `depth` (list items by index)."""
    found: list[tuple[Any, ...]] = []
    children = (
        payload.items()
        if isinstance(payload, dict)
        else enumerate(payload)
        if isinstance(payload, list)
        else []
    )
    for key, value in children:
        found.append((*prefix, key))
        if len(prefix) + 1 < depth:
            found += paths(value, (*prefix, key), depth)
    return found


HANDLER_PATHS = [  # what the handlers and the service read (bot/webhooks/*.py, bot/service.py)
    ("action",), ("repository",), ("repository", "full_name"), ("installation",),
    ("installation", "id"), ("sender",), ("sender", "login"), ("sender", "type"),
    ("comment",), ("comment", "body"), ("comment", "id"), ("comment", "user"),
    ("comment", "user", "login"), ("comment", "author_association"), ("issue",),
    ("issue", "number"), ("issue", "pull_request"), ("label",), ("label", "name"),
    ("pull_request",), ("pull_request", "number"), ("pull_request", "state"),
    ("pull_request", "head"), ("pull_request", "head", "sha"), ("pull_request", "head", "repo"),
    ("pull_request", "head", "repo", "full_name"), ("pull_request", "base"),
    ("pull_request", "base", "sha"), ("pull_request", "base", "ref"),
    ("pull_request", "base", "repo"), ("pull_request", "base", "repo", "full_name"),
    ("pull_request", "base", "repo", "clone_url"), ("pull_request", "labels"),
]  # fmt: skip


def targets(payload: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The paths of HANDLER_PATHS this payload has."""
    every = set(paths(payload))
    return [path for path in HANDLER_PATHS if path in every]


DELETE = object()
HOSTILE_VALUES = st.one_of(
    st.just(DELETE),
    st.none(),
    st.sampled_from([0, -1, 2**63, 1e308, True, [], {}, "", [None], {"": None}]),
    st.sampled_from(["x" * 200_000, "/eval " + "y" * 100_000, "/eval tiny --trials " + "9" * 5000]),
    st.sampled_from(
        [
            "\u202e/eval tiny",
            "/eval\u00a0tiny",
            "/eval tiny\u0000",
            "eval:\U0001f4a5",
            "eval:../../etc",
            "ok-to-eval\u200b",
            "Codertocat/Hello-World\n",
            "\ud800",
        ]
    ),
    st.text(max_size=30),
    st.integers(),
)


def mutate(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`payload` with the value at `path` deleted (DELETE) or replaced by `value`."""
    target = copy.deepcopy(payload)
    node = target
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return target


def encode(payload: Any) -> bytes:
    """JSON bytes; a lone surrogate (invalid UTF-8) is sent escaped, as GitHub would."""
    return json.dumps(payload).encode()


@dataclass
class Door:
    """Counts the deliveries handed to handlers (a spy on `Router.run`)."""

    handled: int = 0

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Door]:
        real = Router.run

        async def spy(handlers: Any, event: Any, service: Any) -> Any:
            self.handled += 1
            return await real(handlers, event, service)

        monkeypatch.setattr(Router, "run", staticmethod(spy))
        yield self


@dataclass
class Tally:
    """Where each case stopped, and what went wrong."""

    reached: int = 0
    no_handler: int = 0
    rejected: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return self.reached + self.no_handler + self.rejected

    def figures(self) -> dict[str, Any]:
        return {
            "tried": self.tried,
            "contained": self.tried - len(self.problems),
            "reached_handler": self.reached,
            "no_handler": self.no_handler,
            "rejected_at_door": self.rejected,
            "detail": self.problems[:3],
        }


@dataclass
class Probe:
    """Sends one case and checks it: the app's URL, the spy, the fakes it talks to."""

    http: httpx.Client
    door: Door
    github: FakeGitHub
    launcher: FakeLauncher
    allowed_starts: set[str] | None = None  # None: any (the unmutated payloads, sent first)
    tally: Tally = field(default_factory=Tally)
    cases: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=seeds)

    def send(
        self, event: str, body: bytes, *, signed: bool = True, label: str = ""
    ) -> httpx.Response:
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
        }
        if signed:
            headers["X-Hub-Signature-256"] = sign(SECRET.encode(), body)
        calls, starts = len(self.github.calls), len(self.launcher.start_calls)
        handled = self.door.handled
        response = self.http.post(PATH, content=body, headers=headers)
        self._count(response, reached=self.door.handled > handled)
        self._check(label or event, response, calls, starts)
        return response

    def _count(self, response: httpx.Response, *, reached: bool) -> None:
        at_door = response.status_code in (401, 413) or (
            response.status_code == 400 and "not a JSON object" in response.text
        )
        if reached:
            self.tally.reached += 1
        elif at_door:
            self.tally.rejected += 1
        else:
            self.tally.no_handler += 1

    def _check(self, label: str, response: httpx.Response, calls: int, starts: int) -> None:
        if response.status_code >= 500:
            self.tally.problems.append(f"{label}: {response.status_code} {response.text[:120]}")
        with self.github.lock:
            new = list(self.github.calls[calls:])
        rude = [f"{c.method} {c.path}" for c in new if not _polite(c.method, c.path)]
        if rude:
            self.tally.problems.append(f"{label}: GitHub requests beyond a reply: {rude[:3]}")
        started = set(self.launcher.start_calls[starts:]) - (self.allowed_starts or set())
        if started and self.allowed_starts is not None:
            self.tally.problems.append(f"{label}: started {sorted(started)} for mutated input")


def _polite(method: str, path: str) -> bool:
    return any(method == verb and pattern.fullmatch(path) for verb, pattern in POLITE)


# -- the webhook's request body for schemathesis -----------------------------------------------


def obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


STRING = {"type": "string"}
LOGIN = obj(["login"], login=STRING, type={"enum": ["User", "Organization"]})
REPO = obj(
    ["full_name"],
    full_name={"anyOf": [{"const": "Codertocat/Hello-World"}, STRING]},
    clone_url=STRING,
)
BODY = {
    "anyOf": [
        {"type": "string", "pattern": r"^/eval( [a-z:\-]{0,12}){0,4}$"},
        STRING,
        {"type": "null"},
    ]
}
BRANCH = obj(["sha", "ref", "repo"], sha=STRING, ref=STRING, repo=REPO)
WEBHOOK_BODY = obj(
    ["action", "repository", "issue", "comment", "pull_request", "sender"],
    action={"enum": ["created", "labeled", "opened", "reopened", "synchronize", "closed"]},
    repository=REPO,
    issue=obj(
        ["number", "pull_request"],
        number={"type": "integer"},
        pull_request={"type": "object", "minProperties": 1},
    ),
    comment=obj(
        ["id", "body", "user"],
        id={"type": "integer"},
        body=BODY,
        user=LOGIN,
        author_association={"enum": ["OWNER", "MEMBER", "NONE"]},
    ),
    label=obj(["name"], name={"anyOf": [{"enum": ["eval:tiny", "ok-to-eval"]}, STRING]}),
    pull_request=obj(
        ["number", "head", "base"],
        number={"type": "integer"},
        head=BRANCH,
        base=BRANCH,
        state=STRING,
        labels={"type": "array"},
    ),
    sender=LOGIN,
    installation=obj(["id"], id={"type": "integer"}),
)


def webhook_operation_schema() -> dict[str, Any]:
    """The OpenAPI operation the app does not publish: the event header and a JSON body with the
    fields the handlers read, so schemathesis generates deliveries the router can route."""
    return {
        "parameters": [
            {
                "name": "X-GitHub-Event",
                "in": "header",
                "required": True,
                "schema": {"enum": ["issue_comment", "pull_request"]},
            },
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": WEBHOOK_BODY}},
        },
        "responses": {"200": {"description": "handled"}},
    }
