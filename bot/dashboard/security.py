"""Browser-facing hardening for the whole app (docs/dashboard.md, "Security"): security headers on
every response, CSRF protection on every state-changing dashboard request, and cookie flags.

Headers: a Content-Security-Policy that allows no inline script or style (the stylesheet is
/dashboard/static/dashboard.css) and no framing, `X-Content-Type-Options: nosniff`, a
`Referrer-Policy`, and `X-Frame-Options: DENY` for older browsers.

CSRF (double submit, per browser session): the first dashboard response a browser gets sets the
`evalbot_csrf` cookie (random, HttpOnly, SameSite=Strict); signing in replaces it. Pages put the
same value in their forms (`csrf_token`). A POST, PUT, PATCH or DELETE under /dashboard must carry
it as the form field `csrf_token` or the header `X-CSRF-Token`, and when the browser sends an
`Origin` it must be this site's; otherwise 403. API clients that authenticate with
`Authorization: Bearer TOKEN` are exempt: browsers never attach that header by themselves, so
another site cannot forge it. The webhook (`/github/webhook`) is outside /dashboard: it is
authenticated by its HMAC signature, not by a cookie.
"""

from __future__ import annotations

import hmac
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse

from bot.dashboard import auth
from workflows.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_COOKIE = "evalbot_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
}
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
MAX_FORM_BYTES = 64 * 1024  # dashboard forms are a token or two


def secure_cookies(settings: Settings, request: Request) -> bool:
    """Secure unless development on localhost asked otherwise (insecure_localhost_cookies)."""
    local = (request.url.hostname or "") in LOCAL_HOSTS
    return not (settings.dashboard.insecure_localhost_cookies and local)


def csrf_token(request: Request) -> str:
    """The browser's CSRF token for forms: its cookie, or the one this response will set."""
    issued: str | None = getattr(request.state, "csrf_token", None)
    return issued or request.cookies.get(CSRF_COOKIE, "")


def set_csrf_cookie(response: Response, settings: Settings, request: Request, token: str) -> None:
    response.set_cookie(
        CSRF_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=secure_cookies(settings, request),
        path="/dashboard",
    )


class SecurityMiddleware:
    """Pure ASGI middleware (streamed responses stay streamed): headers on every response; under
    /dashboard the CSRF cookie is issued and unsafe requests are checked (module doc)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        dashboard = scope["path"].startswith("/dashboard")
        request = Request(scope)
        issue = ""
        if dashboard and not request.cookies.get(CSRF_COOKIE):
            issue = secrets.token_urlsafe(32)
            scope.setdefault("state", {})["csrf_token"] = issue
        if dashboard and scope["method"] in UNSAFE_METHODS and not self._api_client(request):
            body = await _read_body(receive)
            refusal = self._refusal(request, body)
            if refusal is not None:
                await refusal(scope, receive, _headed(send, self.settings, request, issue))
                return
            receive = _replay(body)
        await self.app(scope, receive, _headed(send, self.settings, request, issue))

    def _api_client(self, request: Request) -> bool:
        """Authenticated by a valid Bearer token: not a browser's ambient credential."""
        header = request.headers.get("authorization", "")
        return header.lower().startswith("bearer ") and auth.token_matches(
            self.settings, header[7:].strip()
        )

    def _refusal(self, request: Request, body: bytes | None) -> Response | None:
        if body is None:
            return PlainTextResponse("request body too large", status_code=413)
        origin = request.headers.get("origin")
        if origin is not None and not _same_origin(origin, request, self.settings):
            return _forbidden(f"cross-site request from {origin} refused")
        expected = request.cookies.get(CSRF_COOKIE, "")
        sent = request.headers.get(CSRF_HEADER) or _form_field(request, body, CSRF_FIELD)
        if not expected or not sent or not hmac.compare_digest(sent, expected):
            return _forbidden(
                "missing or wrong CSRF token; reload the page and submit the form again"
            )
        return None


def _forbidden(message: str) -> Response:
    return PlainTextResponse(message, status_code=403)


def _same_origin(origin: str, request: Request, settings: Settings) -> bool:
    """`origin` is this site: the Host the request came to, or the public URL (behind a proxy
    that rewrites Host)."""
    sent = urllib.parse.urlsplit(origin)
    if sent.netloc.lower() == request.headers.get("host", "").lower():
        return True
    public = urllib.parse.urlsplit(settings.dashboard.public_url or "")
    return bool(public.netloc) and (sent.scheme, sent.netloc.lower()) == (
        public.scheme,
        public.netloc.lower(),
    )


def _form_field(request: Request, body: bytes, name: str) -> str:
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return ""
    form = urllib.parse.parse_qs(body.decode("utf-8", errors="replace"))
    return (form.get(name) or [""])[0]


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it exceeds MAX_FORM_BYTES."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes | None) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body or b"", "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def _headed(send: Send, settings: Settings, request: Request, issue: str) -> Send:
    """`send` adding the security headers, and the CSRF cookie when one is issued."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in HEADERS.items():
                headers[name] = value
            prefix = f"{CSRF_COOKIE}="
            if issue and not any(v.startswith(prefix) for v in headers.getlist("set-cookie")):
                cookie = Response()
                set_csrf_cookie(cookie, settings, request, issue)
                headers.append("set-cookie", Headers(raw=cookie.raw_headers)["set-cookie"])
        await send(message)

    return wrapped
