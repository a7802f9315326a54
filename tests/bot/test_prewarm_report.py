"""The report says how each arm's image was built: a cold build with its duration, a full build
and why, and a warning when the newest prewarmed image was over two hours old; a cheap, fresh
reset says nothing."""

from __future__ import annotations

from bot.render import render_html, render_markdown
from tests.workflows.store.builders import make_result, make_spec
from workflows.prewarm.image_label import ImageOrigin, with_origin
from workflows.records import RunResult
from workflows.report import build_report

IMAGE = "/data/images/agent-0123456789ab/" + "a" * 40 + "/repo"


def runs_with(main: ImageOrigin | None, pr: ImageOrigin | None) -> list[RunResult]:
    runs = []
    for arm, origin in (("main", main), ("pr", pr)):
        image = with_origin(IMAGE, origin) if origin else IMAGE
        for case in ("contract-1", "contract-2"):
            runs.append(make_result(case_id=case, arm=arm, image=image))
    return runs


def test_a_cold_build_and_a_stale_prewarmed_image_are_warned_about() -> None:
    cold = ImageOrigin("cold", 192.0, newest_age_s=5 * 3600 + 180)
    full = ImageOrigin("full", 75.0, "b" * 12, 600, "deps:pyproject.toml,uv.lock")
    report = build_report(make_spec(), runs_with(cold, full))
    assert [n.arm for n in report.images] == ["main", "pr"]
    assert report.images[0].warnings == [
        "cold build: 3m12s (main: no prewarmed image is an ancestor of its commit)",
        "the newest prewarmed image was 5h03m old when main was built: "
        "is the hourly prewarm job running?",
    ]
    assert report.images[1].warnings == ["full build: 1m15s (pr: pyproject.toml,uv.lock changed)"]
    markdown = render_markdown(report)
    assert "⚠️ cold build: 3m12s (main: no prewarmed image is an ancestor of its commit)" in markdown
    assert "5h03m old when main was built" in markdown
    assert "full build: 1m15s" in render_html(report)
    assert report.model_dump(mode="json")["images"][0]["kind"] == "cold"


def test_a_fresh_reset_or_an_unlabelled_image_says_nothing() -> None:
    reset = ImageOrigin("reset", 4.2, "c" * 12, 1800)
    report = build_report(make_spec(), runs_with(reset, None))
    assert [(n.arm, n.kind, n.warnings) for n in report.images] == [("main", "reset", [])]
    markdown = render_markdown(report)
    assert "⚠️ cold" not in markdown and "prewarm" not in markdown
