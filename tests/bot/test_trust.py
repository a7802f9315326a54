from __future__ import annotations

import pytest

from bot.trust import actor_verdict, fork_verdict


class PermissionSpy:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def __call__(self, login: str) -> str | None:
        self.asked.append(login)
        return self.answer


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR", "owner"])
def test_write_associations_need_no_api_call(association: str) -> None:
    spy = PermissionSpy(None)
    assert actor_verdict("alice", association, spy).allowed
    assert spy.asked == []


@pytest.mark.parametrize("permission", ["admin", "maintain", "write"])
def test_write_permission_allows_others(permission: str) -> None:
    spy = PermissionSpy(permission)
    assert actor_verdict("alice", "CONTRIBUTOR", spy).allowed
    assert spy.asked == ["alice"]


@pytest.mark.parametrize("permission", ["triage", "read", "none", None])
def test_without_write_access_the_actor_is_refused_politely(permission: str | None) -> None:
    verdict = actor_verdict("mallory", "NONE", PermissionSpy(permission))
    assert not verdict.allowed
    assert "@mallory" in verdict.reason and "write access" in verdict.reason


def test_same_repository_pulls_need_no_approval() -> None:
    assert fork_verdict(False, "a" * 40, None).allowed


def test_forks_need_an_approval_of_the_head_sha() -> None:
    refused = fork_verdict(True, "abcdef1234567890" + "0" * 24, None)
    assert not refused.allowed
    assert "abcdef123456" in refused.reason and "/eval approve" in refused.reason
    assert fork_verdict(True, "a" * 40, "maintainer").allowed
