"""The cost/quality frontier as inline SVG, drawn on the server (no script): one point per arm at
(cost per run, overall score) with both 95% intervals as error bars, the frontier as a line through
the arms on it (workflows/report/frontier.py). Points come in order of cost, then score. Every text
is escaped."""

from __future__ import annotations

from collections.abc import Callable

from markupsafe import Markup, escape

from workflows.report import FrontierPoint

WIDTH, HEIGHT, PAD = 640, 320, 56
COLOUR, OFF_COLOUR = "#0366d6", "#6a737d"
Scale = Callable[[float], float]  # data value -> SVG coordinate


def frontier_svg(points: list[FrontierPoint]) -> Markup:
    """The chart, or a sentence when no arm has both a score and a cost yet."""
    shown = sorted(
        (p for p in points if p.score is not None and p.cost_usd is not None),
        key=lambda p: (p.cost_usd, p.score),
    )
    if not shown:
        return Markup("<p>No scored runs yet: nothing to plot.</p>")
    top = max(max(p.cost_high or 0.0, p.cost_usd or 0.0) for p in shown) * 1.1 or 1.0

    def x(cost: float) -> float:
        return PAD + max(0.0, min(cost, top)) / top * (WIDTH - 2 * PAD)

    def y(score: float) -> float:
        return HEIGHT - PAD - max(0.0, min(1.0, score)) * (HEIGHT - 2 * PAD)

    parts = [
        '<svg class="frontier-chart" role="img" aria-label="score against cost per run, per arm" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'xmlns="http://www.w3.org/2000/svg">',
        *_axes(x, y, top),
    ]
    line = [f"{x(p.cost_usd or 0.0):.1f},{y(p.score or 0.0):.1f}" for p in shown if p.on_frontier]
    if len(line) > 1:
        parts.append(
            f'<polyline class="frontier" fill="none" stroke="{COLOUR}" stroke-width="1.5" '
            f'stroke-dasharray="5 3" points="{" ".join(line)}"/>'
        )
    for point in shown:
        parts.extend(_point(point, x, y))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 — every interpolated text above is escaped


def _axes(fx: Scale, fy: Scale, top: float) -> list[str]:
    parts = [
        f'<line x1="{PAD}" y1="{fy(0)}" x2="{WIDTH - PAD}" y2="{fy(0)}" stroke="#999"/>',
        f'<line x1="{PAD}" y1="{fy(0)}" x2="{PAD}" y2="{fy(1)}" stroke="#999"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" font-size="11" text-anchor="middle">'
        "cost per run (USD)</text>",
        f'<text x="14" y="{HEIGHT / 2}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 14 {HEIGHT / 2})">overall score</text>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{PAD - 6}" y="{fy(tick) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{tick}</text>"
        )
    for tick in (0.0, top / 2, top):
        parts.append(
            f'<text x="{fx(tick):.1f}" y="{fy(0) + 14:.1f}" font-size="10" '
            f'text-anchor="middle">{tick:.4g}</text>'
        )
    return parts


def _point(p: FrontierPoint, fx: Scale, fy: Scale) -> list[str]:
    cost, score = p.cost_usd or 0.0, p.score or 0.0
    colour = COLOUR if p.on_frontier else OFF_COLOUR
    parts = []
    if p.score_low is not None and p.score_high is not None:
        parts.append(
            f'<line class="score-interval" x1="{fx(cost):.1f}" y1="{fy(p.score_low):.1f}" '
            f'x2="{fx(cost):.1f}" y2="{fy(p.score_high):.1f}" stroke="{colour}" '
            'stroke-opacity="0.6"/>'
        )
    if p.cost_low is not None and p.cost_high is not None:
        parts.append(
            f'<line class="cost-interval" x1="{fx(max(0.0, p.cost_low)):.1f}" '
            f'y1="{fy(score):.1f}" x2="{fx(p.cost_high):.1f}" y2="{fy(score):.1f}" '
            f'stroke="{colour}" stroke-opacity="0.6"/>'
        )
    name = escape(p.arm)
    title = escape(f"{p.arm}: score {score:.3f}, ${cost:.4f} per run")
    frontier = "true" if p.on_frontier else "false"
    parts.append(
        f'<circle class="point" data-arm="{name}" data-score="{score:.6f}" '
        f'data-cost="{cost:.8f}" data-frontier="{frontier}" cx="{fx(cost):.1f}" '
        f'cy="{fy(score):.1f}" r="5" fill="{colour}"><title>{title}</title></circle>'
    )
    parts.append(
        f'<text class="label" x="{fx(cost) + 7:.1f}" y="{fy(score) - 7:.1f}" font-size="11">'
        f"{name}</text>"
    )
    return parts
