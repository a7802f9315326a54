"""The comparison charts (bot/dashboard/comparison_charts.py, comparison_data.py) parsed as SVG: the
forest plot places Δ and its interval by the report's numbers and marks verdicts by shape; the dot
plot has one mark per case whose mean is the report's Δ; pass@k agrees with the report's rows;
hostile criterion and arm names stay text. Browser checks: test_comparison_pages_browser.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from markupsafe import Markup

from bot.dashboard.chart_routes import CHARTS, _draw, pictures, router
from bot.dashboard.comparison_charts import LABEL_W, PLOT_W, forest_svg
from bot.dashboard.comparison_data import case_deltas, experiment_table, pass_k_points
from bot.render import render_markdown
from tests.support.experiments import make_spec, scored_run
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult
from workflows.report import build_report, build_report_and_table
from workflows.stats import Verdict

NS = {"svg": "http://www.w3.org/2000/svg"}
HOSTILE = '<script>alert("x")</script>&'


def experiment(n_cases: int = 12, trials: int = 3) -> tuple[ExperimentSpec, list[RunResult]]:
    """pr is much better on `accuracy` (0/1), slightly worse on `style`, level on `tone`."""
    spec = make_spec(n_cases=n_cases, trials=trials)
    runs = []
    for i in range(n_cases):
        for t in range(trials):
            main: dict[str, float | None] = {
                "accuracy": float((i + t) % 3 == 0),
                "style": 0.8 + 0.01 * (i % 4),
            }
            pr: dict[str, float | None] = {"accuracy": 1.0, "style": 0.5 + 0.01 * (i % 5)}
            runs.append(scored_run(spec, i, "main", t, main | {HOSTILE: 0.5}))
            runs.append(scored_run(spec, i, "pr", t, pr | {HOSTILE: 0.5}))
    return spec, runs


def parse(svg: object) -> ET.Element:
    return ET.fromstring(str(svg))  # well-formed XML, or this raises


def x_of(row: ET.Element) -> float:
    (mark,) = [m for m in row if (m.get("class") or "").startswith("delta ")]
    if mark.tag.endswith("circle"):
        return float(mark.get("cx", "nan"))
    xs = [float(p.split(",")[0]) for p in mark.get("points", "").split()]
    return sum(xs[1:]) / 2 if len(xs) == 3 else xs[0]  # a triangle's base mid-point


def draw(name: str, spec: ExperimentSpec, runs: list[RunResult], head: str = "") -> Markup:
    """A chart as its URL draws it, from the report and table built over `runs`."""
    return _draw(name, spec, *build_report_and_table(spec, runs), head)


def test_the_forest_plot_draws_each_criterion_by_the_reports_numbers() -> None:
    spec, runs = experiment()
    comparison = build_report(spec, runs).comparisons[0]
    root = parse(forest_svg(comparison))
    assert root.get("role") == "img" and "Forest plot" in (root.get("aria-label") or "")
    assert (root.find("svg:title", NS).text or "").startswith("Forest plot")  # type: ignore[union-attr]
    rows = {
        g.get("data-criterion"): g
        for g in root.iter(f"{{{NS['svg']}}}g")
        if g.get("data-criterion")
    }
    assert set(rows) == {
        "overall",
        "accuracy",
        "style",
        HOSTILE,
    }  # no failures: no failure-rate row
    by_name = {r.criterion: r for r in comparison.rows}
    assert (
        rows["accuracy"].get("data-verdict")
        == Verdict.IMPROVED.value
        == by_name["accuracy"].verdict
    )
    assert rows["style"].get("data-verdict") == Verdict.REGRESSED.value
    assert rows["accuracy"].find("svg:polygon[@class='delta improved']", NS) is not None  # ▲
    assert rows["style"].find("svg:polygon[@class='delta regressed']", NS) is not None  # ▼
    assert rows[HOSTILE].find("svg:circle[@class='delta no-change']", NS) is not None  # ○
    zero = root.find("svg:line[@class='zero']", NS)
    assert zero is not None and float(zero.get("x1", "0")) == pytest.approx(LABEL_W + PLOT_W / 2)
    # improved is right of the zero line, regressed left, in proportion to the report's Δ
    right, left = (
        x_of(rows["accuracy"]) - LABEL_W - PLOT_W / 2,
        x_of(rows["style"]) - LABEL_W - PLOT_W / 2,
    )
    assert right > 0 > left
    ratio = by_name["accuracy"].delta / by_name["style"].delta  # type: ignore[operator]
    assert right / left == pytest.approx(ratio, rel=0.02)
    interval = rows["style"].find("svg:line[@class='interval']", NS)
    assert interval is not None
    lo, hi = float(interval.get("x1", "0")), float(interval.get("x2", "0"))
    assert lo < x_of(rows["style"]) < hi
    mde = rows["accuracy"].find("svg:rect[@class='mde']", NS)
    assert mde is not None and mde.get("fill") == "url(#mde-hatch)"  # a pattern, not only a hue
    centre = float(mde.get("x", "0")) + float(mde.get("width", "0")) / 2
    assert centre == pytest.approx(LABEL_W + PLOT_W / 2, abs=0.2)  # the band is ±MDE around 0
    words = "".join(rows["style"].itertext())
    assert "regressed" in words and f"{by_name['style'].delta:+.3f}" in words


def test_the_case_dot_plot_has_one_mark_per_case_and_the_reports_mean() -> None:
    spec, runs = experiment()
    report = build_report(spec, runs)
    table = experiment_table(spec, runs)
    deltas = case_deltas(table, "main", "pr")
    assert len(deltas) == 12
    overall = report.comparisons[0].rows[0]
    assert sum(d.delta for d in deltas) / len(deltas) == pytest.approx(overall.delta)
    root = parse(draw("cases", spec, runs))
    marks = [m for m in root.iter() if m.get("data-case")]
    assert sorted(m.get("data-case", "") for m in marks) == list(spec.case_ids)
    shapes = {m.get("data-case"): m.tag.rsplit("}", 1)[1] for m in marks}
    for d in deltas:  # up ▲ / down ▼ are polygons, level is a circle
        assert shapes[d.case_id] == ("circle" if d.delta == 0 else "polygon")
    assert root.find("svg:line[@class='mean']", NS) is not None


def test_pass_at_k_curves_agree_with_the_reports_rows() -> None:
    spec, runs = experiment(trials=3)
    report = build_report(spec, runs)
    points = pass_k_points(experiment_table(spec, runs), ["main", "pr"], spec.trials)
    assert {p.criterion for p in points} == {"accuracy"}  # the only 0/1 criterion
    assert sorted(p.k for p in points if p.arm == "main") == [1, 2, 3]
    for summary in report.summaries:
        for row in summary.pass_k:
            (found,) = [
                p
                for p in points
                if (p.arm, p.criterion, p.k) == (summary.arm, row.criterion, row.k)
            ]
            assert (found.pass_at_k, found.pass_hat_k) == pytest.approx(
                (row.pass_at_k, row.pass_hat_k)
            )
    root = parse(draw("passk", spec, runs))
    values = [
        float(m.get("data-value", "0"))
        for m in root.iter()
        if m.get("data-k") == "3"
        and m.get("data-arm") == "main"
        and "pass_at_k" in (m.get("class") or "")
    ]
    assert values == pytest.approx(
        [next(p.pass_at_k for p in points if p.arm == "main" and p.k == 3)]
    )


def test_hostile_names_stay_text_and_every_chart_is_well_formed() -> None:
    spec, runs = experiment(n_cases=3, trials=1)
    spec = spec.model_copy(
        update={"arms": tuple(a.model_copy(update={"name": a.name}) for a in spec.arms)}
    )
    for name in ("forest", "cases", "passk", "frontier"):
        svg = str(draw(name, spec, runs))
        root = parse(svg)
        assert root.find("svg:title", NS) is not None or name == "frontier"
        assert "<script" not in svg
    forest = str(draw("forest", spec, runs))
    assert HOSTILE not in forest and "&lt;script&gt;" in forest
    assert any(HOSTILE in (t.text or "") for t in parse(forest).iter())  # shown as the text it is


def test_empty_experiments_get_a_sentence_not_an_error() -> None:
    spec = make_spec(n_cases=2, trials=1)
    for name in ("forest", "cases", "passk", "frontier"):
        root = parse(draw(name, spec, []))
        assert root.find("svg:text[@class='empty']", NS) is not None, name
    view = pictures(build_report(spec, []), spec, experiment_table(spec, []))
    assert "No case scored" in str(view["comparisons"][0]["cases"])


def test_the_pr_comment_links_each_chart_route_only_with_a_dashboard_url() -> None:
    spec, runs = experiment(n_cases=3, trials=1)
    report = build_report(spec, runs)
    assert "/charts/" not in render_markdown(report)  # no dashboard configured: no links
    url = "https://evalbot.example/dashboard/experiments/exp-1"
    markdown = render_markdown(report, details_url=url)
    linked = re.findall(re.escape(url) + r"/charts/(\w+)\.svg\)", markdown)
    assert linked == list(CHARTS)
    (route,) = [r for r in router.routes if "/charts/" in getattr(r, "path", "")]
    chart_path = "/dashboard/experiments/{experiment_id:path}/charts/{name}.svg"
    assert getattr(route, "path", "") == chart_path


def test_the_page_draws_from_the_reports_own_table() -> None:
    """The experiment page builds the report once and draws its pictures from the same score
    table; both must be what `build_report` and `experiment_table` give on their own."""
    spec, runs = experiment()
    report, table = build_report_and_table(spec, runs)
    assert report == build_report(spec, runs)
    assert table == experiment_table(spec, runs)
    view = pictures(report, spec, table)
    assert view["comparisons"][0]["cases"] == draw("cases", spec, runs)
