"""The dashboard on the bot's app (create_app): auth refuses strangers; the list, experiment and
history pages show what a person needs; transcripts are streamed. Browser checks are in
test_dashboard_browser.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr

from bot.app import create_app
from bot.dashboard import ROUTERS, auth, login_routes
from bot.dashboard.deps import get_user
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import make_spec, scored_run
from workflows.blobs import BlobStore, open_blob_store
from workflows.records import RunResult
from workflows.settings import Settings
from workflows.store import Store

TOKEN = "local-dashboard-token"


@dataclass
class Dashboard:
    url: str
    store: Store
    settings: Settings


def _with_outputs(run: RunResult, blobs: BlobStore, answer: str) -> RunResult:
    """The run with an answer and a 2000-line transcript committed to the blob store."""
    staging = blobs.staging(run.run_id)
    (staging / "out").mkdir(parents=True)
    (staging / "out" / "answer.md").write_text(answer)
    lines = [json.dumps({"step": i, "text": f"{run.arm} thinking {i}"}) for i in range(2000)]
    (staging / "out" / "transcript.jsonl").write_text("\n".join(lines) + "\n")
    return run.model_copy(update={"outputs_ref": blobs.commit(run.run_id, staging)})


def populate(store: Store, blobs: BlobStore) -> None:
    """A PR experiment with answers and transcripts, and three main evaluations of `bar` (the
    second one a regression, the third tagged as a release)."""
    spec = make_spec(n_cases=3, trials=1).model_copy(
        update={"experiment_id": "exp-pr-7", "labels": {"github_repo": "acme/agent",
                                                        "pull_request": "7"}}
    )  # fmt: skip
    store.save_experiment(spec)
    for i in range(3):
        for arm, value in (("main", 0.0), ("pr", 1.0)):
            run = scored_run(spec, i, arm, 0, {"accuracy": value})
            criteria = tuple(
                c.model_copy(update={"rationale": f"{arm} rationale for case {i}"})
                for c in run.criteria
            )
            run = run.model_copy(update={"criteria": criteria})
            store.save_run(_with_outputs(run, blobs, f"Answer of {arm} to case {i}."))
    store.set_experiment_status("exp-pr-7", "completed")
    for n, (base_value, head_value, labels) in enumerate(
        [(0.2, 0.6, {}), (0.6, 0.1, {}), (0.1, 0.7, {"release": "v1.2"})]
    ):
        main = make_spec(n_cases=12, trials=1).model_copy(
            update={"experiment_id": f"main-{n}", "trigger": "main", "labels": labels}
        )
        store.save_experiment(main)
        for i in range(12):
            jitter = 0.05 * (i % 3)
            store.save_run(scored_run(main, i, "main", 0, {"accuracy": base_value + jitter}))
            store.save_run(scored_run(main, i, "pr", 0, {"accuracy": head_value + jitter}))
        store.set_experiment_status(f"main-{n}", "completed")


def _serve(settings: Settings, store: Store) -> Iterator[Dashboard]:
    settings = settings.with_changes(  # served on http://127.0.0.1: development cookies
        dashboard={"token": SecretStr(TOKEN), "insecure_localhost_cookies": True}
    )
    populate(store, open_blob_store(settings))
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as server:
        yield Dashboard(server.url, store, settings)


@pytest.fixture
def dashboard(bot_settings: Settings, store: Store) -> Iterator[Dashboard]:
    yield from _serve(bot_settings, store)


@pytest.fixture(params=["local", "s3"])
def any_dashboard(
    request: pytest.FixtureRequest, bot_settings: Settings, store: Store
) -> Iterator[Dashboard]:
    """The dashboard over either blob store: the local folder, or an S3 bucket (moto)."""
    if request.param == "s3":
        bot_settings = bot_settings.with_changes(**request.getfixturevalue("s3_bucket"))
    yield from _serve(bot_settings, store)


def client(d: Dashboard, token: str | None = TOKEN) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=d.url, headers=headers, follow_redirects=False)


@pytest.mark.parametrize(
    "path",
    ["/dashboard/", "/dashboard/experiments/exp-pr-7", "/dashboard/datasets/bar/history",
     "/dashboard/runs/exp-pr-7/case-00/pr/0/transcript",
     "/dashboard/export/cells.csv?experiment=exp-pr-7"],
)  # fmt: skip
def test_unauthenticated_requests_are_refused(dashboard: Dashboard, path: str) -> None:
    with client(dashboard, None) as anonymous:
        refused = anonymous.get(path)
        assert refused.status_code == 401
        assert "Answer of" not in refused.text and "thinking" not in refused.text
        browser = anonymous.get(path, headers={"Accept": "text/html"})
        assert browser.status_code == 303 and browser.headers["location"] == "/dashboard/login"
    with client(dashboard, "wrong-token") as wrong:
        assert wrong.get(path).status_code == 401
    forged = auth.session_cookie(
        dashboard.settings.with_changes(dashboard={"token": SecretStr("other")}), "eve"
    )
    with httpx.Client(base_url=dashboard.url, cookies={auth.COOKIE: forged}) as eve:
        assert eve.get(path).status_code == 401


def test_every_route_but_sign_in_requires_a_user() -> None:
    """The signed-in routers refuse anonymous requests themselves, so a new page cannot forget."""
    for router in ROUTERS:
        for route in router.routes:
            guarded = any(d.dependency is get_user for d in getattr(route, "dependencies", []))
            assert guarded == (router is not login_routes.router), getattr(route, "path", route)


def form_token(html: str) -> str:
    """The CSRF token a page put in its form (bot/dashboard/security.py)."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert match, "the form has no csrf_token"
    return match[1]


