"""Dashboard sign-in: a static token (settings.dashboard.token) for local use — sent as
`Authorization: Bearer TOKEN` or exchanged on the login form for a session cookie — and GitHub
OAuth limited to members of settings.dashboard.github_org in production.

Session cookies are `LOGIN.EXPIRY.HMAC` signed with a key derived from the token or the OAuth
client secret, so they cannot be forged without it. Every other request is refused."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import urllib.parse

import httpx
from fastapi import Request

from workflows.settings import Settings

COOKIE = "evalbot_dashboard"
STATE_COOKIE = "evalbot_oauth_state"
SESSION_S = 12 * 3600


class Unauthenticated(Exception):
    """No valid token, cookie or OAuth session."""


def _key(settings: Settings) -> bytes:
    material = ""
    if settings.dashboard.token is not None:
        material += settings.dashboard.token.get_secret_value()
    if settings.dashboard.oauth_client_secret is not None:
        material += settings.dashboard.oauth_client_secret.get_secret_value()
    if not material:
        raise Unauthenticated("the dashboard is not configured (no token, no OAuth)")
    return hashlib.sha256(b"evalbot-dashboard-session:" + material.encode()).digest()


def session_cookie(settings: Settings, login: str, *, now: float | None = None) -> str:
    expiry = int((now or time.time()) + SESSION_S)
    body = f"{urllib.parse.quote(login, safe='')}.{expiry}"
    mac = hmac.new(_key(settings), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def check_cookie(settings: Settings, value: str, *, now: float | None = None) -> str:
    try:
        login, expiry, mac = value.rsplit(".", 2)
        body = f"{login}.{expiry}"
        expected = hmac.new(_key(settings), body.encode(), hashlib.sha256).hexdigest()
        if hmac.compare_digest(mac, expected) and int(expiry) > (now or time.time()):
            return urllib.parse.unquote(login)
    except ValueError:
        pass
    raise Unauthenticated("invalid or expired session")


def token_matches(settings: Settings, token: str) -> bool:
    if settings.dashboard.token is None or not token:
        return False
    return hmac.compare_digest(token.encode(), settings.dashboard.token.get_secret_value().encode())


def authenticate(settings: Settings, request: Request) -> str:
    """The signed-in user (a login, or 'token'); Unauthenticated otherwise."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer ") and token_matches(settings, header[7:].strip()):
        return "token"
    cookie = request.cookies.get(COOKIE)
    if cookie:
        return check_cookie(settings, cookie)
    raise Unauthenticated("sign in first")


def oauth_enabled(settings: Settings) -> bool:
    return bool(settings.dashboard.oauth_client_id and settings.dashboard.oauth_client_secret)


def oauth_redirect(settings: Settings, callback_url: str) -> tuple[str, str]:
    """The GitHub authorize URL and the state to keep in a cookie."""
    state = secrets.token_urlsafe(24)
    query = urllib.parse.urlencode(
        {
            "client_id": settings.dashboard.oauth_client_id,
            "redirect_uri": callback_url,
            "scope": "read:org",
            "state": state,
        }
    )
    return f"{settings.dashboard.oauth_url.rstrip('/')}/login/oauth/authorize?{query}", state


async def oauth_login(settings: Settings, code: str, callback_url: str) -> str:
    """Exchange the code, then require membership of settings.dashboard.github_org."""
    assert settings.dashboard.oauth_client_secret is not None
    async with httpx.AsyncClient(timeout=10) as client:
        token_response = await client.post(
            f"{settings.dashboard.oauth_url.rstrip('/')}/login/oauth/access_token",
            data={
                "client_id": settings.dashboard.oauth_client_id,
                "client_secret": settings.dashboard.oauth_client_secret.get_secret_value(),
                "code": code,
                "redirect_uri": callback_url,
            },
            headers={"Accept": "application/json"},
        )
        access = token_response.json().get("access_token") if token_response.is_success else None
        if not access:
            raise Unauthenticated("GitHub refused the sign-in code")
        api = settings.github.api_url.rstrip("/")
        headers = {"Authorization": f"Bearer {access}", "Accept": "application/vnd.github+json"}
        user = await client.get(f"{api}/user", headers=headers)
        login = str(user.json().get("login", "")) if user.is_success else ""
        if not login:
            raise Unauthenticated("GitHub did not say who signed in")
        org = settings.dashboard.github_org
        if not org:
            raise Unauthenticated("no organisation is configured (EVALBOT_DASHBOARD_GITHUB_ORG)")
        member = await client.get(f"{api}/user/memberships/orgs/{org}", headers=headers)
        if not (member.is_success and member.json().get("state") == "active"):
            raise Unauthenticated(f"{login} is not an active member of {org}")
    return login
