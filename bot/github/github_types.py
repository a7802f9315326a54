"""Plain records read from GitHub (webhook payloads and REST responses share one shape)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PayloadError(ValueError):
    """A payload lacks a field the bot needs; `str()` names the field."""


@dataclass(frozen=True)
class PullInfo:
    """What the bot needs to know about a pull request."""

    repo: str  # base repository, owner/name
    number: int
    state: str
    head_sha: str
    head_repo: str  # owner/name of the repository the head branch lives in
    base_sha: str
    base_ref: str
    clone_url: str  # of the base repository; GitHub serves fork heads there as refs/pull/N/head
    html_url: str
    labels: tuple[str, ...]

    @property
    def is_fork(self) -> bool:
        return self.head_repo != self.repo

    @classmethod
    def from_json(cls, pull: dict[str, Any]) -> PullInfo:
        """Build from a `pull_request` object (webhook payload or `GET /pulls/N`)."""
        head, base = _get(pull, "head"), _get(pull, "base")
        base_repo = _get(base, "repo")
        head_repo = head.get("repo") or {}  # null when the fork was deleted
        return cls(
            repo=str(_get(base_repo, "full_name")),
            number=int(_get(pull, "number")),
            state=str(pull.get("state", "open")),
            head_sha=str(_get(head, "sha")),
            head_repo=str(head_repo.get("full_name") or "(deleted fork)"),
            base_sha=str(_get(base, "sha")),
            base_ref=str(_get(base, "ref")),
            clone_url=str(_get(base_repo, "clone_url")),
            html_url=str(pull.get("html_url", "")),
            labels=tuple(str(label["name"]) for label in pull.get("labels") or []),
        )


def _get(data: dict[str, Any], key: str) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if value is None:
        raise PayloadError(f"the pull request payload has no '{key}'")
    return value


class ReporterRef(BaseModel):
    """Where an experiment reports: the opaque `reporter` dict the workflow hands back to
    `publish_report`. Ids only; SHAs, counts and scores are read from the store."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["github"] = "github"
    repo: str = Field(pattern=r"^[^/\s]+/[^/\s]+$")
    number: int = Field(gt=0)
    dataset: str
    installation_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
