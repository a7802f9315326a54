"""The frontier chart (bot/dashboard/frontier_chart.py), parsed as SVG: one point per arm in order
of cost, placed by cost and score, intervals drawn, the frontier line through the arms on it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from bot.dashboard.frontier_chart import frontier_svg
from workflows.report import FrontierPoint

NS = {"svg": "http://www.w3.org/2000/svg"}


def point(arm: str, score: float, cost: float, *, on: bool, spread: float = 0.05) -> FrontierPoint:
    return FrontierPoint(
        arm=arm,
        score=score,
        score_low=score - spread,
        score_high=score + spread,
        cost_usd=cost,
        cost_low=cost * 0.9,
        cost_high=cost * 1.1,
        n_cases=10,
        n_runs=30,
        on_frontier=on,
    )


POINTS = [  # the report's order (arms' order), not the cost order
    point("main", 0.55, 0.020, on=True),
    point("pr-big", 0.80, 0.090, on=True),
    point("pr", 0.50, 0.030, on=False),
    point("pr-mini", 0.40, 0.005, on=True),
]


def parse(points: list[FrontierPoint]) -> ET.Element:
    return ET.fromstring(str(frontier_svg(points)))


def test_points_come_in_order_of_cost_and_sit_where_their_numbers_say() -> None:
    svg = parse(POINTS)
    circles = svg.findall("svg:circle", NS)
    assert [c.get("data-arm") for c in circles] == ["pr-mini", "main", "pr", "pr-big"]
    xs = [float(c.get("cx", "nan")) for c in circles]
    assert xs == sorted(xs) and len(set(xs)) == 4  # further right = costlier
    by_arm = {c.get("data-arm"): float(c.get("cy", "nan")) for c in circles}
    # higher = better: SVG y grows downwards
    ranked = sorted(by_arm, key=lambda arm: by_arm[arm])
    assert ranked == ["pr-big", "main", "pr", "pr-mini"]
    assert [c.get("data-frontier") for c in circles] == ["true", "true", "false", "true"]
    labels = [t.text for t in svg.findall("svg:text[@class='label']", NS)]
    assert labels == ["pr-mini", "main", "pr", "pr-big"]


def test_intervals_span_each_point_and_the_frontier_skips_dominated_arms() -> None:
    svg = parse(POINTS)
    circles = {c.get("data-arm"): c for c in svg.findall("svg:circle", NS)}
    score_bars = svg.findall("svg:line[@class='score-interval']", NS)
    cost_bars = svg.findall("svg:line[@class='cost-interval']", NS)
    assert len(score_bars) == len(cost_bars) == 4
    for bar, arm in zip(score_bars, ["pr-mini", "main", "pr", "pr-big"], strict=True):
        cy = float(circles[arm].get("cy", "nan"))
        assert float(bar.get("y2", "nan")) < cy < float(bar.get("y1", "nan"))
    (line,) = svg.findall("svg:polyline[@class='frontier']", NS)
    vertices = [tuple(map(float, pair.split(","))) for pair in line.get("points", "").split()]
    on = [circles[a] for a in ("pr-mini", "main", "pr-big")]
    assert vertices == [(float(c.get("cx", "nan")), float(c.get("cy", "nan"))) for c in on]


def test_arm_names_are_escaped_and_an_empty_report_says_so() -> None:
    svg = parse([point("<b>&x", 0.5, 0.01, on=True)])
    (label,) = svg.findall("svg:text[@class='label']", NS)
    assert label.text == "<b>&x"  # it parsed: the markup was escaped
    assert "nothing to plot" in str(frontier_svg([FrontierPoint(arm="main")]))
