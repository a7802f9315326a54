"""`pull_request` deliveries over real HTTP: labels, pushes, closing."""

from __future__ import annotations

from tests.bot.conftest import Sender
from tests.bot.payloads import HEAD_SHA, NUMBER, REPO, pull_event, pull_json
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher

NEW_SHA = "3" * 40


def exp(sha: str, dataset: str = "tiny") -> str:
    return f"gh/{REPO}/pr{NUMBER}/{dataset}/{sha[:12]}"


def bot_replies(github: FakeGitHub) -> list[str]:
    return [c["body"] for c in github.comments_on(REPO, NUMBER) if c["user"]["type"] == "Bot"]


def test_eval_label_from_a_writer_starts_the_dataset(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "admin")
    payload = pull_event("labeled", label="eval:tiny", labels=["eval:tiny"])
    response = sender.deliver("pull_request", payload)
    assert response.json() == {"action": "started", "detail": "", "experiments": [exp(HEAD_SHA)]}
    assert launcher.experiments[exp(HEAD_SHA)].spec.trials == 2  # the dataset's default


def test_eval_label_from_someone_without_write_access_is_refused(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "triager", "triage")
    payload = pull_event("labeled", sender="triager", label="eval:tiny", labels=["eval:tiny"])
    assert sender.deliver("pull_request", payload).json()["action"] == "refused"
    assert launcher.start_calls == []
    assert "@triager" in bot_replies(github)[0]


def test_other_labels_are_ignored_without_calling_github(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    payload = pull_event("labeled", label="bug", labels=["bug"])
    assert sender.deliver("pull_request", payload).json()["action"] == "ignored"
    assert github.calls == []


def test_unknown_dataset_label_is_answered(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "write")
    payload = pull_event("labeled", label="eval:nope", labels=["eval:nope"])
    assert sender.deliver("pull_request", payload).json()["action"] == "rejected"
    assert "unknown dataset 'nope'" in bot_replies(github)[0]


def test_a_push_while_labelled_starts_afresh_and_cancels_the_old_experiment(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "write")
    sender.deliver("pull_request", pull_event("labeled", label="eval:tiny", labels=["eval:tiny"]))
    push = pull_event("synchronize", head_sha=NEW_SHA, labels=["eval:tiny"])
    response = sender.deliver("pull_request", push)
    assert response.json()["action"] == "started"
    assert launcher.started == [exp(NEW_SHA), exp(HEAD_SHA)]
    assert launcher.cancelled == [exp(HEAD_SHA)]
    assert launcher.experiments[exp(NEW_SHA)].spec.arm("head").commit == NEW_SHA


def test_a_push_without_labels_only_cancels_stale_experiments(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "write")
    sender.deliver("pull_request", pull_event("labeled", label="eval:tiny", labels=["eval:tiny"]))
    response = sender.deliver("pull_request", pull_event("synchronize", head_sha=NEW_SHA))
    assert response.json() == {
        "action": "cancelled",
        "detail": "",
        "experiments": [exp(HEAD_SHA)],
    }
    assert launcher.started == [exp(HEAD_SHA)]


def test_a_fork_push_lapses_the_approval_and_waits_for_a_new_one(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    labels = ["eval:tiny", "ok-to-eval"]
    github.add_pull(pull_json(fork=True, head_sha=NEW_SHA, labels=labels))
    push = pull_event("synchronize", fork=True, head_sha=NEW_SHA, labels=labels)
    response = sender.deliver("pull_request", push)
    assert response.json()["action"] == "refused"
    assert launcher.start_calls == []
    assert github.calls_to("DELETE", r"/issues/2/labels/ok-to-eval$")
    assert [label["name"] for label in github.pull(REPO, NUMBER)["labels"]] == ["eval:tiny"]
    assert f"approves commit `{NEW_SHA[:12]}`" in bot_replies(github)[0]


def test_ok_to_eval_label_approves_the_fork_head_and_starts_labelled_datasets(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "maintain")
    labels = ["eval:tiny", "ok-to-eval"]
    github.add_pull(pull_json(fork=True, labels=labels))
    payload = pull_event("labeled", fork=True, label="ok-to-eval", labels=labels)
    response = sender.deliver("pull_request", payload)
    assert response.json()["action"] == "approved"
    assert launcher.started == [exp(HEAD_SHA)]
    (status,) = github.state.statuses[(REPO, HEAD_SHA)]
    assert status["context"] == "evalbot/approval" and status["state"] == "success"


def test_closing_cancels_running_experiments(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    github.set_permission(REPO, "Codertocat", "write")
    sender.deliver("pull_request", pull_event("labeled", label="eval:tiny", labels=["eval:tiny"]))
    closed = sender.deliver("pull_request", pull_event("closed", labels=["eval:tiny"]))
    assert closed.json()["action"] == "cancelled"
    assert launcher.cancelled == [exp(HEAD_SHA)]


def test_opened_with_an_eval_label_starts_it(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher
) -> None:
    response = sender.deliver("pull_request", pull_event("reopened", labels=["eval:tiny"]))
    assert response.json()["action"] == "started"
    assert launcher.started == [exp(HEAD_SHA)]
