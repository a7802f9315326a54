"""Who may trigger an evaluation, and when a fork's code may run.

Two independent gates:

1. The actor (commenter, labeler) needs write access to the base repository: an author association
   of OWNER, MEMBER or COLLABORATOR, or else a collaborator permission of write, maintain or admin
   (asked from GitHub only when the association does not already settle it).
2. A pull request from a fork runs only once a maintainer has approved that exact head SHA
   (`/eval approve` or the `ok-to-eval` label). The approval is a commit status on the SHA, so it
   lapses by itself when the fork pushes a new commit.

Datasets, worlds and rubrics never come from the PR: they are read from the service's catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
APPROVAL_LABEL = "ok-to-eval"
APPROVAL_CONTEXT = "evalbot/approval"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


ALLOWED = Verdict(True)


def actor_verdict(
    login: str, association: str | None, permission: Callable[[str], str | None]
) -> Verdict:
    """Allow actors with write access; `permission(login)` is consulted only when needed."""
    if (association or "").upper() in TRUSTED_ASSOCIATIONS:
        return ALLOWED
    if (permission(login) or "").lower() in WRITE_PERMISSIONS:
        return ALLOWED
    return Verdict(False, refusal_not_collaborator(login))


def fork_verdict(is_fork: bool, head_sha: str, approved_by: str | None) -> Verdict:
    """A fork's head SHA must carry a maintainer's approval; same-repository PRs need none."""
    if not is_fork or approved_by:
        return ALLOWED
    return Verdict(False, refusal_unapproved_fork(head_sha))


def refusal_not_collaborator(login: str) -> str:
    return (
        f"Sorry @{login}, evaluations can only be started by people with write access to this "
        "repository, because they run code and spend the team's budget. A maintainer can start "
        "one for you."
    )


def refusal_unapproved_fork(head_sha: str) -> str:
    return (
        f"This pull request comes from a fork, so its code runs only after a maintainer reviews "
        f"commit `{head_sha[:12]}` and approves it with `/eval approve` or the `{APPROVAL_LABEL}` "
        "label. Approval covers exactly one commit; a new push needs a new approval."
    )
