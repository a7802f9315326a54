"""`/eval` comments over real HTTP: the app, PyGithub and the fake GitHub all for real; the
launcher is the fake (hand-off only)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.bot.conftest import Sender
from tests.bot.payloads import (
    BASE_SHA,
    HEAD_SHA,
    NUMBER,
    REPO,
    SECRET,
    load,
    pr_comment,
    pull_json,
)
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

EXPERIMENT = f"gh/{REPO}/pr{NUMBER}/tiny/{HEAD_SHA[:12]}"


def comment(
    github: FakeGitHub, body: str, *, association: str = "OWNER", login: str = "Codertocat"
) -> dict[str, Any]:
    """The delivery for a comment that also exists on the fake GitHub (for reactions)."""
    payload = pr_comment(body, association=association, login=login)
    payload["comment"]["id"] = github.add_comment(REPO, NUMBER, body, login)["id"]
    return payload


def bot_replies(github: FakeGitHub) -> list[str]:
    return [c["body"] for c in github.comments_on(REPO, NUMBER) if c["user"]["type"] == "Bot"]


def test_eval_from_the_owner_starts_one_experiment(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, "/eval tiny --trials 3 --cases tag:extraction --set model=m1")
    response = sender.deliver("issue_comment", payload)
    assert response.status_code == 200
    assert response.json()["action"] == "started"
    assert launcher.started == [EXPERIMENT]
    spec = launcher.experiments[EXPERIMENT].spec
    assert {a.name: a.commit for a in spec.arms} == {"base": BASE_SHA, "head": HEAD_SHA}
    assert all(a.config == {"model": "m1"} for a in spec.arms)
    assert spec.trials == 3
    assert spec.case_ids == ("lease-rent", "lease-review", "supply-governing-law")
    assert spec.repo == pull_json()["base"]["repo"]["clone_url"]
    assert launcher.experiments[EXPERIMENT].reporter["number"] == NUMBER
    assert github.reactions_on(payload["comment"]["id"]) == ["rocket"]
    assert bot_replies(github) == []  # the sticky report is the workflow's job


def test_the_same_delivery_twice_starts_one_experiment(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, "/eval tiny")
    first = sender.deliver("issue_comment", payload, delivery="delivery-1")
    again = sender.deliver("issue_comment", payload, delivery="delivery-1")
    assert first.json()["action"] == "started"
    assert again.status_code == 200 and again.json()["action"] == "duplicate"
    assert launcher.start_calls == [EXPERIMENT]


def test_app_token_is_fetched_once_and_reused(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    for _ in range(3):
        sender.deliver("issue_comment", comment(github, "/eval tiny"))
    assert len(github.calls_to("POST", r"^/app/installations/1/access_tokens$")) == 1
    assert len(github.calls_to("GET", r"^/repos/Codertocat/Hello-World/installation$")) == 1
    assert all(c.auth == "jwt" for c in github.calls if c.path.startswith("/app"))
    assert {c.auth for c in github.calls_to("GET", r"/pulls/")} == {"token:evalbot[bot]"}


def test_non_collaborator_is_refused_and_nothing_starts(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, "/eval tiny", association="NONE", login="mallory")
    response = sender.deliver("issue_comment", payload)
    assert response.json()["action"] == "refused"
    assert launcher.start_calls == []
    (reply,) = bot_replies(github)
    assert "@mallory" in reply and "write access" in reply
    assert github.calls_to("GET", r"/collaborators/mallory/permission$")


def test_contributor_with_write_permission_may_start(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "alice", "write")
    payload = comment(github, "/eval tiny", association="CONTRIBUTOR", login="alice")
    assert sender.deliver("issue_comment", payload).json()["action"] == "started"
    assert launcher.started == [EXPERIMENT]


def test_unapproved_fork_is_refused_until_a_maintainer_approves_that_sha(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.add_pull(pull_json(fork=True))
    refused = sender.deliver("issue_comment", comment(github, "/eval tiny"))
    assert refused.json()["action"] == "refused"
    assert launcher.start_calls == []
    assert "/eval approve" in bot_replies(github)[-1]

    stale = sender.deliver("issue_comment", comment(github, "/eval approve 1234567"))
    assert stale.json()["action"] == "rejected"
    assert f"now `{HEAD_SHA[:12]}`, not `1234567`" in bot_replies(github)[-1]
    approval = sender.deliver("issue_comment", comment(github, f"/eval approve {HEAD_SHA[:7]}"))
    assert approval.json()["action"] == "approved"
    assert sender.deliver("issue_comment", comment(github, "/eval tiny")).json()["action"] == (
        "started"
    )

    github.add_pull(pull_json(fork=True, head_sha="1" * 40))  # a new push: approval lapses
    again = sender.deliver("issue_comment", comment(github, "/eval tiny"))
    assert again.json()["action"] == "refused"
    assert launcher.started == [EXPERIMENT]


def test_approval_by_someone_else_than_the_bot_does_not_count(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.add_pull(pull_json(fork=True))
    github.add_token("pat-of-forker", "forker")
    github.state.statuses[(REPO, HEAD_SHA)] = [
        {
            "state": "success",
            "context": "evalbot/approval",
            "description": "approved by @forker",
            "creator": {"login": "forker", "type": "User"},
        }
    ]
    response = sender.deliver("issue_comment", comment(github, "/eval tiny"))
    assert response.json()["action"] == "refused"


def test_unknown_dataset_gets_the_known_ones_and_the_usage(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, "/eval nope")
    response = sender.deliver("issue_comment", payload)
    assert response.json()["action"] == "rejected"
    (reply,) = bot_replies(github)
    assert "unknown dataset 'nope'" in reply and "tiny" in reply and "Usage:" in reply
    assert github.reactions_on(payload["comment"]["id"]) == ["confused"]
    assert launcher.start_calls == []


def test_out_of_bounds_values_are_explained(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    sender.deliver("issue_comment", comment(github, "/eval tiny --trials 50"))
    sender.deliver("issue_comment", comment(github, "/eval tiny --cases nosuchcase"))
    trials, cases = bot_replies(github)
    assert "from 1 to 5, got '50'" in trials
    assert "unknown case selector 'nosuchcase'" in cases
    assert launcher.start_calls == []


def test_case_cap_is_enforced(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, bot_settings: Any
) -> None:
    bot_settings.github.max_cases = 2  # the app reads the same Settings object
    sender.deliver("issue_comment", comment(github, "/eval tiny"))
    (reply,) = bot_replies(github)
    assert "selects 5 cases, more than the limit of 2" in reply
    assert launcher.start_calls == []


def test_merge_base_baseline(sender: Sender, github: FakeGitHub, launcher: FakeLauncher) -> None:
    github.set_merge_base(REPO, BASE_SHA, HEAD_SHA, "c" * 40)
    sender.deliver("issue_comment", comment(github, "/eval tiny --vs merge-base"))
    spec = launcher.experiments[EXPERIMENT].spec
    assert spec.arm("base").commit == "c" * 40


def test_a_new_head_cancels_the_older_experiment_of_that_dataset(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    sender.deliver("issue_comment", comment(github, "/eval tiny"))
    github.add_pull(pull_json(head_sha="2" * 40))
    response = sender.deliver("issue_comment", comment(github, "/eval tiny"))
    newer = f"gh/{REPO}/pr{NUMBER}/tiny/{'2' * 12}"
    assert response.json()["experiments"] == [newer]
    assert launcher.cancelled == [EXPERIMENT]


def test_cancel_status_and_rerun(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    idle = sender.deliver("issue_comment", comment(github, "/eval cancel"))
    assert (
        idle.json()["action"] == "ignored" and "no evaluation is running" in bot_replies(github)[-1]
    )
    sender.deliver("issue_comment", comment(github, "/eval tiny"))
    busy = sender.deliver("issue_comment", comment(github, "/eval rerun --failed"))
    assert busy.json()["action"] == "rejected" and "still running" in bot_replies(github)[-1]
    status = sender.deliver("issue_comment", comment(github, "/eval status"))
    assert status.json()["experiments"] == [EXPERIMENT]
    assert f"| `tiny` | `{HEAD_SHA[:12]}` | 0/20 | running |" in bot_replies(github)[-1]
    cancelled = sender.deliver("issue_comment", comment(github, "/eval cancel tiny"))
    assert cancelled.json() == {"action": "cancelled", "detail": "", "experiments": [EXPERIMENT]}
    rerun = sender.deliver("issue_comment", comment(github, "/eval rerun --failed tiny"))
    assert rerun.json()["action"] == "rerun"
    assert launcher.experiments[EXPERIMENT].reruns == 1
    launcher.experiments[EXPERIMENT].running = False
    launcher.cap_spent = "the daily cap of $1.00 for acme/agent is spent; try tomorrow"
    refused = sender.deliver("issue_comment", comment(github, "/eval rerun --failed tiny"))
    assert refused.json()["action"] == "refused"
    assert "daily cap of $1.00" in bot_replies(github)[-1]
    assert launcher.experiments[EXPERIMENT].reruns == 1


def test_help_replies_with_the_usage(sender: Sender, github: FakeGitHub) -> None:
    sender.deliver("issue_comment", comment(github, "/eval help"))
    (reply,) = bot_replies(github)
    assert "/eval <dataset> [--trials N]" in reply and "catalog" in reply


def test_plain_issues_edits_deletions_and_chatter_are_ignored(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    plain = load("issue_comment.created")  # GitHub's example: a comment on a plain issue
    plain["comment"]["body"] = "/eval tiny"
    assert sender.deliver("issue_comment", plain).json()["action"] == "ignored"
    for action in ("edited", "deleted"):
        payload = pr_comment("/eval tiny", action=action)
        assert sender.deliver("issue_comment", payload).json()["action"] == "ignored"
    chatter = pr_comment("LGTM, but /eval tiny later?")
    assert sender.deliver("issue_comment", chatter).json()["action"] == "ignored"
    bot = pr_comment("/eval tiny")
    bot["sender"]["type"] = "Bot"
    assert sender.deliver("issue_comment", bot).json()["action"] == "ignored"
    assert github.calls == [] and launcher.start_calls == []


def test_a_github_outage_fails_the_delivery_and_a_redelivery_retries_it(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, "/eval tiny")
    github.fail("GET", r"/pulls/2$", status=502)
    failed = sender.deliver("issue_comment", payload, delivery="outage-1")
    assert failed.status_code == 503 and launcher.start_calls == []
    retried = sender.deliver("issue_comment", payload, delivery="outage-1")
    assert retried.json()["action"] == "started"
    assert launcher.started == [EXPERIMENT]


def test_a_failed_reaction_does_not_fail_a_started_request(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = pr_comment("/eval tiny")  # its comment id is unknown to GitHub (deleted)
    response = sender.deliver("issue_comment", payload)
    assert response.status_code == 200 and response.json()["action"] == "started"
    assert github.calls_to("POST", r"/reactions$")[0].status == 404


def test_irrelevant_deliveries_are_not_recorded(
    sender: Sender, github: FakeGitHub, store: Any
) -> None:
    chatter = pr_comment("thanks!")
    for _ in range(2):
        response = sender.deliver("issue_comment", chatter, delivery="chatter-1")
        assert response.json() == {"action": "ignored", "detail": "not an /eval command"}
    assert store.record_delivery("chatter-1", "issue_comment")  # first time the store sees it


def test_failures_are_logged_without_secrets(
    sender: Sender, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    github.fail("GET", r"/pulls/2$", status=502)
    assert sender.deliver("issue_comment", comment(github, "/eval tiny")).status_code == 503
    formatter = logging.Formatter()
    logged = "\n".join(formatter.format(record) for record in caplog.records)
    assert "failed" in logged and "502" in logged  # the failure itself is logged
    secrets = [*github.state.tokens, SECRET, github.app_private_key.splitlines()[1]]
    assert all(secret not in logged for secret in secrets)
