"""The webhook endpoint under hostile requests, over real HTTP (uvicorn on loopback): schemathesis
against the app's OpenAPI, forged signatures, replayed deliveries, oversized and deeply nested
bodies, and hypothesis-mutated GitHub payloads that are correctly signed. Nothing answers 5xx,
and nothing that should not start an experiment starts one."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.webhooks.signature import sign, verify
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import SECRET, load, pr_comment
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

FAST = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
EVENTS = ["issue_comment", "pull_request", "ping", "installation", "push", "", "x" * 300]
FIXTURES = [
    "issue_comment.created", "issue_comment.edited", "pull_request.opened",
    "pull_request.labeled", "pull_request.synchronize", "pull_request.closed", "ping",
]  # fmt: skip
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@pytest.fixture
def http(app: AppServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=app.url, timeout=30) as client:
        yield client


def eval_comment() -> dict[str, Any]:
    """A comment that WOULD start an experiment if it were accepted."""
    return pr_comment("/eval tiny --trials 1")


def test_github_test_vector_verifies() -> None:
    """Positive control for the signature tests below (GitHub's documented vector)."""
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert verify(b"It's a Secret to Everybody", b"Hello, World!", expected)
    assert sign(b"It's a Secret to Everybody", b"Hello, World!") == expected


def test_schemathesis_finds_no_server_error(app: AppServer, launcher: FakeLauncher) -> None:
    api = app.server.config.app
    schema = schemathesis.openapi.from_dict(api.openapi())
    tried, errors = 0, []
    for result in schema.get_all_operations():
        operation = result.ok()

        @FAST
        @given(case=operation.as_strategy())
        def call(case: Any) -> None:
            nonlocal tried
            tried += 1
            response = case.call(base_url=app.url, timeout=30)
            if response.status_code >= 500:
                errors.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        call()
    record("hostile", "webhook app: schemathesis (all operations)", tried=tried,
           contained=tried - len(errors), detail=errors[:5])  # fmt: skip
    assert tried > 0 and errors == []
    assert launcher.start_calls == []


@FAST
@given(
    forged=st.one_of(
        st.none(),
        st.from_regex(r"\A[!-~]{0,80}\Z"),  # what an HTTP header can carry
        st.binary(min_size=32, max_size=32).map(lambda b: "sha256=" + b.hex()),
        st.binary(min_size=20, max_size=20).map(lambda b: "sha1=" + b.hex()),
        st.text(max_size=20).map(lambda key: sign(key.encode() or b"x", b"{}")),
    ),
    case=st.sampled_from(["as is", "upper", "no prefix", "other secret", "other body", "extra"]),
)
def test_forged_signatures_are_refused(
    http: httpx.Client, launcher: FakeLauncher, forged: str | None, case: str
) -> None:
    body = json.dumps(eval_comment()).encode()
    good = sign(SECRET.encode(), body)
    signature = {
        "as is": forged,
        "upper": good.upper(),
        "no prefix": good.removeprefix("sha256="),
        "other secret": sign(b"not the secret", body),
        "other body": sign(SECRET.encode(), body + b" "),
        "extra": f"{good}0",
    }[case]
    headers = {"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": f"forged-{case}"}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    response = http.post("/github/webhook", content=body, headers=headers)
    assert response.status_code == 401, (case, signature, response.text)
    assert launcher.start_calls == []


def test_replayed_deliveries_start_one_experiment(
    app: AppServer, sender: Sender, launcher: FakeLauncher, github: FakeGitHub
) -> None:
    payload = eval_comment()
    payload["comment"]["id"] = github.add_comment(
        "Codertocat/Hello-World", 2, "/eval tiny --trials 1", "Codertocat"
    )["id"]
    answers: list[httpx.Response] = []

    def deliver(delivery: str) -> None:
        with httpx.Client(base_url=app.url, timeout=30) as client:
            answers.append(Sender(client).deliver("issue_comment", payload, delivery=delivery))

    threads = [threading.Thread(target=deliver, args=("replayed",)) for _ in range(8)]
    threads += [threading.Thread(target=deliver, args=(f"new-id-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    statuses = sorted(r.status_code for r in answers)
    actions = sorted(r.json().get("action", "") for r in answers)
    record("hostile", "webhook: one delivery replayed 8x at once + 4 new ids", tried=12,
           contained=int(len(launcher.experiments) == 1) * 12, detail=actions)  # fmt: skip
    assert statuses == [200] * 12, [r.text for r in answers]
    assert actions.count("started") + actions.count("duplicate") == 12
    assert len(launcher.experiments) == 1  # one experiment, however often it was delivered


@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_bodies_are_refused(
    http: httpx.Client, launcher: FakeLauncher, chunked: bool
) -> None:
    payload = eval_comment()
    payload["padding"] = "x" * (300 * 1024)  # the app's limit in these tests is 256 KiB
    body = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": "big",
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    content: Any = (
        iter([body[i : i + 65536] for i in range(0, len(body), 65536)]) if chunked else body
    )
    response = http.post("/github/webhook", content=content, headers=headers)
    assert response.status_code == 413, response.text
    assert launcher.start_calls == []


@pytest.mark.parametrize("depth", [50, 1_000, 5_000, 100_000])
def test_deeply_nested_json_is_a_client_error(
    sender: Sender, launcher: FakeLauncher, depth: int
) -> None:
    nested = "[" * depth + "]" * depth
    bare = nested.encode()  # the whole body
    inside = json.dumps(eval_comment())[:-1].encode() + b', "deep": ' + nested.encode() + b"}"
    statuses = [sender.deliver("issue_comment", body).status_code for body in (bare, inside)]
    record("hostile", f"webhook: JSON nested {depth:,} deep", tried=2,
           contained=sum(s < 500 for s in statuses), detail=statuses)  # fmt: skip
    assert all(s < 500 for s in statuses), statuses
    assert statuses[0] == 400
    if depth > 1_000:
        assert statuses[1] == 400
    assert launcher.start_calls == [] or depth <= 1_000


def mutate(payload: Any, path: list[str | int], value: Any) -> Any:
    """`payload` with the value at `path` (as far as it exists) replaced by `value`."""
    target = copy.deepcopy(payload)
    node = target
    for key in path[:-1]:
        if not (isinstance(node, dict) and key in node):
            return target
        node = node[key]
    if isinstance(node, dict) and path:
        node[path[-1]] = value
    return target


KEYS = ["action", "comment", "body", "issue", "number", "pull_request", "user", "login",
        "author_association", "repository", "full_name", "head", "base", "sha", "labels",
        "installation", "id", "sender", "clone_url", "ref", "state"]  # fmt: skip


@FAST
@given(
    fixture=st.sampled_from(FIXTURES),
    event=st.sampled_from(EVENTS),
    path=st.lists(st.sampled_from(KEYS), min_size=1, max_size=3),
    value=json_values,
)
def test_signed_mutated_payloads_never_answer_5xx(
    sender: Sender, fixture: str, event: str, path: list[str], value: Any
) -> None:
    payload = mutate(load(fixture), list(path), value)
    response = sender.deliver(event or fixture.split(".")[0], payload)
    assert response.status_code < 500, (fixture, path, value, response.text)


def test_signature_of_the_raw_bytes_not_the_json(http: httpx.Client) -> None:
    """Same JSON, different bytes (whitespace): the signature must be over the bytes received."""
    body = json.dumps(eval_comment()).encode()
    digest = hmac.new(
        SECRET.encode(), json.dumps(eval_comment(), indent=1).encode(), hashlib.sha256
    )
    response = http.post(
        "/github/webhook",
        content=body,
        headers={
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": "bytes",
            "X-Hub-Signature-256": "sha256=" + digest.hexdigest(),
        },
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "text",
    [
        "/eval tiny --trials ²",
        "/eval tiny --trials " + "9" * 5000,
        "/eval " + "a" * 60_000,
        '/eval "' + "x" * 60_000,
        "/eval tiny --set " + "k=v " * 10_000,
        "/eval tiny\x00 --cases \u2028",
    ],
)
def test_hostile_eval_comments_get_an_answer_not_an_error(
    sender: Sender, launcher: FakeLauncher, github: FakeGitHub, text: str
) -> None:
    payload = pr_comment(text)
    payload["comment"]["id"] = github.add_comment("Codertocat/Hello-World", 2, text, "x")["id"]
    response = sender.deliver("issue_comment", payload)
    assert response.status_code == 200, response.text
    assert launcher.start_calls == []
