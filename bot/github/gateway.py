"""The REST calls the bot makes on one repository, through PyGithub, returning plain values.

Reads the bot makes on every delivery go through PyGithub's requester directly (same auth, retries
and errors) and return the JSON: building PyGithub's object graph for a pull request costs more
than the request. Everything here is blocking I/O: call it from a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote

from github import Github, GithubException

from bot.github.github_types import PullInfo
from bot.trust import APPROVAL_CONTEXT

CheckStatus = Literal["queued", "in_progress", "completed"]
SUMMARY_LIMIT = 65_000  # GitHub rejects check-run summaries over 65,535 characters
COMMENT_LIMIT = 65_000  # and comment bodies over 65,536


@dataclass(frozen=True)
class CheckRunUpdate:
    """What a check run should show."""

    status: CheckStatus
    title: str
    summary: str
    conclusion: str | None = None  # success | neutral | cancelled | failure, with "completed"
    details_url: str | None = None


class RepoGateway:
    """One repository's pulls, comments, reactions, statuses and check runs."""

    def __init__(self, gh: Github, repo: str) -> None:
        self._gh = gh
        self._repo = gh.get_repo(repo)
        self.name = repo

    def pull(self, number: int) -> PullInfo:
        return PullInfo.from_json(self._request("GET", f"{self._repo.url}/pulls/{number}"))

    def permission(self, login: str) -> str | None:
        """The user's permission (admin/maintain/write/triage/read/none); None if unknown."""
        url = f"{self._repo.url}/collaborators/{quote(login, safe='')}/permission"
        try:
            return str(self._request("GET", url)["permission"])
        except GithubException as error:
            if error.status == 404:  # not a user GitHub knows
                return None
            raise

    def merge_base(self, base: str, head: str) -> str:
        return str(self._repo.compare(base, head).merge_base_commit.sha)

    def react(self, comment_id: int, content: str) -> None:
        """Add a reaction to an issue comment (GitHub keeps one per user and content)."""
        self._request("POST", f"{self._comments_url}/{comment_id}/reactions", {"content": content})

    def comment(self, number: int, body: str) -> int:
        return int(self._repo.get_issue(number).create_comment(_clip(body, COMMENT_LIMIT)).id)

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._request(
            "PATCH", f"{self._comments_url}/{comment_id}", {"body": _clip(body, COMMENT_LIMIT)}
        )

    def find_comments(self, number: int, marker: str, author: str) -> list[tuple[int, str]]:
        """Comments by `author` containing `marker`, oldest first: (id, body)."""
        found = [
            (int(item.id), item.body or "")
            for item in self._repo.get_issue(number).get_comments()
            if marker in (item.body or "") and item.user.login == author
        ]
        return sorted(found)

    def delete_comment(self, comment_id: int) -> None:
        try:
            self._request("DELETE", f"{self._comments_url}/{comment_id}")
        except GithubException as error:
            if error.status != 404:  # already gone
                raise

    def remove_label(self, number: int, label: str) -> None:
        try:
            self._repo.get_issue(number).remove_from_labels(label)
        except GithubException as error:
            if error.status != 404:  # 404 "Label does not exist": already gone
                raise

    def approved_by(self, sha: str, author: str) -> str | None:
        """Who approved `sha` for evaluation (the approval status `author` set), else None."""
        for status in self._statuses(sha):
            creator = (status.get("creator") or {}).get("login")
            if status.get("context") == APPROVAL_CONTEXT and creator == author:
                if status.get("state") != "success":
                    return None
                return str(status.get("description", "")).removeprefix("approved by @")
        return None

    def approve(self, sha: str, approver: str) -> None:
        self._request(
            "POST",
            f"{self._repo.url}/statuses/{sha}",
            {
                "state": "success",
                "context": APPROVAL_CONTEXT,
                "description": f"approved by @{approver}",
            },
        )

    def find_check_run(self, sha: str, name: str, external_id: str) -> int | None:
        for run in self._repo.get_commit(sha).get_check_runs(check_name=name):
            if run.external_id == external_id:
                return int(run.id)
        return None

    def create_check_run(self, sha: str, name: str, external_id: str, show: CheckRunUpdate) -> int:
        run = self._repo.create_check_run(
            name=name, head_sha=sha, external_id=external_id, **_check_fields(show)
        )
        return int(run.id)

    def update_check_run(self, run_id: int, show: CheckRunUpdate) -> None:
        self._repo.get_check_run(run_id).edit(**_check_fields(show))

    @property
    def _comments_url(self) -> str:
        return f"{self._repo.url}/issues/comments"

    def _statuses(self, sha: str) -> list[dict[str, Any]]:
        data = self._request("GET", f"{self._repo.url}/commits/{sha}/statuses")
        return list(data) if isinstance(data, list) else []

    def _request(self, verb: str, url: str, body: dict[str, Any] | None = None) -> Any:
        _headers, data = self._gh.requester.requestJsonAndCheck(verb, url, input=body)
        return data


def _check_fields(show: CheckRunUpdate) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "status": show.status,
        "output": {"title": show.title[:255], "summary": _clip(show.summary, SUMMARY_LIMIT)},
    }
    if show.details_url:
        fields["details_url"] = show.details_url
    if show.status == "completed":
        fields["conclusion"] = show.conclusion or "neutral"
        fields["completed_at"] = datetime.now(UTC)
    return fields


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 40] + "\n\n… (truncated to fit GitHub's limit)"


def is_retryable(error: GithubException) -> bool:
    """Server errors and rate limits are worth retrying; other 4xx answers are not."""
    return error.status >= 500 or (error.status in (403, 429) and _rate_limited(error))


def _rate_limited(error: GithubException) -> bool:
    headers = error.headers or {}
    message = str((error.data or {}).get("message", "")) if isinstance(error.data, dict) else ""
    return headers.get("x-ratelimit-remaining") == "0" or "rate limit" in message.lower()
