"""The webhook endpoint over real HTTP: signature, limits, parsing, ping, unknown events."""

from __future__ import annotations

import json

import httpx

from bot.webhooks.signature import sign
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import SECRET, load, pr_comment
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher


def test_ping_with_the_fixture_payload_is_answered(sender: Sender) -> None:
    payload = load("ping")
    response = sender.deliver("ping", payload)
    assert response.status_code == 200
    assert response.json() == {"action": "pong", "zen": payload["zen"]}


def test_wrong_or_missing_signature_is_401(sender: Sender, launcher: FakeLauncher) -> None:
    body = json.dumps(pr_comment("/eval tiny")).encode()
    wrong = sign(b"not the secret", body)
    assert sender.deliver("issue_comment", body, signature=wrong).status_code == 401
    tampered = sign(SECRET.encode(), body)
    assert sender.deliver("issue_comment", body + b" ", signature=tampered).status_code == 401
    response = sender.client.post(
        "/github/webhook", content=body, headers={"X-GitHub-Event": "issue_comment"}
    )
    assert response.status_code == 401
    assert launcher.start_calls == []


def test_bodies_over_the_limit_are_413(sender: Sender, app: AppServer) -> None:
    body = b'{"zen": "' + b"x" * (256 * 1024) + b'"}'
    assert sender.deliver("ping", body).status_code == 413

    def chunks() -> object:  # no Content-Length: the limit applies while streaming
        for _ in range(300):
            yield b"x" * 1024

    response = httpx.post(
        app.url + "/github/webhook",
        content=chunks(),  # type: ignore[arg-type]
        headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=00"},
    )
    assert response.status_code == 413


def test_malformed_json_is_400(sender: Sender) -> None:
    assert sender.deliver("issue_comment", b"{not json").status_code == 400
    assert sender.deliver("issue_comment", b"[1, 2]").status_code == 400
    assert sender.deliver("issue_comment", b"\xff\xfe").status_code == 400


def test_unknown_events_are_204_and_touch_nothing(sender: Sender, github: FakeGitHub) -> None:
    response = sender.deliver("star", {"action": "created", "sender": {"login": "x"}})
    assert response.status_code == 204
    response = sender.deliver("installation", load("installation.created"))
    assert response.status_code == 204
    assert github.calls == []


def test_known_event_without_delivery_id_is_400(sender: Sender) -> None:
    body = json.dumps(pr_comment("/eval tiny")).encode()
    response = sender.deliver("issue_comment", body, headers={"X-GitHub-Delivery": ""})
    assert response.status_code == 400


def test_healthz(sender: Sender) -> None:
    response = sender.client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_github_refusing_for_good_is_422_and_outages_stay_503(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    """A 404 for the installation will not change on redelivery (422); a GitHub 502 might (503,
    and the delivery id is released so the redelivery is handled)."""
    payload = pr_comment("/eval tiny --trials 1")
    github.fail("POST", r"/app/installations/\d+/access_tokens", status=404)  # uninstalled
    gone = sender.deliver("issue_comment", payload)
    assert gone.status_code == 422 and "redelivering will not help" in gone.text, gone.text
    github.fail("POST", r"/app/installations/\d+/access_tokens", status=502, times=10)
    down = sender.deliver("issue_comment", payload, delivery="outage")
    assert down.status_code == 503, down.text
    github.failures.clear()
    again = sender.deliver("issue_comment", payload, delivery="outage")
    assert again.status_code == 200 and launcher.start_calls, again.text


def test_payload_fields_of_the_wrong_type_are_400_naming_the_field(sender: Sender) -> None:
    cases = {
        ("issue", "number"): "2",
        ("comment", "id"): -1,
        ("repository", "full_name"): "no-slash",
        ("comment",): "a string",
        ("comment", "user", "login"): "Codertocat/Hello-World",
    }
    for (*parents, key), value in cases.items():
        payload = pr_comment("/eval tiny --trials 1")
        node = payload
        for name in parents:
            node = node[name]
        node[key] = value
        response = sender.deliver("issue_comment", payload)
        assert response.status_code == 400, (key, response.text)
        assert ".".join([*parents, key]) in response.json()["error"], response.text


def test_a_lone_surrogate_is_400_and_a_real_emoji_is_not(sender: Sender) -> None:
    """`"\\ud800"` is valid JSON but no text: echoing it back crashed the response (a 500)."""
    lone = json.dumps(pr_comment("/eval tiny")).replace('"created"', '"\\ud800"').encode()
    assert sender.deliver("issue_comment", lone).status_code == 400
    pair = json.dumps(pr_comment("/eval tiny")).replace('"created"', '"\\ud83d\\ude00"').encode()
    answer = sender.deliver("issue_comment", pair)
    assert answer.status_code == 200 and "\U0001f600" in answer.json()["detail"], answer.text
