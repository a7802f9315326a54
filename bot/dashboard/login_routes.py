"""Signing in to the dashboard, the only routes open to anyone: the token form, GitHub OAuth and
the stylesheet the login page uses (a file: the Content-Security-Policy allows no inline style).
Both end in a session cookie (auth.py) and a fresh CSRF token (security.py). Cookies are HttpOnly
and Secure (bar development on localhost, `security.secure_cookies`)."""

from __future__ import annotations

import secrets
import urllib.parse
from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.dashboard import auth, security
from bot.dashboard.deps import PREFIX, SettingsDep
from bot.dashboard.pages import page
from workflows.settings import Settings

router = APIRouter(prefix=PREFIX)
STATIC = Path(__file__).parent / "static"


@router.get("/static/dashboard.css")
async def stylesheet() -> Response:
    css = (STATIC / "dashboard.css").read_bytes()
    return Response(css, media_type="text/css; charset=utf-8")


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, settings: SettingsDep) -> HTMLResponse:
    return _login_page(settings, request)


@router.post("/login")
async def login(request: Request, settings: SettingsDep) -> Response:
    form = urllib.parse.parse_qs((await request.body()).decode("utf-8", errors="replace"))
    if not auth.token_matches(settings, (form.get("token") or [""])[0]):
        return _login_page(settings, request, 401, error="That token is not valid.")
    return _signed_in(settings, request, "token")


@router.get("/login/github")
async def github_login(request: Request, settings: SettingsDep) -> Response:
    if not auth.oauth_enabled(settings):
        raise HTTPException(404, "GitHub sign-in is not configured")
    url, state = auth.oauth_redirect(settings, str(request.url_for("github_callback")))
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(
        auth.STATE_COOKIE,
        state,
        httponly=True,
        samesite="lax",  # sent on GitHub's redirect back, a top-level navigation
        secure=security.secure_cookies(settings, request),
        max_age=600,
    )
    return response


@router.get("/oauth/callback", name="github_callback")
async def github_callback(
    request: Request, settings: SettingsDep, code: str = "", state: str = ""
) -> Response:
    expected = request.cookies.get(auth.STATE_COOKIE, "")
    if not auth.oauth_enabled(settings) or not state or state != expected:
        raise HTTPException(401, "sign-in state does not match")
    try:
        user = await auth.oauth_login(settings, code, str(request.url_for("github_callback")))
    except auth.Unauthenticated as error:
        raise HTTPException(403, str(error)) from None
    response = _signed_in(settings, request, user)
    response.delete_cookie(auth.STATE_COOKIE)
    return response


def _login_page(
    settings: Settings, request: Request, status: int = 200, *, error: str = ""
) -> HTMLResponse:
    return page(
        "login.html.j2",
        status,
        oauth=auth.oauth_enabled(settings),
        error=error,
        csrf_token=security.csrf_token(request),
    )


def _signed_in(settings: Settings, request: Request, user: str) -> RedirectResponse:
    """Back to the experiments list with a session cookie for `user` and a new CSRF token (the
    token is per session: one picked before signing in is not kept)."""
    response = RedirectResponse(f"{PREFIX}/", status_code=303)
    response.set_cookie(
        auth.COOKIE,
        auth.session_cookie(settings, user),
        httponly=True,
        samesite="lax",  # links from PR comments to the dashboard keep the session
        secure=security.secure_cookies(settings, request),
        max_age=auth.SESSION_S,
    )
    security.set_csrf_cookie(response, settings, request, secrets.token_urlsafe(32))
    return response
