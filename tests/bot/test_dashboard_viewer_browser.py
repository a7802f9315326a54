"""The viewer in headless Chromium (Debian `chromium`, driven by Playwright): the transcript
timeline (folding, filter, search, next error, load more, script inside never run), live progress
arriving while the page is open, and case paging with answers loaded on demand. Screenshots go to
test-artifacts/dashboard/ like the other browser tests; docs/dashboard.md, "Screenshots"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.bot.test_dashboard import TOKEN, Dashboard, dashboard  # noqa: F401 (fixture)
from tests.bot.test_dashboard_browser import ARTIFACTS, page  # noqa: F401 (fixture)
from tests.bot.test_dashboard_viewer import with_transcript
from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.records import RunStatus

expect = pytest.importorskip("playwright.sync_api").expect


def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def signed_in(p: Any) -> Any:
    p.set_extra_http_headers({"Authorization": f"Bearer {TOKEN}"})
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    p.on("dialog", on_dialog)
    return dialogs


def rich_transcript() -> list[bytes]:
    events: list[dict[str, Any]] = [
        {"step": 1, "ms": 0, "role": "user", "content": "Lease? <script>alert(1)</script>"},
        {"step": 2, "ms": 800, "role": "assistant", "content": "Searching.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "search", "arguments": '{"query": "lease term"}'}}]},
        {"step": 3, "ms": 900, "type": "search", "query": "lease term", "hits": [
            {"title": "Lease A", "path": "docs/lease-a.md", "snippet": "term of 5 years"}]},
        {"step": 4, "ms": 1500, "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.md"}}]},
        {"step": 5, "ms": 1600, "type": "error", "error": "read failed: permission denied"},
        {"step": 6, "ms": 2500, "type": "note", "text": "retrying"},
    ]  # fmt: skip
    lines = [json.dumps(e).encode() for e in events]
    return [*lines, b"<img src=x onerror=alert(2)>"]


def test_transcript_timeline_folds_filters_searches_and_jumps_to_errors(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    spec = make_spec(n_cases=1, trials=1).model_copy(update={"experiment_id": "exp-tr"})
    dashboard.store.save_experiment(spec)
    run = with_transcript(dashboard, scored_run(spec, 0, "pr", 0, {"accuracy": 1.0}),
                          rich_transcript())  # fmt: skip
    dashboard.store.save_run(run)
    p = page
    dialogs = signed_in(p)
    p.goto(f"{dashboard.url}/dashboard/runs/{run.run_id}/transcript")
    rows = p.locator("li.ev")
    assert rows.count() == 7
    assert p.locator("li.ev-invalid").inner_text().count("<img src=x") == 1  # shown as text
    assert "+1.5 s" in rows.nth(3).inner_text() and "call read (t1)" in rows.nth(3).inner_text()
    assert "Lease A" in p.locator("li.ev-search").inner_text()
    raw = rows.nth(5).locator("details.raw")  # an unknown shape ("note")
    assert raw.get_attribute("open") is None  # other JSON is folded
    raw.locator("summary").click()
    assert raw.locator("pre").is_visible()
    p.click("#fold-all")
    assert not p.locator("li.ev details[open]").count()
    p.click("#unfold-all")
    assert p.locator("li.ev details:not([open])").count() == 0
    p.select_option("#filter-kind", "tool_call")
    assert p.locator("li.ev:visible").count() == 2  # steps 2 and 4
    p.select_option("#filter-kind", "")
    p.fill("#filter-text", "permission denied")
    assert p.locator("li.ev:visible").count() == 1
    p.fill("#filter-text", "")
    p.click("#next-error")
    current = p.locator("li.ev.current")
    assert current.get_attribute("id") == "L5" and current.is_visible()
    p.screenshot(path=str(artifacts() / "transcript.png"), full_page=True)
    assert dialogs == []  # the script and the onerror inside the transcript never ran

    p.goto(f"{dashboard.url}/dashboard/runs/exp-pr-7/case-01/pr/0/transcript")
    assert p.locator("li.ev").count() == 100
    p.click("a.load-more")
    p.wait_for_selector("#L200")
    assert p.locator("li.ev").count() == 200 and p.locator("a.load-more").count() == 1


def test_live_updates_arrive_while_the_page_is_open(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    spec = make_spec(n_cases=4, trials=1).model_copy(update={"experiment_id": "exp-running"})
    dashboard.store.save_experiment(spec)  # running, nothing finished yet
    p = page
    signed_in(p)
    p.goto(f"{dashboard.url}/dashboard/experiments/exp-running")
    assert p.inner_text("#live-summary") == "0 of 8 cells · running"
    report_at_load = p.inner_text("#report")
    assert "+0.70" not in report_at_load
    for i in range(3):
        dashboard.store.save_run(scored_run(spec, i, "main", 0, {"accuracy": 0.2}))
    dashboard.store.save_run(scored_run(spec, 0, "pr", 0, {"accuracy": 0.9}))
    dashboard.store.save_run(errored_run(spec, 1, "pr", 0, RunStatus.SANDBOX_ERROR, "died"))
    expect(p.locator("#live-summary")).to_have_text(re.compile("^5 of 8"), timeout=10_000)
    main = p.locator("#live-arms tr[data-arm=main]")
    assert main.locator("progress").get_attribute("value") == "3"
    assert "3 / 4" in main.inner_text()
    assert "sandbox_error" in p.inner_text("#error-classes")
    assert re.fullmatch(r"about \d+(\.\d)? (s|min) left", p.inner_text("#live-eta"))
    p.wait_for_selector("#case-case-00 .delta-up")  # the case list followed: Δ +0.7
    report = p.locator("#report")  # and the report's table: pr 0.90 against main 0.20
    expect(report).to_contain_text("5 of 8 cells done")
    expect(report).to_contain_text("+0.70")
    assert "errored" in p.inner_text("#case-case-01 summary")
    p.screenshot(path=str(artifacts() / "live.png"), full_page=True)
    dashboard.store.set_experiment_status("exp-running", "completed")
    expect(p.locator("#live")).to_have_attribute("data-running", "no", timeout=10_000)
    assert "reload for the final report" in p.inner_text("#live-note")


def test_cases_page_and_answers_load_on_demand(
    dashboard: Dashboard,  # noqa: F811
    page: Any,  # noqa: F811
) -> None:
    spec = make_spec(n_cases=120, trials=1).model_copy(update={"experiment_id": "exp-many"})
    dashboard.store.save_experiment(spec)
    for i in range(120):
        dashboard.store.save_run(scored_run(spec, i, "main", 0, {"accuracy": 0.5}))
        dashboard.store.save_run(scored_run(spec, i, "pr", 0, {"accuracy": (i % 7) / 6}))
    dashboard.store.set_experiment_status("exp-many", "completed")
    p = page
    signed_in(p)
    p.goto(f"{dashboard.url}/dashboard/experiments/exp-many")
    assert p.locator("details.case-row").count() == 50
    p.click("a[rel=next]")
    p.wait_for_selector("#case-case-50")
    assert "page 2 of 3" in p.inner_text(".case-count")
    p.select_option("#case-filter select[name=show]", "regressed")
    p.click("#case-filter button[type=submit]")
    p.wait_for_url("**show=regressed**")
    first = p.locator("details.case-row").first
    assert "Δ -0.500" in first.inner_text()  # the worst first
    assert p.locator("details.case-row").count() == 50 and "page 1 of 2" in p.inner_text(
        ".case-count"
    )
    p.goto(f"{dashboard.url}/dashboard/experiments/exp-pr-7")
    case = p.locator("#case-case-02")
    assert case.locator(".arm").count() == 0  # nothing loaded before it opens
    case.locator("summary").click()
    case.locator(".arm[data-arm=main]").wait_for()
    assert "Answer of main to case 2." in case.inner_text()
    p.screenshot(path=str(artifacts() / "cases.png"), full_page=True)
