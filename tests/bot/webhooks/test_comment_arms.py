"""`/eval … --arm` comments over real HTTP (GitHub's real issue_comment payload, signed; the app,
PyGithub and the fake GitHub for real; the launcher is the fake): arms that parse and pass the
trust rules start one experiment; anything else gets one polite reply naming the problem, and
nothing starts."""

from __future__ import annotations

import pytest

from bot.grammar import MAX_ARMS
from tests.bot.conftest import Sender
from tests.bot.payloads import BASE_SHA, HEAD_SHA, pull_json
from tests.bot.webhooks.test_comments import EXPERIMENT, bot_replies, comment
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

THREE_ARMS = "--arm main=BASE --arm pr=HEAD --arm pr-mini=HEAD,model=gpt-4.1-mini"


def test_three_arms_start_one_experiment_with_each_arms_config(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = comment(github, f"/eval tiny --set mode=fast {THREE_ARMS}")
    assert sender.deliver("issue_comment", payload).json()["action"] == "started"
    spec = launcher.experiments[EXPERIMENT].spec
    assert [(a.name, a.commit, a.config) for a in spec.arms] == [
        ("main", BASE_SHA, {"mode": "fast"}),
        ("pr", HEAD_SHA, {"mode": "fast"}),
        ("pr-mini", HEAD_SHA, {"mode": "fast", "model": "gpt-4.1-mini"}),
    ]
    assert spec.labels["head_sha"] == HEAD_SHA  # where the check run goes
    assert bot_replies(github) == []


TOO_MANY = " ".join(f"--arm a{i}=HEAD" for i in range(MAX_ARMS + 1))


@pytest.mark.parametrize(
    ("arms", "problem"),
    [
        ("--arm main=BASE --arm pr=HEAD,colour=red", "unknown config key 'colour'"),
        ("--arm main=BASE --set secret_name=X", "config key 'secret_name' is refused"),
        (
            "--arm main=BASE --arm pr=HEAD,OPENAI_BASE_URL=http://evil",
            "'OPENAI_BASE_URL' is refused",
        ),
        ("--arm main=BASE --arm pr", "arm 'pr' is not NAME=REF[,key=value...]"),
        ("--arm pr=HEAD --arm pr=BASE,model=x", "arm 'pr' is given twice"),
        (TOO_MANY, f"{MAX_ARMS + 1} arms are more than the limit of {MAX_ARMS}"),
        ("--arm main=BASE --arm pr=feature-x", "asks for 'feature-x'; name HEAD, BASE"),
    ],
)
def test_a_bad_arm_gets_one_reply_naming_it_and_nothing_starts(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, arms: str, problem: str
) -> None:
    payload = comment(github, f"/eval tiny {arms}")
    assert sender.deliver("issue_comment", payload).json()["action"] == "rejected"
    (reply,) = bot_replies(github)
    assert reply.startswith("@Codertocat I could not run that:") and problem in reply
    assert launcher.start_calls == []
    assert github.reactions_on(payload["comment"]["id"]) == ["confused"]


def test_a_forks_arms_may_not_leave_its_approved_head(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.add_pull(pull_json(fork=True))
    other = "d" * 40
    unapproved = sender.deliver("issue_comment", comment(github, f"/eval tiny {THREE_ARMS}"))
    assert unapproved.json()["action"] == "refused"  # no approval at all: the usual refusal
    sender.deliver("issue_comment", comment(github, f"/eval approve {HEAD_SHA[:7]}"))
    pinned = sender.deliver(
        "issue_comment", comment(github, f"/eval tiny --arm a=BASE --arm b={other}")
    )
    assert pinned.json()["action"] == "rejected"
    assert f"asks for '{other}', but this pull request comes from a fork" in bot_replies(github)[-1]
    assert launcher.start_calls == []
    approved = sender.deliver("issue_comment", comment(github, f"/eval tiny {THREE_ARMS}"))
    assert approved.json()["action"] == "started"
    assert [a.commit for a in launcher.experiments[EXPERIMENT].spec.arms] == [
        BASE_SHA,
        HEAD_SHA,
        HEAD_SHA,
    ]
