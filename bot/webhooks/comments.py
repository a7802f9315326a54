"""`issue_comment`: `/eval` commands on pull requests. Plain issues, edits and deletions are
ignored (only `created` is registered)."""

from __future__ import annotations

from bot.service import EvalService, Outcome
from bot.webhooks.payloads import comment_origin, field, is_bot
from bot.webhooks.routing import Event, Router

router = Router()


@router.register("issue_comment", action="created")
async def on_comment_created(event: Event, service: EvalService) -> Outcome:
    issue = field(event.payload, "issue")
    if not issue.get("pull_request"):
        return Outcome("ignored", "comment on an issue, not a pull request")
    if is_bot(event.payload):
        return Outcome("ignored", "comment by a bot")
    body = event.payload.get("comment", {}).get("body") or ""
    return await service.on_comment(comment_origin(event.payload), str(body))