def test_login_form_sets_a_session_cookie(dashboard: Dashboard) -> None:
    with httpx.Client(base_url=dashboard.url) as browser:
        form = browser.get("/dashboard/login").text
        assert "Dashboard token" in form
        csrf = form_token(form)
        bad = browser.post("/dashboard/login", data={"token": "nope", "csrf_token": csrf})
        assert bad.status_code == 401 and "not valid" in bad.text
        good = browser.post(
            "/dashboard/login", data={"token": TOKEN, "csrf_token": csrf}, follow_redirects=False
        )
        assert good.status_code == 303
        assert browser.get("/dashboard/").status_code == 200


def test_list_filters(dashboard: Dashboard) -> None:
    with client(dashboard) as c:
        page = c.get("/dashboard/").text
        assert "exp-pr-7" in page and "main-2" in page
        by_pr = c.get("/dashboard/", params={"pr": "7"}).text
        assert "exp-pr-7" in by_pr and "main-2" not in by_pr
        by_trigger = c.get("/dashboard/", params={"trigger": "main"}).text
        assert "main-0" in by_trigger and "exp-pr-7" not in by_trigger
        assert "No experiments match" in c.get("/dashboard/", params={"dataset": "x"}).text
        assert c.get("/dashboard/", params={"state": "bogus"}).status_code == 400


def test_experiment_page_shows_the_table_and_both_answers(any_dashboard: Dashboard) -> None:
    """The page lists the cases; a case's answers come from its fragment, loaded on demand."""
    dashboard = any_dashboard
    with client(dashboard) as c:
        page = c.get("/dashboard/experiments/exp-pr-7").text
        case = c.get("/dashboard/case", params={"experiment": "exp-pr-7", "case": "case-01"}).text
        assert c.get("/dashboard/experiments/nope").status_code == 404
        missing = c.get("/dashboard/case", params={"experiment": "exp-pr-7", "case": "nope"})
        assert missing.status_code == 404
    assert "| criterion |" not in page and "<table" in page and "accuracy" in page
    assert 'id="case-case-01"' in page and "Answer of" not in page  # answers load on demand
    assert 'data-src="/dashboard/case?experiment=exp-pr-7&amp;case=case-01"' in page
    for arm in ("main", "pr"):
        assert f"Answer of {arm} to case 1." in case and "case 2" not in case
        assert f"{arm} rationale for case 1" in case
    assert "/dashboard/runs/exp-pr-7/case-01/pr/0/transcript" in case


