"""The viewer over HTTP (issue 25): the transcript timeline (paged, filtered, bad lines escaped),
the experiment page's case list (filters, paging, answers on demand), live progress as JSON, and
experiment ids that contain `/`. Browser checks are in test_dashboard_viewer_browser.py."""

from __future__ import annotations

import json
import re

from tests.bot.test_dashboard import Dashboard, client, dashboard  # noqa: F401 (fixture)
from tests.support.experiments import errored_run, make_spec, scored_run
from workflows.blobs import open_blob_store
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult, RunStatus

TRANSCRIPT = "/dashboard/runs/exp-pr-7/case-01/pr/0/transcript"
TINY_CASES = ("consent-draft", "lease-rent", "lease-review", "sale-plans", "supply-governing-law")


def with_transcript(d: Dashboard, run: RunResult, lines: list[bytes]) -> RunResult:
    blobs = open_blob_store(d.settings)
    staging = blobs.staging(run.run_id)
    (staging / "out").mkdir(parents=True)
    (staging / "out" / "answer.md").write_text(f"answer of {run.arm}")
    (staging / "out" / "transcript.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return run.model_copy(update={"outputs_ref": blobs.commit(run.run_id, staging)})


def rows(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li class="ev ev-\w+" id="L(\d+)"', html)]


def test_the_transcript_is_a_paged_timeline_and_raw_stays(dashboard: Dashboard) -> None:  # noqa: F811
    with client(dashboard) as c:
        first = c.get(TRANSCRIPT)
        more = re.search(r'class="load-more" href="[^"]*" data-rows="([^"]+)"', first.text)
        assert more, "the first page offers the next"
        second = c.get(more[1].replace("&amp;", "&"))
        raw = c.get(TRANSCRIPT, params={"raw": 1})
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
    assert rows(first.text) == list(range(1, 101))  # a page, not 2000 rows
    assert "pr thinking 99" in first.text and "pr thinking 100" not in first.text
    assert rows(second.text) == list(range(101, 201)) and "<html" not in second.text
    assert raw.headers["content-type"].startswith("text/plain") and raw.text.count("\n") == 2000


def test_bad_lines_are_shown_escaped_and_cut_never_executed(dashboard: Dashboard) -> None:  # noqa: F811
    spec = make_spec(n_cases=1, trials=1).model_copy(update={"experiment_id": "exp-bad"})
    dashboard.store.save_experiment(spec)
    lines = [
        json.dumps({"role": "assistant", "content": "<script>alert(1)</script>"}).encode(),
        b"<img src=x onerror=alert(2)> not json",
        b'{"type": "log", "text": "' + b"z" * 10_000_000 + b'"}',
        json.dumps({"type": "error", "error": "disk full"}).encode(),
    ]
    run = with_transcript(dashboard, scored_run(spec, 0, "main", 0, {"accuracy": 1.0}), lines)
    dashboard.store.save_run(run)
    with client(dashboard) as c:
        page = c.get(f"/dashboard/runs/{run.run_id}/transcript")
        errors = c.get(f"/dashboard/runs/{run.run_id}/transcript", params={"kind": "error"})
        search = c.get(f"/dashboard/runs/{run.run_id}/transcript", params={"q": "ALERT(2)"})
        bogus = c.get(f"/dashboard/runs/{run.run_id}/transcript", params={"kind": "bogus"})
    assert page.status_code == 200 and len(page.content) < 1_000_000
    assert "<script>alert" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(2)&gt;" in page.text
    assert "line is 10,000,027 bytes; showing the first 262,144" in page.text
    assert "not JSON" in page.text
    assert rows(page.text) == [1, 2, 3, 4] and 'class="end"' in page.text
    assert rows(errors.text) == [4] and rows(search.text) == [2]
    assert bogus.status_code == 400 and "use one of message" in bogus.text


def test_cases_are_filtered_paged_and_tagged(dashboard: Dashboard) -> None:  # noqa: F811
    spec = ExperimentSpec(
        experiment_id="exp-tiny", repo="/repo", dataset="tiny", case_ids=TINY_CASES,
        arms=make_spec(n_cases=1).arms, trials=1,
    )  # fmt: skip
    dashboard.store.save_experiment(spec)
    for i, delta in enumerate([0.5, -0.2, 0.0, -0.6, 0.1]):
        dashboard.store.save_run(scored_run(spec, i, "main", 0, {"accuracy": 0.4}))
        if i == 2:
            failed = errored_run(spec, i, "pr", 0, RunStatus.SANDBOX_ERROR, "sandbox died")
            dashboard.store.save_run(failed)
        else:
            dashboard.store.save_run(scored_run(spec, i, "pr", 0, {"accuracy": 0.4 + delta}))
    order = re.compile(r'<details class="case-row case" id="case-([\w-]+)"')
    with client(dashboard) as c:
        page = c.get("/dashboard/experiments/exp-tiny").text
        regressed = c.get(
            "/dashboard/cases", params={"experiment": "exp-tiny", "show": "regressed"}
        )
        moved = c.get("/dashboard/experiments/exp-tiny", params={"show": "moved"}).text
        errored = c.get("/dashboard/cases", params={"experiment": "exp-tiny", "show": "errored"})
        tagged = c.get("/dashboard/cases", params={"experiment": "exp-tiny", "tag": "extraction"})
        bad = c.get("/dashboard/cases", params={"experiment": "exp-tiny", "show": "worst"})
    assert order.findall(page) == list(TINY_CASES) and "#world-change" in page
    assert order.findall(regressed.text) == ["sale-plans", "lease-rent"]  # worst first
    assert order.findall(moved) == ["sale-plans", "consent-draft", "lease-rent",
                                    "supply-governing-law"]  # fmt: skip
    assert order.findall(errored.text) == ["lease-review"]
    assert order.findall(tagged.text) == ["lease-rent", "lease-review", "supply-governing-law"]
    assert bad.status_code == 400 and "no case filter 'worst'" in bad.text


def test_a_large_experiment_pages_its_cases(dashboard: Dashboard) -> None:  # noqa: F811
    spec = make_spec(n_cases=120, trials=1).model_copy(update={"experiment_id": "exp-big"})
    dashboard.store.save_experiment(spec)
    for i in range(120):
        for arm in ("main", "pr"):
            dashboard.store.save_run(scored_run(spec, i, arm, 0, {"accuracy": 0.5}))
    with client(dashboard) as c:
        first = c.get("/dashboard/experiments/exp-big").text
        third = c.get("/dashboard/experiments/exp-big", params={"page": 3}).text
        beyond = c.get("/dashboard/cases", params={"experiment": "exp-big", "page": 99}).text
    assert first.count('class="case-row case"') == 50 and "page 1 of 3" in first
    assert 'rel="next" href="/dashboard/experiments/exp-big?show=all&amp;page=2"' in first
    assert third.count('class="case-row case"') == 20 and "case-119" in third
    assert "page 3 of 3" in beyond  # past the end: the last page


def test_live_progress_follows_the_store(dashboard: Dashboard) -> None:  # noqa: F811
    spec = make_spec(n_cases=4, trials=2).model_copy(update={"experiment_id": "exp-live"})
    dashboard.store.save_experiment(spec)  # running
    for i in range(2):
        dashboard.store.save_run(scored_run(spec, i, "main", 0, {"accuracy": 1.0}))
    with client(dashboard) as c:
        before = c.get("/dashboard/live", params={"experiment": "exp-live"}).json()
        dashboard.store.save_run(errored_run(spec, 0, "pr", 0, RunStatus.TIMEOUT, "slow"))
        after = c.get("/dashboard/live", params={"experiment": "exp-live"}).json()
        dashboard.store.set_experiment_status("exp-live", "completed")
        done = c.get("/dashboard/live", params={"experiment": "exp-live"}).json()
        missing = c.get("/dashboard/live", params={"experiment": "nope"})
    assert (before["done"], before["total"], before["running"]) == (2, 16, True)
    assert before["arms"] == [
        {"arm": "main", "done": 2, "total": 8, "by_status": {"scored": 2}},
        {"arm": "pr", "done": 0, "total": 8, "by_status": {}},
    ]
    assert before["eta_s"] is not None and before["eta_s"] > 0 and before["errors"] == []
    assert before["stages"]["pending"] == 14  # the fake launcher knows no progress
    assert after["done"] == 3 and after["arms"][1]["by_status"] == {"timeout": 1}
    assert [(e["status"], e["count"]) for e in after["errors"]] == [("timeout", 1)]
    assert done["running"] is False and done["eta_s"] is None
    assert missing.status_code == 404


def test_experiment_ids_with_slashes_have_pages(dashboard: Dashboard) -> None:  # noqa: F811
    spec = make_spec(n_cases=2, trials=1).model_copy(update={"experiment_id": "pr/acme/agent/7"})
    dashboard.store.save_experiment(spec)
    run = with_transcript(dashboard, scored_run(spec, 1, "pr", 0, {"accuracy": 1.0}),
                          [b'{"role": "user", "content": "hello"}'])  # fmt: skip
    dashboard.store.save_run(run)
    with client(dashboard) as c:
        page = c.get("/dashboard/experiments/pr/acme/agent/7")
        case = c.get("/dashboard/case", params={"experiment": "pr/acme/agent/7", "case": "case-01"})
        transcript = c.get("/dashboard/runs/pr/acme/agent/7/case-01/pr/0/transcript")
    assert page.status_code == 200 and "pr/acme/agent/7" in page.text and "case-01" in page.text
    assert 'href="/dashboard/runs/pr/acme/agent/7/case-01/pr/0/transcript"' in case.text
    assert transcript.status_code == 200 and "hello" in transcript.text


def test_a_regraded_run_shows_at_once_though_pages_are_cached(dashboard: Dashboard) -> None:  # noqa: F811
    """Same number of runs, new content: the store's runs_version moves, the cached view too."""
    spec = make_spec(n_cases=1, trials=1).model_copy(update={"experiment_id": "exp-regrade"})
    dashboard.store.save_experiment(spec, status="completed")
    dashboard.store.save_run(scored_run(spec, 0, "main", 0, {"accuracy": 0.25}))
    dashboard.store.save_run(scored_run(spec, 0, "pr", 0, {"accuracy": 0.75}))
    with client(dashboard) as c:
        before = c.get("/dashboard/experiments/exp-regrade").text
        dashboard.store.save_run(scored_run(spec, 0, "pr", 0, {"accuracy": 0.0}))  # regraded
        after = c.get("/dashboard/experiments/exp-regrade").text
        cases = c.get("/dashboard/cases", params={"experiment": "exp-regrade"}).text
    assert "Δ +0.500" in before
    assert "Δ -0.250" in after and "Δ -0.250" in cases
