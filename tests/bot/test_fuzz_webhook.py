"""The webhook endpoint under hostile requests, over real HTTP (uvicorn on loopback): schemathesis
against the app's OpenAPI with the webhook's body described and every body signed, mutated real
GitHub payloads of every handled event (signed, so they reach the handlers), a smaller unsigned
set that must stop at the door, forged signatures, replayed deliveries, oversized and deeply
nested bodies. Each fuzz test counts the cases that reached a handler (a spy on `Router.run`) and
those rejected at the door. Nothing answers 5xx, GitHub only gets reads and polite replies, and
nothing starts that the unmutated payloads would not start (tests/bot/webhook_fuzz.py)."""

from __future__ import annotations

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

from bot.webhooks import payloads
from bot.webhooks import signature as signature_module
from bot.webhooks.signature import sign, verify
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import SECRET, pr_comment
from tests.bot.webhook_fuzz import (
    DELETE,
    HOSTILE_VALUES,
    PATH,
    Door,
    Probe,
    Tally,
    encode,
    mutate,
    paths,
    seeds,
    targets,
    webhook_operation_schema,
)
from tests.chaos.record import record
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

MUTATED_EXAMPLES, SCHEMA_EXAMPLES, UNSIGNED_EXAMPLES = 150, 60, 30
HANDLED = [name for name in seeds() if name not in ("ping", "issue_comment.edited")]
FAST = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck)
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


@pytest.fixture
def probe(
    app: AppServer, github: FakeGitHub, launcher: FakeLauncher, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Probe]:
    """A prober whose allowed starts are those of the unmutated payloads (sent first, as a
    positive control: each reaches its handler, and the `/eval` comment starts an experiment)."""
    with Door().installed(monkeypatch) as door, httpx.Client(base_url=app.url, timeout=30) as http:
        probe = Probe(http, door, github, launcher)
        for name, (event, payload) in probe.cases.items():
            if event == "issue_comment":
                payload["comment"]["id"] = github.add_comment(
                    "Codertocat/Hello-World", 2, payload["comment"]["body"], "Codertocat"
                )["id"]
            probe.send(event, encode(payload), label=name)
        assert probe.tally.problems == [] and probe.tally.reached == len(HANDLED)
        probe.allowed_starts = set(launcher.start_calls)
        assert probe.allowed_starts, "the unmutated /eval comment started nothing"
        probe.tally = Tally()
        yield probe


def fuzz_mutated(probe: Probe, examples: int, *, derandomize: bool = False) -> Tally:
    """Real payloads of every handled event, one field deleted or swapped for a hostile value,
    signed: the handlers, the `/eval` parser and the planner see them."""
    cases = probe.cases

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(cases)))
        event, payload = cases[name]
        read, every = targets(payload), paths(payload)
        path = data.draw(
            st.sampled_from(read) if data.draw(st.integers(0, 4)) else st.sampled_from(every)
        )
        value = data.draw(HOSTILE_VALUES)
        probe.send(event, encode(mutate(payload, path, value)), label=f"{name} {path}")

    one()
    return probe.tally


