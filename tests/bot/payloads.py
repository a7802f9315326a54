"""Webhook payloads for tests: GitHub's real examples, changing only the fields a case needs."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from tests.conftest import SHARED_WEBHOOKS

SECRET = "It's a Secret to Everybody"
REPO = "Codertocat/Hello-World"
NUMBER = 2
HEAD_SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BASE_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"


@functools.cache
def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SHARED_WEBHOOKS / f"{name}.json").read_text())
    return data


def load(name: str) -> dict[str, Any]:
    """A fresh copy of `<name>.json` from the shared fixtures."""
    return copy.deepcopy(_load(name))


def pull_json(**changes: Any) -> dict[str, Any]:
    """The fixture pull request (Codertocat/Hello-World#2), with `head_sha`, `labels`, `fork`."""
    pull = load("pull_request.opened")["pull_request"]
    if "head_sha" in changes:
        pull["head"]["sha"] = changes["head_sha"]
    if "labels" in changes:
        pull["labels"] = [{"name": name} for name in changes["labels"]]
    if changes.get("fork"):
        pull["head"]["repo"]["full_name"] = "Forker/Hello-World"
        pull["head"]["repo"]["fork"] = True
    if "state" in changes:
        pull["state"] = changes["state"]
    return pull


def pr_comment(
    body: str, *, association: str = "OWNER", login: str = "Codertocat", action: str = "created"
) -> dict[str, Any]:
    """An issue_comment on PR #2 (the fixture is on a plain issue: add `issue.pull_request`)."""
    payload = load(f"issue_comment.{action}")
    payload["issue"]["number"] = NUMBER
    payload["issue"]["pull_request"] = {
        "url": f"https://api.github.com/repos/{REPO}/pulls/{NUMBER}",
        "html_url": f"https://github.com/{REPO}/pull/{NUMBER}",
    }
    payload["comment"]["body"] = body
    payload["comment"]["author_association"] = association
    payload["comment"]["user"]["login"] = login
    payload["sender"]["login"] = login
    return payload


def pull_event(action: str, *, sender: str = "Codertocat", **changes: Any) -> dict[str, Any]:
    """A pull_request.<action> delivery; `label=` sets the added label for `labeled`."""
    fixture = action if action in ("opened", "closed", "labeled", "synchronize") else "opened"
    payload = load(f"pull_request.{fixture}")
    payload["action"] = action
    label = changes.pop("label", None)
    payload["pull_request"] = pull_json(**changes)
    if label is not None:
        payload["label"] = {"name": label}
    payload["sender"]["login"] = sender
    return payload
