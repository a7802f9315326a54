"""`POST /github/webhook`: size limit (413), signature (401), JSON (400), `ping`, unknown events
(204), routing, de-duplication of the deliveries a handler acts on, then the handlers: a malformed
payload is a 400, a GitHub refusal that will not change (a 404 for the installation) a 422, any
other failure a 503 to redeliver. It answers as soon as the work is handed off."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from github import GithubException

from bot.github.gateway import is_retryable
from bot.github.github_types import PayloadError
from bot.service import EvalService, Outcome
from bot.webhooks import signature
from bot.webhooks.deliveries import DeliveryGate
from bot.webhooks.routing import Event, Handler, Router

log = logging.getLogger(__name__)
PATH = "/github/webhook"


class BodyTooLarge(Exception):
    pass


def webhook_api(
    secret: bytes, max_body: int, router: Router, service: EvalService, gate: DeliveryGate
) -> APIRouter:
    api = APIRouter()

    @api.post(PATH)
    async def receive(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body)
        except BodyTooLarge:
            return _error(413, f"the body is larger than {max_body} bytes")
        if not signature.verify(secret, body, request.headers.get("x-hub-signature-256")):
            return _error(401, "missing or wrong X-Hub-Signature-256")
        return await _handle(request, body, router, service, gate)

    return api


async def _handle(
    request: Request, body: bytes, router: Router, service: EvalService, gate: DeliveryGate
) -> Response:
    name = request.headers.get("x-github-event", "")
    delivery = request.headers.get("x-github-delivery", "")
    payload = _parse(body)
    if payload is None:
        return _error(400, "the body is not a JSON object (of valid UTF-8 text)")
    if name == "ping":
        return JSONResponse({"action": "pong", "zen": payload.get("zen", "")})
    if not name or not router.knows(name):
        return Response(status_code=204)
    if not delivery:
        return _error(400, "missing X-GitHub-Delivery")
    event = Event(name, delivery, payload)
    try:
        handlers, skipped = router.select(event)
    except PayloadError as error:
        return _error(400, str(error))
    if not handlers:
        return JSONResponse({"action": "ignored", "detail": "; ".join(skipped)})
    if not await gate.claim(delivery, name):
        return JSONResponse({"action": "duplicate", "delivery": delivery})
    return await _dispatch(event, handlers, service, gate)


async def _dispatch(
    event: Event, handlers: list[Handler], service: EvalService, gate: DeliveryGate
) -> Response:
    try:
        outcomes = await Router.run(handlers, event, service)
    except PayloadError as error:
        await gate.finish(event.delivery_id)  # a redelivery carries the same bad payload
        return _error(400, str(error))
    except GithubException as error:
        if is_retryable(error):
            return await _failed(event, gate, error)
        await gate.finish(event.delivery_id)  # a redelivery would get the same answer
        log.warning("delivery %s (%s): GitHub answered %s", event.delivery_id, event.name,
                    error.status)  # fmt: skip
        return _error(422, f"GitHub answered {error.status} for this delivery's repository or "
                      "installation; redelivering will not help")  # fmt: skip
    except Exception as error:
        return await _failed(event, gate, error)
    await gate.finish(event.delivery_id)
    return JSONResponse(_summary(event, outcomes))


async def _failed(event: Event, gate: DeliveryGate, error: Exception) -> Response:
    """A failure worth redelivering: the delivery id is released so a redelivery is handled."""
    await gate.release(event.delivery_id)
    log.error("delivery %s (%s) failed", event.delivery_id, event.name, exc_info=error)
    return _error(503, f"handling failed ({type(error).__name__}); redeliver to retry")


def _summary(event: Event, outcomes: list[Outcome]) -> dict[str, Any]:
    if len(outcomes) == 1:
        return asdict(outcomes[0])
    return {"action": "multiple", "outcomes": [asdict(o) for o in outcomes]}


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _parse(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
        if SURROGATE_ESCAPE.search(body):  # a lone one is valid JSON but not text: refuse it
            json.dumps(payload, ensure_ascii=False).encode()
    except (UnicodeError, json.JSONDecodeError, RecursionError):  # nested ~1,000 deep
        return None
    return payload if isinstance(payload, dict) else None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