def fuzz_schema(probe: Probe, app: AppServer, examples: int) -> tuple[Tally, list[str]]:
    """schemathesis against the app's OpenAPI, with the webhook's body and event header described
    (the app does not publish them); every webhook case is signed. Other operations (the
    dashboard, /metrics) are called as generated and must not answer 5xx."""
    spec = app.server.config.app.openapi()
    spec["paths"][PATH]["post"].update(webhook_operation_schema())
    others: list[str] = []
    for result in schemathesis.openapi.from_dict(spec).get_all_operations():
        operation = result.ok()

        @settings(max_examples=examples, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def call(case: Any) -> None:
            if case.path == PATH:
                event = case.headers.get("X-GitHub-Event", "")
                probe.send(event, encode(case.body), label="schemathesis")
                return
            response = case.call(base_url=app.url, timeout=30)
            others.append(f"{case.method} {case.formatted_path}: {response.status_code}")

        call()
    return probe.tally, others


def fuzz_unsigned(probe: Probe, examples: int) -> Tally:
    """Unsigned and wrongly signed deliveries of the same payloads: all stop at the door."""
    cases = probe.cases

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(name=st.sampled_from(sorted(cases)), value=HOSTILE_VALUES)
    def one(name: str, value: Any) -> None:
        event, payload = cases[name]
        body = encode(mutate(payload, ("action",), value) if value is not DELETE else payload)
        response = probe.send(event, body, signed=False, label=f"unsigned {name}")
        if response.status_code != 401:
            probe.tally.problems.append(f"unsigned {name}: {response.status_code}, not 401")

    one()
    if probe.tally.reached:
        probe.tally.problems.append(f"{probe.tally.reached} unsigned deliveries reached a handler")
    return probe.tally


def test_mutated_real_payloads_reach_the_handlers_and_are_contained(probe: Probe) -> None:
    tally = fuzz_mutated(probe, MUTATED_EXAMPLES)
    record("hostile", "webhook: mutated real payloads, signed", **tally.figures())
    assert tally.problems == [], tally.problems[:5]
    assert tally.reached >= tally.tried // 3, tally  # most mutations still reach a handler


def test_schemathesis_signed_reaches_the_handlers(probe: Probe, app: AppServer) -> None:
    tally, others = fuzz_schema(probe, app, SCHEMA_EXAMPLES)
    errors = [line for line in others if line.endswith(tuple(f": 5{d}" for d in "0123456789"))]
    record("hostile", "webhook app: schemathesis, webhook cases signed", **tally.figures())
    record("hostile", "web app: schemathesis, the other operations (dashboard, /metrics)",
           tried=len(others), contained=len(others) - len(errors), detail=errors[:3])  # fmt: skip
    assert tally.problems == [] and errors == [], (tally.problems[:5], errors[:5])
    assert tally.reached > 0, tally


def test_unsigned_deliveries_stop_at_the_door(probe: Probe) -> None:
    tally = fuzz_unsigned(probe, UNSIGNED_EXAMPLES)
    record("hostile", "webhook: unsigned deliveries", **tally.figures())
    assert tally.problems == [] and tally.rejected == tally.tried > 0, tally


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


# -- mutation checks: each fuzz check fails against a deliberately broken build ---------------


def test_mutation_a_payload_reader_that_crashes_is_caught(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken build: `payloads.whole_number` is plain `int()` (as before the fuzz reached the
    handlers), so a mutated id or number crashes a handler: the fuzz reports a 5xx."""
    monkeypatch.setattr(payloads, "whole_number", lambda value, name: int(value))
    tally = fuzz_mutated(probe, 60, derandomize=True)
    caught = any(": 50" in problem for problem in tally.problems)
    record("mutation", "webhook fuzz: no 5xx", caught=caught, detail=tally.problems[:1],
           fault="monkeypatch: payloads.whole_number is plain int()")  # fmt: skip
    assert caught, tally


def test_mutation_requests_github_should_not_get_are_caught(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken build: `payloads.whole_number` takes any integer, so a negative issue number or
    comment id reaches GitHub (`POST …/issues/-1/comments`, `…/comments/-1/reactions`): the
    GitHub check reports requests beyond a polite reply (and no 5xx hides it)."""
    monkeypatch.setattr(payloads, "whole_number", lambda value, name: value)
    event, payload = probe.cases["issue_comment.created"]
    for path in (("issue", "number"), ("comment", "id")):
        probe.send(event, encode(mutate(payload, path, -1)), label=str(path))
    rude = [p for p in probe.tally.problems if "GitHub requests beyond a reply" in p]
    record("mutation", "webhook fuzz: GitHub gets only reads and polite replies",
           caught=bool(rude), detail=rude[:1],
           fault="monkeypatch: payloads.whole_number takes any integer")  # fmt: skip
    assert rude, probe.tally


def test_mutation_a_door_without_a_lock_is_caught(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broken build: the signature check passes everything; the unsigned set reaches handlers."""
    monkeypatch.setattr(signature_module, "verify", lambda *args: True)
    tally = fuzz_unsigned(probe, 10)
    caught = tally.reached > 0 and bool(tally.problems)
    fault = "monkeypatch: signature.verify passes everything"
    record("mutation", "webhook door: unsigned deliveries stop at 401", caught=caught,
           detail=tally.problems[:1], fault=fault)  # fmt: skip
    assert caught, tally
