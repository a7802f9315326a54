"""The report's arms in the comment and the HTML page: each arm's ref, commit and config (escaped:
config values come from PR comments), and with more than two arms the cost and quality frontier."""

from __future__ import annotations

from bot.render import render_html, render_markdown
from tests.support.experiments import make_spec, scored_run
from workflows.catalog.models import ArmSpec
from workflows.report import build_report

HOSTILE = "x|y @team <b>`"


def three_arm_report(config: dict[str, str]) -> str:
    spec = make_spec(n_cases=3, trials=2, arms=("main", "pr", "alt"))
    alt = ArmSpec(name="alt", ref="refs/pull/9/head", commit=spec.arm("alt").commit, config=config)
    spec = spec.model_copy(update={"arms": (spec.arms[0], spec.arms[1], alt)})
    cost = {"main": 0.01, "pr": 0.02, "alt": 0.04}
    value = {"main": 0.4, "pr": 0.8, "alt": 0.6}
    runs = [
        scored_run(spec, c, arm, t, {"accuracy": value[arm] + 0.1 * c}, cost=cost[arm])
        for c in range(3)
        for arm in cost
        for t in range(2)
    ]
    return render_markdown(build_report(spec, runs))


def test_each_arm_shows_its_ref_commit_and_escaped_config() -> None:
    text = three_arm_report({"model": "gpt-4.1-mini", "mode": HOSTILE})
    assert "| **main** (baseline) | main | aaaaaaa | — |" in text
    (alt,) = [line for line in text.splitlines() if line.startswith("| **alt** |")]
    assert alt.startswith("| **alt** | refs/pull/9/head | ccccccc | model=gpt-4.1-mini, mode=")
    assert alt.count(" | ") == 3  # the pipe in the value does not open a column
    assert "@team" not in alt and "<b>" not in alt


def test_more_than_two_arms_show_the_frontier_and_two_do_not() -> None:
    text = three_arm_report({})
    frontier = text.split("#### Cost and quality frontier", 1)[1].split("####", 1)[0]
    rows = [line for line in frontier.splitlines() if line.startswith("| ") and "$" in line]
    assert [r.split(" | ")[0] for r in rows] == ["| main", "| pr", "| alt"]
    assert [r.endswith("◆ yes |") for r in rows] == [True, True, False]  # pr beats alt
    assert "0.50 [0.25, 0.75]" in rows[0]  # mean over cases, t interval over 3 case means
    spec = make_spec(n_cases=2, trials=1)
    runs = [scored_run(spec, c, a, 0, {"accuracy": 0.5}) for c in range(2) for a in ("main", "pr")]
    two = render_markdown(build_report(spec, runs))
    assert "frontier" not in two and "| arm | ref |" not in two


def test_the_html_page_has_the_arms_and_the_frontier() -> None:
    spec = make_spec(n_cases=2, trials=1, arms=("main", "pr", "alt"))
    runs = [
        scored_run(spec, c, a, 0, {"accuracy": 0.5})
        for c in range(2)
        for a in ("main", "pr", "alt")
    ]
    page = render_html(build_report(spec, runs))
    assert '<table id="arms">' in page and '<table id="frontier-table">' in page
