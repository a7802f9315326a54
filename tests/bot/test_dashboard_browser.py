"""What a person sees in the dashboard, in headless Chromium (Debian `chromium`, driven by
Playwright): sign in with the local token, open the list, an experiment and a history page.
Screenshots are saved under test-artifacts/dashboard/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_dashboard import TOKEN, Dashboard, dashboard  # noqa: F401 (fixture)

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture
def page() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        pytest.skip("Debian chromium is not installed")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def test_a_person_signs_in_and_reads_list_experiment_and_history(
    dashboard: Dashboard,  # noqa: F811
    page: Any,
) -> None:
    p = page  # a playwright Page
    p.goto(f"{dashboard.url}/dashboard/")
    assert "/dashboard/login" in p.url  # strangers are sent to sign in
    p.fill("input[name=token]", TOKEN)
    p.click("button[type=submit]")
    p.wait_for_selector("table#experiments")
    rows = p.locator("table#experiments tbody tr")
    assert rows.count() == 4
    p.screenshot(path=str(ARTIFACTS / "list.png"), full_page=True)

    p.click("text=exp-pr-7")
    p.wait_for_selector("#case-case-01")
    assert p.locator("#report table").count() >= 1  # the diff table
    case = p.locator("#case-case-01")
    case.locator("summary").click()  # the answers load when the case opens
    case.locator(".arm[data-arm=pr]").wait_for()
    main_box = case.locator(".arm[data-arm=main]").bounding_box()
    pr_box = case.locator(".arm[data-arm=pr]").bounding_box()
    assert main_box and pr_box
    assert (
        abs(main_box["y"] - pr_box["y"]) < 2 and pr_box["x"] > main_box["x"] + main_box["width"] - 1
    )
    assert "Answer of main to case 1." in case.locator(".arm[data-arm=main]").inner_text()
    assert "Answer of pr to case 1." in case.locator(".arm[data-arm=pr]").inner_text()
    assert "pr rationale for case 1" in case.inner_text()
    p.screenshot(path=str(ARTIFACTS / "experiment.png"), full_page=True)

    p.goto(f"{dashboard.url}/dashboard/datasets/bar/history")
    chart = p.locator("svg.history-chart")
    assert chart.is_visible()
    box = chart.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100
    assert p.locator("svg.history-chart circle").count() == 3
    assert p.locator("svg.history-chart circle.regression").count() == 1
    assert "v1.2" in (chart.text_content() or "")  # the release tag, marked on the chart
    p.screenshot(path=str(ARTIFACTS / "history.png"), full_page=True)
    assert (ARTIFACTS / "history.png").stat().st_size > 1000
