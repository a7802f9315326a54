"""GitHub sign-in for the dashboard against a local fake of GitHub's OAuth and REST endpoints:
the redirect carries the client id, callback and a state kept in a cookie; the callback signs in
active members of the configured organisation only."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import SecretStr

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer
from tests.fakes.launcher import FakeLauncher
from workflows.settings import Settings
from workflows.store import Store

MEMBERS = {"code-alice": ("alice", "active"), "code-mallory": ("mallory", None),
           "code-pending": ("pat", "pending")}  # fmt: skip


def fake_github() -> FastAPI:
    app = FastAPI()

    @app.post("/login/oauth/access_token")
    async def token(request: Request) -> JSONResponse:
        form = urllib.parse.parse_qs((await request.body()).decode())
        code = form.get("code", [""])[0]
        if form.get("client_secret") != ["oauth-secret"] or code not in MEMBERS:
            return JSONResponse({"error": "bad_verification_code"})
        return JSONResponse({"access_token": f"token-{code}"})

    def who(request: Request) -> tuple[str, str | None]:
        code = request.headers.get("authorization", "").removeprefix("Bearer token-")
        return MEMBERS[code]

    @app.get("/user")
    async def user(request: Request) -> JSONResponse:
        return JSONResponse({"login": who(request)[0]})

    @app.get("/user/memberships/orgs/{org}")
    async def membership(request: Request, org: str) -> JSONResponse:
        state = who(request)[1]
        if org != "acme" or state is None:
            return JSONResponse({"message": "Not Found"}, status_code=404)
        return JSONResponse({"state": state})

    return app


@pytest.fixture
def dashboard_url(bot_settings: Settings, store: Store) -> Iterator[str]:
    with AppServer(fake_github()) as github:
        settings = bot_settings.with_changes(
            dashboard={
                "oauth_client_id": "client-1",
                "oauth_client_secret": SecretStr("oauth-secret"),
                "oauth_url": github.url,
                "github_org": "acme",
                "insecure_localhost_cookies": True,  # served on http://127.0.0.1
            },
            github={"api_url": github.url},  # the dashboard's REST calls (the bot has its own)
        )
        clients = GitHubClients(bot_settings, options=ClientOptions.fast())
        with AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as app:
            yield app.url


def sign_in(url: str, code: str) -> tuple[httpx.Client, httpx.Response]:
    browser = httpx.Client(base_url=url)
    redirect = browser.get("/dashboard/login/github", follow_redirects=False)
    assert redirect.status_code == 302
    target = urllib.parse.urlparse(redirect.headers["location"])
    query = urllib.parse.parse_qs(target.query)
    assert target.path == "/login/oauth/authorize" and query["client_id"] == ["client-1"]
    assert query["redirect_uri"][0].endswith("/dashboard/oauth/callback")
    state = query["state"][0]
    callback = browser.get(
        "/dashboard/oauth/callback", params={"code": code, "state": state}, follow_redirects=False
    )
    return browser, callback


def test_an_active_org_member_signs_in(dashboard_url: str) -> None:
    browser, callback = sign_in(dashboard_url, "code-alice")
    assert callback.status_code == 303
    page = browser.get("/dashboard/")
    assert page.status_code == 200 and "signed in as alice" in page.text


@pytest.mark.parametrize("code", ["code-mallory", "code-pending", "code-unknown"])
def test_others_are_refused(dashboard_url: str, code: str) -> None:
    browser, callback = sign_in(dashboard_url, code)
    assert callback.status_code == 403
    assert browser.get("/dashboard/").status_code == 401


def test_a_callback_without_the_state_cookie_is_refused(dashboard_url: str) -> None:
    with httpx.Client(base_url=dashboard_url) as stranger:
        forged = stranger.get(
            "/dashboard/oauth/callback", params={"code": "code-alice", "state": "x"}
        )
        assert forged.status_code == 401
        assert stranger.get("/dashboard/").status_code == 401
