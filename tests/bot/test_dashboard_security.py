"""The dashboard's browser-facing hardening (bot/dashboard/security.py, docs/dashboard.md,
"Security"), seen by headless Chromium where a browser is what enforces it: the CSP blocks inline
script and framing while the pages' own content raises no violation, nosniff and the referrer
policy act, cookies carry their flags. CSRF and the headers on every response over plain HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from pydantic import SecretStr

from bot.app import create_app
from bot.dashboard.security import HEADERS
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer
from tests.bot.test_dashboard import TOKEN, Dashboard, dashboard, populate  # noqa: F401
from tests.bot.test_dashboard_browser import page  # noqa: F401 (fixture)
from tests.fakes.launcher import FakeLauncher
from workflows.blobs import open_blob_store
from workflows.settings import Settings
from workflows.store import Store

ATTACKER = "http://attacker.test"
PAGES = ["/dashboard/", "/dashboard/experiments/exp-pr-7", "/dashboard/datasets/bar/history"]


@pytest.fixture
def production(bot_settings: Settings, store: Store, tmp_path: Path) -> Iterator[str]:
    """The dashboard with default (production) cookie settings."""
    settings = bot_settings.with_changes(dashboard={"token": SecretStr(TOKEN)})
    populate(store, open_blob_store(settings))
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as server:
        yield server.url


def watch(p: Any) -> list[str]:
    """Console messages and CSP violation events of the page, as text."""
    seen: list[str] = []
    p.on("console", lambda message: seen.append(message.text))
    p.on("pageerror", lambda error: seen.append(str(error)))
    return seen


def sign_in(p: Any, url: str) -> None:
    p.goto(f"{url}/dashboard/login")
    p.fill("input[name=token]", TOKEN)
    p.click("button[type=submit]")
    p.wait_for_selector("table#experiments")


def attacker_page(p: Any, html: str) -> None:
    """Serve `html` at ATTACKER/ in this browser (another origin than the dashboard)."""
    p.route(f"{ATTACKER}/", lambda route: route.fulfill(content_type="text/html", body=html))
    p.goto(f"{ATTACKER}/")


@pytest.fixture
def other_site() -> Iterator[tuple[str, dict[str, str]]]:
    """A real server for another site on loopback (http://localhost:PORT, while the dashboard is
    http://127.0.0.1:PORT), so Chromium's private-network rules let its pages reach the
    dashboard; put the page's HTML in the dict."""
    pages = {"html": ""}
    app = FastAPI()

    @app.get("/")
    def evil() -> HTMLResponse:
        return HTMLResponse(pages["html"])

    with AppServer(app) as server:
        yield f"http://localhost:{server.port}/", pages


def test_own_pages_raise_no_csp_violation_and_are_styled(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    seen = watch(page)
    sign_in(page, dashboard.url)
    for path in PAGES:
        page.goto(f"{dashboard.url}{path}")
        page.wait_for_load_state("load")
        collapse = page.evaluate("getComputedStyle(document.querySelector('table')).borderCollapse")
        assert collapse == "collapse", path  # the stylesheet applied: not blocked, not missing
    assert [m for m in seen if "Content Security Policy" in m or "Refused" in m] == []


def test_csp_blocks_an_injected_inline_script(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    seen = watch(page)
    sign_in(page, dashboard.url)
    page.evaluate(
        """() => {
        window.violations = [];
        document.addEventListener('securitypolicyviolation',
            e => window.violations.push(e.violatedDirective));
        const s = document.createElement('script');
        s.textContent = 'window.pwned = true';
        document.body.appendChild(s);
        const img = document.createElement('img');
        img.setAttribute('onerror', 'window.pwned = true');
        img.src = 'data:,broken';
        document.body.appendChild(img);
    }"""
    )
    page.wait_for_timeout(200)
    assert page.evaluate("window.pwned === undefined")
    assert "script-src-elem" in page.evaluate("window.violations")
    assert any("Content Security Policy" in m for m in seen)


def test_frame_ancestors_prevents_framing(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
    other_site: tuple[str, dict[str, str]],
) -> None:
    seen = watch(page)
    url, pages = other_site
    pages["html"] = f'<iframe src="{dashboard.url}/dashboard/login"></iframe>'
    page.goto(url)
    page.wait_for_timeout(500)
    framed = [f for f in page.frames if f is not page.main_frame]
    assert framed and all("Sign in" not in (f.content() or "") for f in framed)
    assert any("frame-ancestors" in m for m in seen), seen


def test_nosniff_stops_a_stylesheet_running_as_a_script(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
    other_site: tuple[str, dict[str, str]],
) -> None:
    seen = watch(page)
    url, pages = other_site
    pages["html"] = f'<script src="{dashboard.url}/dashboard/static/dashboard.css"></script>'
    page.goto(url)
    page.wait_for_timeout(300)
    assert any("strict MIME type checking is enabled" in m for m in seen), seen


def test_referrer_policy_sends_no_referrer_to_other_sites(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    referers: dict[str, str | None] = {}

    def landing(route: Any) -> None:
        referers["other site"] = route.request.headers.get("referer")
        route.fulfill(content_type="text/html", body="landed")

    page.route(f"{ATTACKER}/landing", landing)
    sign_in(page, dashboard.url)
    with page.expect_request(re.compile(r".*/dashboard/experiments/exp-pr-7$")) as same:
        page.click("text=exp-pr-7")
    referers["same site"] = same.value.headers.get("referer")
    page.evaluate(f"location.href = '{ATTACKER}/landing'")
    page.wait_for_url(f"{ATTACKER}/landing")
    assert referers["same site"] == f"{dashboard.url}/dashboard/"
    assert referers["other site"] is None


def test_cookie_flags_as_the_browser_keeps_them(production: str, page: Any) -> None:  # noqa: F811
    sign_in(page, production)
    cookies = {c["name"]: c for c in page.context.cookies()}
    session, csrf = cookies["evalbot_dashboard"], cookies["evalbot_csrf"]
    assert (session["httpOnly"], session["secure"], session["sameSite"]) == (True, True, "Lax")
    assert (csrf["httpOnly"], csrf["secure"], csrf["sameSite"]) == (True, True, "Strict")


def test_a_cross_site_form_post_is_refused(dashboard: Dashboard, page: Any) -> None:  # noqa: F811
    page.goto(f"{dashboard.url}/dashboard/login")  # the browser holds a CSRF cookie
    responses: list[int] = []
    page.on("response", lambda r: responses.append(r.status) if "/login" in r.url else None)
    attacker_page(
        page,
        f'<form method="post" action="{dashboard.url}/dashboard/login">'
        f'<input name="token" value="{TOKEN}"><input name="csrf_token" value="guess"></form>'
        "<script>document.forms[0].submit()</script>",
    )
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    assert responses == [403]
    assert "evalbot_dashboard" not in {c["name"] for c in page.context.cookies()}


# -- plain HTTP -----------------------------------------------------------------------------------


def test_login_cookies_are_secure_httponly_and_samesite_by_default(production: str) -> None:
    with httpx.Client(base_url=production) as browser:
        form = browser.get("/dashboard/login")
        issued = form.headers.get_list("set-cookie")
        assert any(re.match(r"evalbot_csrf=.*HttpOnly.*SameSite=strict.*Secure", c, re.I)
                   for c in issued), issued  # fmt: skip
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token
        signed = browser.post(
            "/dashboard/login",
            data={"token": TOKEN, "csrf_token": token[1]},
            headers={"Cookie": f"evalbot_csrf={token[1]}"},  # Secure: httpx keeps it for https
        )
    cookies = signed.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith("evalbot_dashboard="))
    assert re.search(r"HttpOnly", session) and re.search(r"Secure", session)
    assert re.search(r"SameSite=lax", session, re.I)
    fresh = next(c for c in cookies if c.startswith("evalbot_csrf="))
    assert token[1] not in fresh  # a new token for the new session


@pytest.mark.parametrize(
    ("data", "headers", "status"),
    [({"token": TOKEN}, {}, 403),
     ({"token": TOKEN, "csrf_token": "wrong"}, {}, 403),
     ({"token": TOKEN, "csrf_token": "RIGHT"}, {"Origin": ATTACKER}, 403),
     ({"token": TOKEN, "csrf_token": "RIGHT"}, {}, 303),
     ({"token": TOKEN}, {"X-CSRF-Token": "RIGHT"}, 303),
     ({"token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}, 303),
     ({"token": TOKEN}, {"Authorization": "Bearer forged"}, 403)],
    ids=["no-token", "wrong-token", "other-origin", "form-token", "header-token", "api-bearer",
         "forged-bearer"],
)  # fmt: skip
def test_csrf_on_state_changing_requests(
    dashboard: Dashboard,  # noqa: F811
    data: dict[str, str],
    headers: dict[str, str],
    status: int,
) -> None:
    with httpx.Client(base_url=dashboard.url, follow_redirects=False) as browser:
        form = browser.get("/dashboard/login").text
        right = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert right
        sent = {k: v.replace("RIGHT", right[1]) for k, v in data.items()}
        extra = {k: v.replace("RIGHT", right[1]) for k, v in headers.items()}
        response = browser.post("/dashboard/login", data=sent, headers=extra)
    assert response.status_code == status, response.text
    if status == 403:
        assert "evalbot_dashboard" not in response.headers.get("set-cookie", "")


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/dashboard/login"), ("GET", "/dashboard/"), ("GET", "/metrics"), ("GET", "/healthz"),
     ("GET", "/dashboard/static/dashboard.css"), ("GET", "/nowhere"), ("GET", "/github/webhook"),
     ("POST", "/github/webhook"), ("POST", "/dashboard/login")],
)  # fmt: skip
def test_every_response_carries_the_security_headers(
    dashboard: Dashboard,  # noqa: F811
    method: str,
    path: str,
) -> None:
    response = httpx.request(method, f"{dashboard.url}{path}")
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (name, response.status_code)
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp


def test_a_form_post_larger_than_any_form_is_refused(dashboard: Dashboard) -> None:  # noqa: F811
    with httpx.Client(base_url=dashboard.url, follow_redirects=False) as browser:
        form = browser.get("/dashboard/login").text
        right = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert right
        data = {"token": TOKEN, "csrf_token": right[1], "pad": "x" * 100_000}
        assert browser.post("/dashboard/login", data=data).status_code == 413


def test_the_public_url_counts_as_this_origin(bot_settings: Settings, store: Store) -> None:
    settings = bot_settings.with_changes(
        dashboard={"token": SecretStr(TOKEN), "public_url": "https://evalbot.example.com",
                   "insecure_localhost_cookies": True}
    )  # fmt: skip
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with (
        AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as server,
        httpx.Client(base_url=server.url, follow_redirects=False) as browser,
    ):
        right = re.search(r'value="([^"]+)"', browser.get("/dashboard/login").text)
        assert right
        data = {"token": TOKEN, "csrf_token": right[1]}
        other = {"Origin": "http://evalbot.example.com"}  # another scheme is another origin
        assert browser.post("/dashboard/login", data=data, headers=other).status_code == 403
        proxied = {"Origin": "https://evalbot.example.com"}  # signing in rotates the token: last
        assert browser.post("/dashboard/login", data=data, headers=proxied).status_code == 303
