"""`pull_request`: `eval:<dataset>` and `ok-to-eval` labels, new pushes, opening and closing."""

from __future__ import annotations

from bot.service import EVAL_LABEL_PREFIX, EvalService, Outcome
from bot.trust import APPROVAL_LABEL
from bot.webhooks.payloads import field, pull_info, sender_origin
from bot.webhooks.routing import Event, Router

router = Router()


def not_our_label(event: Event) -> str | None:
    label = str(field(event.payload, "label", "name"))
    if label == APPROVAL_LABEL or label.startswith(EVAL_LABEL_PREFIX):
        return None
    return f"label '{label}' is not for evalbot"


@router.register("pull_request", action="labeled", skip=not_our_label)
async def on_labeled(event: Event, service: EvalService) -> Outcome:
    pull = pull_info(event.payload)
    label = str(field(event.payload, "label", "name"))
    return await service.on_labeled(sender_origin(event.payload, pull.number), pull, label)


@router.register("pull_request", action="synchronize")
async def on_synchronize(event: Event, service: EvalService) -> Outcome:
    pull = pull_info(event.payload)
    return await service.on_push(sender_origin(event.payload, pull.number), pull)


@router.register("pull_request", action="opened")
@router.register("pull_request", action="reopened")
async def on_opened(event: Event, service: EvalService) -> Outcome:
    pull = pull_info(event.payload)
    return await service.on_opened(sender_origin(event.payload, pull.number), pull)


@router.register("pull_request", action="closed")
async def on_closed(event: Event, service: EvalService) -> Outcome:
    pull = pull_info(event.payload)
    return await service.on_closed(sender_origin(event.payload, pull.number), pull)
