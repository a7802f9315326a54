from __future__ import annotations

from bot.service import EvalService, Outcome
from bot.webhooks.routes import build_router
from bot.webhooks.routing import Event, Router
from tests.bot.payloads import load, pr_comment, pull_event


def event(name: str, payload: dict[str, object]) -> Event:
    return Event(name, "d-1", payload)


async def test_routers_combine_and_run_in_registration_order() -> None:
    calls: list[str] = []
    first, second = Router(), Router()

    @first.register("pull_request", action="closed")
    async def one(event: Event, service: EvalService) -> Outcome:
        calls.append("one")
        return Outcome("a")

    @second.register("pull_request")
    async def every_action(event: Event, service: EvalService) -> Outcome:
        calls.append("every")
        return Outcome("b")

    combined = Router(first, second)
    handlers, skipped = combined.select(event("pull_request", {"action": "closed"}))
    outcomes = await Router.run(handlers, event("pull_request", {}), None)  # type: ignore[arg-type]
    assert calls == ["every", "one"] and [o.action for o in outcomes] == ["b", "a"]
    assert skipped == []
    assert combined.knows("pull_request") and not combined.knows("push")


def test_the_bots_routes_skip_what_is_not_for_them() -> None:
    router = build_router()
    plain = load("issue_comment.created")
    assert router.select(event("issue_comment", plain)) == (
        [],
        ["comment on an issue, not a pull request"],
    )
    chatter = router.select(event("issue_comment", pr_comment("nice work")))
    assert chatter == ([], ["not an /eval command"])
    assert router.select(event("issue_comment", pr_comment("/eval bar")))[0]
    other_label = router.select(event("pull_request", pull_event("labeled", label="bug")))
    assert other_label == ([], ["label 'bug' is not for evalbot"])
    assert router.select(event("pull_request", pull_event("labeled", label="eval:bar")))[0]
    edited = router.select(event("issue_comment", pr_comment("/eval bar", action="edited")))
    assert edited == ([], ["evalbot does not act on issue_comment.edited"])
