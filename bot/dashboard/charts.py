"""The history chart as inline SVG: main's overall score over commits with 95% intervals, release
tags marked and regressions linked to their experiment. Every text is escaped."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup, escape

from workflows.score_history import HistoryPoint

WIDTH, HEIGHT, PAD = 860, 280, 40
PALETTE = ("#6f42c1", "#e36209", "#22863a", "#b08800", "#005cc5", "#d73a49")


def _criterion_mean(point: HistoryPoint, name: str) -> float | None:
    found = point.criteria.get(name)
    return found.mean if found is not None else None


@dataclass(frozen=True)
class ChartPoint:
    point: HistoryPoint
    url: str
    regression: bool = False
    release: str = ""


def history_svg(points: list[ChartPoint]) -> Markup:
    if not points:
        return Markup("<p>No main evaluations yet.</p>")
    step = (WIDTH - 2 * PAD - 100) / max(1, len(points) - 1)  # 100 px on the right: legend

    def x(i: int) -> float:
        return PAD + i * step if len(points) > 1 else WIDTH / 2

    def y(value: float) -> float:
        return HEIGHT - PAD - max(0.0, min(1.0, value)) * (HEIGHT - 2 * PAD)

    parts = [
        f'<svg class="history-chart" role="img" aria-label="overall score over commits" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{PAD}" y1="{y(0)}" x2="{WIDTH - PAD - 100}" y2="{y(0)}" stroke="#999"/>',
        f'<line x1="{PAD}" y1="{y(0)}" x2="{PAD}" y2="{y(1)}" stroke="#999"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{PAD - 6}" y="{y(tick) + 4}" font-size="10" text-anchor="end">{tick}</text>'
        )
    criteria = sorted({name for c in points for name in c.point.criteria})
    for n, name in enumerate(criteria):  # per criterion: a thin dashed line, legend on the right
        colour = PALETTE[n % len(PALETTE)]
        coords = [
            f"{x(i):.1f},{y(mean):.1f}"
            for i, c in enumerate(points)
            if (mean := _criterion_mean(c.point, name)) is not None
        ]
        if coords:
            parts.append(
                f'<polyline class="criterion" data-criterion="{escape(name)}" fill="none" '
                f'stroke="{colour}" stroke-width="1" stroke-dasharray="3 2" '
                f'points="{" ".join(coords)}"><title>{escape(name)}</title></polyline>'
            )
        parts.append(
            f'<text x="{WIDTH - PAD - 90}" y="{PAD + 12 * n}" font-size="10" fill="{colour}">'
            f"{escape(name)}</text>"
        )
    line = [
        f"{x(i):.1f},{y(c.point.overall.mean):.1f}"
        for i, c in enumerate(points)
        if c.point.overall.mean is not None
    ]
    if line:
        parts.append(
            f'<polyline fill="none" stroke="#0366d6" stroke-width="2" points="{" ".join(line)}"/>'
        )
    for i, chart in enumerate(points):
        p = chart.point
        if p.overall.mean is None:
            continue
        if p.overall.ci_low is not None and p.overall.ci_high is not None:
            parts.append(
                f'<line class="interval" x1="{x(i):.1f}" y1="{y(p.overall.ci_low):.1f}" '
                f'x2="{x(i):.1f}" y2="{y(p.overall.ci_high):.1f}" stroke="#0366d6" '
                'stroke-opacity="0.5" stroke-width="6"/>'
            )
        colour = "#d73a49" if chart.regression else "#0366d6"
        css = "point regression" if chart.regression else "point"
        title = escape(f"{p.short_sha} {p.date:%Y-%m-%d}: {p.overall.mean:.3f}")
        parts.append(
            f'<a href="{escape(chart.url)}"><circle class="{css}" '
            f'cx="{x(i):.1f}" cy="{y(p.overall.mean):.1f}" r="5" fill="{colour}">'
            f"<title>{title}</title></circle></a>"
        )
        parts.append(
            f'<text x="{x(i):.1f}" y="{HEIGHT - PAD + 14}" font-size="10" '
            f'text-anchor="middle">{escape(p.short_sha)}</text>'
        )
        if chart.release:
            parts.append(
                f'<line class="release" x1="{x(i):.1f}" y1="{y(1)}" x2="{x(i):.1f}" y2="{y(0)}" '
                'stroke="#28a745" stroke-dasharray="4 3"/>'
                f'<text x="{x(i) + 3:.1f}" y="{y(1) + 10}" font-size="10" fill="#28a745">'
                f"{escape(chart.release)}</text>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 — every interpolated text above is escaped
