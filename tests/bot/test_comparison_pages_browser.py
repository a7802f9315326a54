"""The comparison pictures and "what changed" in headless Chromium (Playwright, as
test_dashboard_browser.py): the SVGs are on the experiment page and at their own URLs, each an
image with a name; the diff page marks changed words and moved grades, lets a person pick the trial
pair, shows HTML and script inside answers as text (never run) and cuts a 10 MB answer with a
note. Screenshots go to test-artifacts/dashboard/ (docs/dashboard.md, "Screenshots")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app import create_app
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer
from tests.bot.test_dashboard import TOKEN
from tests.bot.test_dashboard_browser import ARTIFACTS, page  # noqa: F401 (fixture)
from tests.fakes.launcher import FakeLauncher
from tests.support.experiments import make_spec, scored_run
from workflows.blobs import BlobStore, open_blob_store
from workflows.records import RunResult
from workflows.settings import Settings
from workflows.store import Store

EXPERIMENT = "gh/acme/agent/pr7/pictures/abc123def456"  # a PR experiment: its id holds "/"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> clause 4'
BIG = b"renewal " * (10 * 1024 * 1024 // 8)  # 10 MiB, one line


@dataclass
class Served:
    url: str


def _with_answer(run: RunResult, blobs: BlobStore, answer: bytes) -> RunResult:
    staging = blobs.staging(run.run_id)
    (staging / "out").mkdir(parents=True)
    (staging / "out" / "answer.md").write_bytes(answer)
    return run.model_copy(update={"outputs_ref": blobs.commit(run.run_id, staging)})


def _answer(case: int, arm: str, trial: int) -> bytes:
    if case == 0:
        return (HOSTILE if arm == "main" else HOSTILE.replace("clause 4", "clause 7")).encode()
    if case == 1 and arm == "pr":
        return BIG
    days = {"main": 30, "pr": 60}[arm]
    return f"Case {case}: the notice period is {days} days (trial {trial}).".encode()


def populate(store: Store, blobs: BlobStore) -> None:
    """12 cases × 2 trials: pr passes `accuracy` everywhere (main on a third), is worse on style."""
    spec = make_spec(n_cases=12, trials=2).model_copy(update={"experiment_id": EXPERIMENT})
    store.save_experiment(spec)
    for i in range(12):
        for t in range(2):
            for arm in ("main", "pr"):
                scores: dict[str, float | None] = (
                    {"accuracy": float((i + t) % 3 == 0), "style": 0.9}
                    if arm == "main"
                    else {"accuracy": 1.0, "style": 0.6 + 0.01 * i}
                )
                run = scored_run(spec, i, arm, t, scores)
                store.save_run(_with_answer(run, blobs, _answer(i, arm, t)))
    store.set_experiment_status(EXPERIMENT, "completed")


@pytest.fixture
def served(bot_settings: Settings, store: Store) -> Iterator[Served]:
    settings = bot_settings.with_changes(
        dashboard={"token": SecretStr(TOKEN), "insecure_localhost_cookies": True}
    )
    populate(store, open_blob_store(settings))
    clients = GitHubClients(settings, options=ClientOptions.fast())
    with AppServer(create_app(settings, FakeLauncher(), store, github=clients)) as server:
        yield Served(server.url)


def sign_in(p: Any, url: str) -> None:
    p.goto(f"{url}/dashboard/login")
    p.fill("input[name=token]", TOKEN)
    p.click("button[type=submit]")
    p.wait_for_selector("table#experiments")


def test_the_experiment_page_shows_labelled_charts_with_their_own_urls(
    served: Served,
    page: Any,  # noqa: F811
) -> None:
    p = page
    sign_in(p, served.url)
    p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}")
    for name in ("Forest plot", "Per-case differences", "pass@k", "score against cost"):
        chart = p.get_by_role("img", name=re.compile(re.escape(name)))
        assert chart.count() == 1, name  # an image with an accessible name, once
        box = chart.bounding_box()
        assert box and box["width"] > 300 and box["height"] > 60, name
    forest = p.locator("svg.forest-chart")
    assert forest.locator("title").first.text_content().startswith("Forest plot: pr − main")
    assert forest.locator("g.row[data-criterion=accuracy] .delta.improved").count() == 1
    assert forest.locator("g.row[data-criterion=style] .delta.regressed").count() == 1
    assert forest.locator("rect.mde").count() >= 2
    assert p.locator("svg.cases-chart [data-case]").count() == 12
    p.screenshot(path=str(ARTIFACTS / "experiment-charts.png"), full_page=True)
    forest.screenshot(path=str(ARTIFACTS / "forest.png"))
    p.locator("svg.cases-chart").screenshot(path=str(ARTIFACTS / "case-differences.png"))
    p.locator("svg.passk-chart").screenshot(path=str(ARTIFACTS / "pass-at-k.png"))

    for name, marks in (("forest", "g.row"), ("cases", "[data-case]"), ("passk", ".point"),
                        ("frontier", "circle.point")):  # fmt: skip
        response = p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}/charts/{name}.svg")
        assert response.status == 200 and response.headers["content-type"] == "image/svg+xml"
        assert p.evaluate("document.documentElement.localName") == "svg"  # parsed as an image
        assert p.locator(marks).count() >= 2, name
    missing = p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}/charts/forest.svg?head=x")
    assert missing.status == 404 and "compared arms: pr" in (p.text_content("body") or "")


def test_what_changed_marks_words_and_grades_and_picks_the_trial_pair(
    served: Served,
    page: Any,  # noqa: F811
) -> None:
    p = page
    sign_in(p, served.url)
    p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}")
    p.locator("#case-case-02 summary").click()  # the case list folds each case
    p.locator("#case-case-02 .diff-link a").click()
    p.wait_for_selector("#answer-diff")
    diff = p.locator("#answer-diff")
    assert diff.locator("del").all_text_contents() == ["30"]
    assert diff.locator("ins").all_text_contents() == ["60"]
    assert "Case 2: the notice period is" in (diff.text_content() or "")
    moved = p.locator("tr.grade.moved")  # case 2, trial 0: accuracy 0 → 1, style 0.9 → 0.62
    assert moved.count() == 2
    assert "▲ up +1.00" in (p.locator("tr.grade[data-criterion=accuracy]").text_content() or "")
    assert "▼ down" in (p.locator("tr.grade[data-criterion=style]").text_content() or "")
    p.screenshot(path=str(ARTIFACTS / "diff.png"), full_page=True)

    p.select_option("select[name=base_trial]", "1")
    p.click("form.trial-pair button")
    p.wait_for_url(re.compile(r"base_trial=1"))
    assert diff.locator("del").all_text_contents() == ["30", "1"]  # "(trial 1)" vs "(trial 0)"
    assert p.locator("tr.grade.moved").count() == 1  # case 2, trial 1: accuracy 1 → 1


def test_html_in_answers_is_shown_as_text_and_a_10_mb_answer_is_cut(
    served: Served,
    page: Any,  # noqa: F811
) -> None:
    p = page
    sign_in(p, served.url)
    response = p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}/cases/case-00/diff")
    assert response.status == 200
    diff = p.locator("#answer-diff")
    text = diff.text_content() or ""
    assert "<script>window.__pwned = 1</script>" in text and "onerror" in text
    assert diff.locator("script, img").count() == 0  # text, not elements
    assert p.evaluate("window.__pwned === undefined")
    assert diff.locator("del").all_text_contents() == ["4"]
    p.screenshot(path=str(ARTIFACTS / "diff-hostile-answer.png"), full_page=True)

    response = p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}/cases/case-01/diff")
    assert response.status == 200
    note = p.locator(".truncated").text_content() or ""
    assert "10,485,760 bytes" in note and "first 16 KiB" in note
    assert len(diff.text_content() or "") < 40_000
    missing = p.goto(f"{served.url}/dashboard/experiments/{EXPERIMENT}/cases/nope/diff")
    assert missing.status == 404
