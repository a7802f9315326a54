"""Signing in to the dashboard, the only routes open to anyone: the token form and GitHub OAuth.
Both end in a session cookie (auth.py)."""

from __future__ import annotations

import urllib.parse

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from bot.dashboard import auth
from bot.dashboard.deps import PREFIX, SettingsDep
from bot.dashboard.pages import page
from workflows.settings import Settings

router = APIRouter(prefix=PREFIX)


@router.get("/login", response_class=HTMLResponse)
async def login_form(settings: SettingsDep) -> HTMLResponse:
    return _login_page(settings)


@router.post("/login")
async def login(request: Request, settings: SettingsDep) -> Response:
    form = urllib.parse.parse_qs((await request.body()).decode("utf-8", errors="replace"))
    if not auth.token_matches(settings, (form.get("token") or [""])[0]):
        return _login_page(settings, 401, error="That token is not valid.")
    return _signed_in(settings, "token")


@router.get("/login/github")
async def github_login(request: Request, settings: SettingsDep) -> Response:
    if not auth.oauth_enabled(settings):
        raise HTTPException(404, "GitHub sign-in is not configured")
    url, state = auth.oauth_redirect(settings, str(request.url_for("github_callback")))
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(auth.STATE_COOKIE, state, httponly=True, samesite="lax", max_age=600)
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
    response = _signed_in(settings, user)
    response.delete_cookie(auth.STATE_COOKIE)
    return response


def _login_page(settings: Settings, status: int = 200, *, error: str = "") -> HTMLResponse:
    return page("login.html.j2", status, oauth=auth.oauth_enabled(settings), error=error)


def _signed_in(settings: Settings, user: str) -> RedirectResponse:
    """Back to the experiments list with a session cookie for `user`."""
    response = RedirectResponse(f"{PREFIX}/", status_code=303)
    response.set_cookie(
        auth.COOKIE,
        auth.session_cookie(settings, user),
        httponly=True,
        samesite="lax",
        max_age=auth.SESSION_S,
    )
    return response
