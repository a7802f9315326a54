"""`issue_comment`: `/eval` commands on pull requests. Plain issues, edits and deletions are
ignored (only `created` is registered)."""

from __future__ import annotations

from bot.grammar import eval_line
from bot.service import EvalService, Outcome
from bot.webhooks.payloads import comment_origin, is_bot, mapping
from bot.webhooks.routing import Event, Router

router = Router()


def _body(event: Event) -> str:
    return str(mapping(event.payload, "comment").get("body") or "")


def not_a_command(event: Event) -> str | None:
    if not mapping(event.payload, "issue").get("pull_request"):
        return "comment on an issue, not a pull request"
    if is_bot(event.payload):
        return "comment by a bot"
    if eval_line(_body(event)) is None:
        return "not an /eval command"
    return None


@router.register("issue_comment", action="created", skip=not_a_command)
async def on_comment_created(event: Event, service: EvalService) -> Outcome:
    return await service.on_comment(comment_origin(event.payload), _body(event))