def test_experiment_page_charts_the_frontier_and_links_the_download(dashboard: Dashboard) -> None:
    with client(dashboard) as c:
        page = c.get("/dashboard/experiments/exp-pr-7").text
    chart = page.split('<section id="frontier">', 1)[1].split("</section>", 1)[0]
    assert [arm for arm in ("main", "pr") if f'data-arm="{arm}"' in chart] == ["main", "pr"]
    assert chart.index('data-arm="main"') < chart.index('data-arm="pr"')  # equal costs: by score
    assert 'href="/dashboard/export/cells.csv?experiment=exp-pr-7"' in page


def test_the_cells_download_is_one_row_per_run_and_criterion(dashboard: Dashboard) -> None:
    with client(dashboard) as c:
        csv_file = c.get("/dashboard/export/cells.csv", params={"experiment": "exp-pr-7"})
        jsonl = c.get("/dashboard/export/cells.jsonl", params={"experiment": "exp-pr-7"})
        unknown = c.get("/dashboard/export/cells.xlsx", params={"experiment": "exp-pr-7"})
        missing = c.get("/dashboard/export/cells.csv", params={"experiment": "nope"})
    assert csv_file.status_code == 200 and csv_file.headers["content-type"].startswith("text/csv")
    assert 'filename="exp-pr-7-cells.csv"' in csv_file.headers["content-disposition"]
    lines = csv_file.text.splitlines()
    assert lines[0].startswith("experiment,arm,case,trial,run_id,status,counted,criterion,score")
    assert len(lines) == 1 + 3 * 2  # three cases, two arms, one criterion
    rows = [json.loads(line) for line in jsonl.text.splitlines()]
    assert sorted((r["arm"], r["score"]) for r in rows)[::3] == [("main", 0.0), ("pr", 1.0)]
    assert unknown.status_code == 404 and "csv, jsonl, parquet" in unknown.text
    assert missing.status_code == 404


def test_transcripts_are_streamed_whole(any_dashboard: Dashboard) -> None:
    with (
        client(any_dashboard) as c,
        c.stream("GET", "/dashboard/runs/exp-pr-7/case-01/pr/0/transcript?raw=1") as response,
    ):
        assert response.status_code == 200
        assert "content-length" not in response.headers  # chunked: never read into memory whole
        body = b"".join(response.iter_bytes())
    lines = body.decode().splitlines()
    assert len(lines) == 2000 and json.loads(lines[-1])["text"] == "pr thinking 1999"


def test_history_page_charts_main_with_intervals_release_and_regression(
    dashboard: Dashboard,
) -> None:
    with client(dashboard) as c:
        page = c.get("/dashboard/datasets/bar/history").text
    assert page.count('class="point') == 3 and page.count('class="interval"') == 3
    assert page.count('class="point regression"') == 1
    assert 'href="/dashboard/experiments/main-1"' in page and "(regression)" in page
    assert 'class="release"' in page and "v1.2" in page
    assert page.count('class="criterion" data-criterion="accuracy"') == 1  # per-criterion line
    assert "exp-pr-7" not in page


def test_the_app_compiles_every_template_before_its_first_visitor(
    bot_settings: Settings, store: Store
) -> None:
    """A visitor's first page never pays for compiling templates (benchmarks/viewer.py): making
    the app leaves every dashboard template and the report's compiled in their environments."""
    from bot.dashboard import pages
    from bot.render.html import TEMPLATE, html_environment

    pages._ENVIRONMENT.cache.clear()  # type: ignore[union-attr]
    html_environment().cache.clear()  # type: ignore[union-attr]
    clients = GitHubClients(bot_settings, options=ClientOptions.fast())
    create_app(bot_settings, FakeLauncher(), store, github=clients)
    compiled = {name for _, name in pages._ENVIRONMENT.cache}  # type: ignore[union-attr]
    assert compiled == {p.name for p in pages.TEMPLATES.glob("*.j2")}
    assert [name for _, name in html_environment().cache] == [TEMPLATE]  # type: ignore[union-attr]
