"""The comparison charts at stable URLs (docs/dashboard.md, "Charts"), each a standalone SVG:

    /dashboard/experiments/ID/charts/forest.svg[?head=ARM]   Δ and 95% interval per criterion
    /dashboard/experiments/ID/charts/cases.svg[?head=ARM]    per-case differences (dot plot)
    /dashboard/experiments/ID/charts/passk.svg               pass@k curves per arm
    /dashboard/experiments/ID/charts/frontier.svg            cost/quality frontier

`head` picks the comparison (default: the first arm compared with the baseline). The experiment
page inlines the same pictures (`pictures`, templates/_comparison_pictures.html.j2)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import HTTPException
from fastapi.responses import Response
from markupsafe import Markup

from bot.dashboard.comparison_charts import case_deltas_svg, forest_svg, message_svg, pass_k_svg
from bot.dashboard.comparison_data import case_deltas, pass_k_points
from bot.dashboard.deps import StoreDep, experiment_or_404, signed_in_router
from bot.dashboard.frontier_chart import frontier_svg
from bot.dashboard.view_cache import cached_report_and_table
from workflows.catalog.models import ExperimentSpec
from workflows.report import ArmComparison, ExperimentReport
from workflows.report.table import Table

CHARTS = ("forest", "cases", "passk", "frontier")
SVG = "image/svg+xml"

router = signed_in_router()


@router.get("/experiments/{experiment_id:path}/charts/{name}.svg")
async def chart(experiment_id: str, name: str, store: StoreDep, head: str = "") -> Response:
    if name not in CHARTS:
        raise HTTPException(404, f"no chart '{name}'; use one of {', '.join(CHARTS)}")
    record = await experiment_or_404(store, experiment_id)
    report, table = await anyio.to_thread.run_sync(cached_report_and_table, store, record)
    svg = _draw(name, record.spec, report, table, head)
    return Response(str(svg), media_type=SVG, headers={"Cache-Control": "no-store"})


def _draw(
    name: str, spec: ExperimentSpec, report: ExperimentReport, table: Table, head: str
) -> Markup:
    if name == "frontier":
        return _frontier(report)
    if name == "passk":
        return pass_k_svg(pass_k_points(table, [a.name for a in report.arms], spec.trials),
                          [a.name for a in report.arms])  # fmt: skip
    comparison = _comparison(report, head)
    if comparison is None:
        return message_svg(f"{name}-chart", "comparison chart", "One arm only: nothing compared.")
    if name == "forest":
        return forest_svg(comparison)
    return _cases(report, table, comparison)


def _comparison(report: ExperimentReport, head: str) -> ArmComparison | None:
    if not head:
        return report.comparisons[0] if report.comparisons else None
    for comparison in report.comparisons:
        if comparison.head == head:
            return comparison
    arms = ", ".join(c.head for c in report.comparisons) or "none"
    raise HTTPException(404, f"no comparison with head arm '{head}'; compared arms: {arms}")


def _cases(report: ExperimentReport, table: Table, comparison: ArmComparison) -> Markup:
    overall = next((r for r in comparison.rows if r.overall), None)
    return case_deltas_svg(
        case_deltas(table, comparison.base, comparison.head),
        comparison.base,
        comparison.head,
        overall.delta if overall else None,
    )


def _frontier(report: ExperimentReport) -> Markup:
    drawn = frontier_svg(report.frontier)
    if str(drawn).startswith("<svg"):
        return drawn
    return message_svg("frontier-chart", "cost/quality frontier", "No scored runs yet.")


def pictures(report: ExperimentReport, spec: ExperimentSpec, table: Table) -> dict[str, Any]:
    """The experiment page's pictures: per comparison its forest plot and per-case dot plot, and
    the pass@k chart (the page draws the frontier itself), from the report's score table."""
    arms = [a.name for a in report.arms]
    return {
        "comparisons": [
            {"head": c.head, "base": c.base, "forest": forest_svg(c),
             "cases": _cases(report, table, c)}
            for c in report.comparisons
        ],
        "passk": pass_k_svg(pass_k_points(table, arms, spec.trials), arms),
    }  # fmt: skip
