"""Pictures of a comparison as inline SVG drawn on the server (docs/dashboard.md, "Charts"):

- `forest_svg`: per criterion of one comparison, Δ (head − base) with its 95% interval, the zero
  line, the ±MDE band (hatched) and the verdict as a shape and a word;
- `case_deltas_svg`: the per-case differences of the overall score as a dot plot, one mark per case;
- `pass_k_svg`: pass@k and pass^k against k, one panel per binary criterion, one line per arm.

The numbers are the report's (workflows/report) and the statistics module's (workflows/stats): the
charts draw them, they never compute a statistic of their own. Readable without colour: verdicts
and arms are told apart by shape, dash and label, not hue. Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup, escape

from workflows.report import ArmComparison, ComparisonRow
from workflows.stats import Verdict

NS = 'xmlns="http://www.w3.org/2000/svg"'
INK, MUTED, GRID = "#24292e", "#6a737d", "#999"
LABEL_W, VALUE_W, ROW_H, TOP = 170, 250, 26, 34
PLOT_W = 360
WIDTH = LABEL_W + PLOT_W + VALUE_W
# A verdict's mark: (css class, shape, filled, word). Shape and word carry it, not colour.
MARKS = {
    Verdict.IMPROVED: ("improved", "up", True, "improved ▲"),
    Verdict.REGRESSED: ("regressed", "down", True, "regressed ▼"),
    Verdict.NO_CHANGE: ("no-change", "circle", False, "no change ○"),
}
OTHER_MARK = ("undecided", "square", False, "")
Scale = Callable[[float], float]  # data value -> SVG coordinate
HATCH = (
    '<defs><pattern id="{id}" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#8a8a8a" '
    'stroke-width="2"/></pattern></defs>'
)


def _open(css: str, label: str, width: float, height: float) -> str:
    """The root element with an accessible name: aria-label and a <title> first."""
    text = escape(label)
    return (
        f'<svg class="{css}" role="img" aria-label="{text}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" {NS}><title>{text}</title>'
        f'<rect width="100%" height="100%" fill="#fff"/>'
    )


def message_svg(css: str, label: str, sentence: str) -> Markup:
    """A small chart that only says why there is nothing to draw (a URL always gets an SVG)."""
    return Markup(  # noqa: S704 — label and sentence are escaped
        _open(css, label, WIDTH, 40)
        + f'<text class="empty" x="8" y="24" font-size="13" fill="{INK}">{escape(sentence)}</text>'
        + "</svg>"
    )


def mark(shape: str, x: float, y: float, size: float, filled: bool, css: str = "") -> str:
    """A marker: circle, square, up or down triangle, or diamond; hollow unless `filled`."""
    fill = INK if filled else "#fff"
    style = f'class="{css}" fill="{fill}" stroke="{INK}" stroke-width="1.5"'
    s = size
    if shape == "circle":
        return f'<circle {style} cx="{x:.1f}" cy="{y:.1f}" r="{s:.1f}"'
    if shape == "square":
        return (
            f'<rect {style} x="{x - s:.1f}" y="{y - s:.1f}" '
            f'width="{2 * s:.1f}" height="{2 * s:.1f}"'
        )
    points = {
        "up": [(x, y - s * 1.2), (x - s, y + s * 0.8), (x + s, y + s * 0.8)],
        "down": [(x, y + s * 1.2), (x - s, y - s * 0.8), (x + s, y - s * 0.8)],
        "diamond": [(x, y - s * 1.3), (x + s, y), (x, y + s * 1.3), (x - s, y)],
    }[shape]
    return f'<polygon {style} points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in points)}"'


# --- forest plot -------------------------------------------------------------------------------


def _signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def _row_rows(comparison: ArmComparison) -> list[tuple[str, ComparisonRow]]:
    rows = [(r.criterion, r) for r in comparison.rows]
    if comparison.failure_rate is not None:
        rows.append(("failure rate (lower is better)", comparison.failure_rate))
    return rows


def _reach(rows: list[ComparisonRow]) -> float:
    """Half the x range: the widest interval, Δ or MDE, at least 0.1, at most 1."""
    values = [abs(v) for r in rows for v in (r.delta, r.ci_low, r.ci_high, r.mde) if v is not None]
    return min(1.0, max([0.1, *values]) * 1.1)


def forest_svg(comparison: ArmComparison) -> Markup:
    """The forest plot of one comparison (module doc)."""
    label = f"Forest plot: {comparison.head} − {comparison.base}, Δ and 95% interval per criterion"
    rows = _row_rows(comparison)
    if not any(row.delta is not None for _, row in rows):
        return message_svg("forest-chart", label, "No case scored in both arms yet: no Δ to plot.")
    reach = _reach([r for _, r in rows])
    height = TOP + ROW_H * len(rows) + 58

    def x(value: float) -> float:
        return LABEL_W + (max(-reach, min(reach, value)) + reach) / (2 * reach) * PLOT_W

    parts = [_open("forest-chart", label, WIDTH, height), HATCH.format(id="mde-hatch")]
    parts.append(
        f'<text x="{LABEL_W}" y="16" font-size="12" fill="{INK}">'
        f"{escape(comparison.head)} − {escape(comparison.base)} · verdict: "
        f"{escape(comparison.verdict.value)}</text>"
    )
    for i, (name, row) in enumerate(rows):
        parts.extend(_forest_row(name, row, TOP + ROW_H * i + ROW_H / 2, x))
    bottom = TOP + ROW_H * len(rows)
    parts.append(
        f'<line class="zero" x1="{x(0):.1f}" y1="{TOP - 4}" x2="{x(0):.1f}" y2="{bottom}" '
        f'stroke="{INK}" stroke-dasharray="4 3"/>'
    )
    for tick in (-reach, -reach / 2, 0.0, reach / 2, reach):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle" '
            f'fill="{INK}">{tick:+.2g}</text>'
        )
    parts.append(_forest_legend(bottom + 34))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 — every interpolated text above is escaped


def _forest_row(name: str, row: ComparisonRow, cy: float, x: Scale) -> list[str]:
    css, shape, filled, word = MARKS.get(row.verdict, OTHER_MARK)
    word = word or row.verdict.value
    parts = [
        f'<g class="row {css}" data-criterion="{escape(name)}" '
        f'data-verdict="{escape(row.verdict.value)}">',
        f'<text x="{LABEL_W - 8}" y="{cy + 4:.1f}" font-size="12" text-anchor="end" '
        f'fill="{INK}">{escape(_short(name, 26))}</text>',
    ]
    if row.mde is not None:
        parts.append(
            f'<rect class="mde" x="{x(-row.mde):.1f}" y="{cy - 9:.1f}" '
            f'width="{x(row.mde) - x(-row.mde):.1f}" height="18" fill="url(#mde-hatch)" '
            'fill-opacity="0.5"><title>'
            f"{escape(f'minimum detectable effect ±{row.mde:.3f}')}</title></rect>"
        )
    if row.ci_low is not None and row.ci_high is not None:
        parts.append(
            f'<line class="interval" x1="{x(row.ci_low):.1f}" y1="{cy:.1f}" '
            f'x2="{x(row.ci_high):.1f}" y2="{cy:.1f}" stroke="{INK}" stroke-width="2"/>'
        )
        for end in (row.ci_low, row.ci_high):
            parts.append(
                f'<line x1="{x(end):.1f}" y1="{cy - 5:.1f}" x2="{x(end):.1f}" y2="{cy + 5:.1f}" '
                f'stroke="{INK}" stroke-width="2"/>'
            )
    interval = f"[{_signed(row.ci_low)}, {_signed(row.ci_high)}]"
    title = escape(f"{name}: Δ {_signed(row.delta)} {interval}, {row.verdict.value}")
    if row.delta is not None:
        parts.append(
            mark(shape, x(row.delta), cy, 6, filled, f"delta {css}")
            + f"><title>{title}</title>"
            + (
                "</circle>"
                if shape == "circle"
                else "</rect>"
                if shape == "square"
                else "</polygon>"
            )
        )
    parts.append(
        f'<text class="value" x="{LABEL_W + PLOT_W + 10}" y="{cy + 4:.1f}" font-size="11" '
        f'fill="{INK}">{escape(f"Δ {_signed(row.delta)} {interval}")} '
        f'<tspan font-weight="bold">{escape(word)}</tspan></text>'
    )
    parts.append("</g>")
    return parts


def _forest_legend(y: float) -> str:
    items = [
        mark("up", 12, y - 4, 5, True) + "/>",
        f'<text x="22" y="{y}" font-size="10" fill="{INK}">improved</text>',
        mark("down", 92, y - 4, 5, True) + "/>",
        f'<text x="102" y="{y}" font-size="10" fill="{INK}">regressed</text>',
        mark("circle", 172, y - 4, 5, False) + "/>",
        f'<text x="182" y="{y}" font-size="10" fill="{INK}">no detectable change</text>',
        mark("square", 308, y - 4, 5, False) + "/>",
        f'<text x="318" y="{y}" font-size="10" fill="{INK}">too few / not judged</text>',
        f'<rect x="440" y="{y - 10}" width="22" height="12" fill="url(#mde-hatch)"/>',
        f'<text x="468" y="{y}" font-size="10" fill="{INK}">±MDE band</text>',
        f'<line x1="540" y1="{y - 10}" x2="540" y2="{y + 2}" stroke="{INK}" '
        'stroke-dasharray="4 3"/>',
        f'<text x="546" y="{y}" font-size="10" fill="{INK}">Δ = 0; bars: 95% interval</text>',
    ]
    return f'<g class="legend">{"".join(items)}</g>'


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- per-case differences ----------------------------------------------------------------------


@dataclass(frozen=True)
class CaseDelta:
    """One case's difference of its overall trial means, head − base."""

    case_id: str
    delta: float


BIN = 0.05
DOT = 5.0


def case_deltas_svg(
    deltas: list[CaseDelta], base: str, head: str, mean_delta: float | None
) -> Markup:
    """A dot plot: per case one mark stacked in its 0.05-wide bin of Δ; ▲ up, ▼ down, ○ level."""
    label = f"Per-case differences of the overall score, {head} − {base}"
    if not deltas:
        return message_svg("cases-chart", label, "No case scored in both arms yet.")
    bins: dict[int, list[CaseDelta]] = {}
    for item in sorted(deltas, key=lambda d: (d.delta, d.case_id)):
        bins.setdefault(round(item.delta / BIN), []).append(item)
    tallest = max(len(v) for v in bins.values())
    plot_h = max(60.0, min(tallest, 40) * (2 * DOT + 1))
    width, left, right = 720.0, 40.0, 40.0
    height = plot_h + 96

    def x(value: float) -> float:
        return left + (max(-1.0, min(1.0, value)) + 1) / 2 * (width - left - right)

    base_y = 30 + plot_h
    up = sum(d.delta > 0 for d in deltas)
    down = sum(d.delta < 0 for d in deltas)
    level = len(deltas) - up - down
    parts = [
        _open("cases-chart", label, width, height),
        f'<text x="{left}" y="16" font-size="12" fill="{INK}">'
        f"{escape(f'{len(deltas)} cases: {up} up ▲, {down} down ▼, {level} level ○')}"
        "</text>",
        f'<line x1="{left}" y1="{base_y}" x2="{width - right}" y2="{base_y}" stroke="{GRID}"/>',
        f'<line class="zero" x1="{x(0):.1f}" y1="24" x2="{x(0):.1f}" y2="{base_y}" '
        f'stroke="{INK}" stroke-dasharray="4 3"/>',
    ]
    for slot, items in sorted(bins.items()):
        for level, item in enumerate(items[:40]):
            cy = base_y - DOT - 1 - level * (2 * DOT + 1)
            shape = "up" if item.delta > 0 else "down" if item.delta < 0 else "circle"
            title = escape(f"{item.case_id}: Δ {item.delta:+.3f}")
            close = "</circle>" if shape == "circle" else "</polygon>"
            parts.append(
                f'<a href="#case-{escape(item.case_id)}">'
                + mark(shape, x(slot * BIN), cy, DOT - 0.5, shape != "circle", "case")
                + f' data-case="{escape(item.case_id)}" data-delta="{item.delta:.6f}">'
                f"<title>{title}</title>{close}</a>"
            )
        if len(items) > 40:
            parts.append(
                f'<text x="{x(slot * BIN):.1f}" y="26" font-size="9" text-anchor="middle">'
                f"+{len(items) - 40}</text>"
            )
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{x(tick):.1f}" y="{base_y + 14}" font-size="10" text-anchor="middle" '
            f'fill="{INK}">{tick:+.1f}</text>'
        )
    parts.append(
        f'<text x="{width / 2}" y="{base_y + 30}" font-size="11" text-anchor="middle" '
        f'fill="{INK}">Δ overall score per case ({escape(head)} − {escape(base)})</text>'
    )
    if mean_delta is not None:
        parts.append(
            f'<line class="mean" x1="{x(mean_delta):.1f}" y1="24" x2="{x(mean_delta):.1f}" '
            f'y2="{base_y}" stroke="{INK}" stroke-width="2"/>'
            f'<text x="{x(mean_delta) + 4:.1f}" y="{base_y + 48}" font-size="10" '
            f'fill="{INK}">{escape(f"│ mean Δ {mean_delta:+.3f}")}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 — every interpolated text above is escaped


# --- pass@k ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PassKPoint:
    arm: str
    criterion: str
    k: int
    pass_at_k: float
    pass_hat_k: float


ARM_SHAPES = ("circle", "square", "up", "diamond", "down")
ARM_DASHES = ("", "6 3", "2 2", "8 3 2 3", "1 3")
PANEL_W, PANEL_H, PANEL_PAD = 560, 170, 44


def pass_k_svg(points: list[PassKPoint], arms: list[str]) -> Markup:
    """One panel per binary criterion: pass@k (solid marks) and pass^k (hollow) against k."""
    label = "pass@k and pass^k against k, per arm, for each pass/fail criterion"
    if not points:
        return message_svg(
            "passk-chart", label, "No pass/fail criterion (scores all 0 or 1): no pass@k to draw."
        )
    criteria = list(dict.fromkeys(p.criterion for p in points))
    top_k = max(p.k for p in points)
    legend_h = 18 * len(arms) + 24
    height = len(criteria) * (PANEL_H + 24) + legend_h
    width = PANEL_W + 180
    parts = [_open("passk-chart", label, width, height)]
    for n, criterion in enumerate(criteria):
        mine = [p for p in points if p.criterion == criterion]
        parts.extend(_pass_k_panel(criterion, mine, arms, top_k, n * (PANEL_H + 24)))
    parts.append(_pass_k_legend(arms, len(criteria) * (PANEL_H + 24) + 8))
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 — every interpolated text above is escaped


def _pass_k_panel(
    criterion: str, points: list[PassKPoint], arms: list[str], top_k: int, top: float
) -> list[str]:
    left, plot_w, plot_h = PANEL_PAD, PANEL_W - PANEL_PAD - 10, PANEL_H - 50

    def x(k: int) -> float:
        return left + (0.5 if top_k == 1 else (k - 1) / (top_k - 1)) * plot_w

    def y(value: float) -> float:
        return top + 24 + (1 - max(0.0, min(1.0, value))) * plot_h

    parts = [
        f'<g class="panel" data-criterion="{escape(criterion)}">',
        f'<text x="{left}" y="{top + 14}" font-size="12" font-weight="bold" fill="{INK}">'
        f"{escape(criterion)}</text>",
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{left + plot_w}" y2="{y(0):.1f}" stroke="{GRID}"/>',
        f'<line x1="{left}" y1="{y(0):.1f}" x2="{left}" y2="{y(1):.1f}" stroke="{GRID}"/>',
    ]
    for tick in (0.0, 0.5, 1.0):
        parts.append(
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" font-size="10" text-anchor="end" '
            f'fill="{INK}">{tick:.0%}</text>'
        )
    for k in sorted({p.k for p in points}):
        parts.append(
            f'<text x="{x(k):.1f}" y="{y(0) + 14:.1f}" font-size="10" text-anchor="middle" '
            f'fill="{INK}">k={k}</text>'
        )
    for i, arm in enumerate(arms):
        line = sorted((p for p in points if p.arm == arm), key=lambda p: p.k)
        if not line:
            continue
        shape, dash = ARM_SHAPES[i % len(ARM_SHAPES)], ARM_DASHES[i % len(ARM_DASHES)]
        for measure, filled in (("pass_at_k", True), ("pass_hat_k", False)):
            coords = " ".join(f"{x(p.k):.1f},{y(getattr(p, measure)):.1f}" for p in line)
            parts.append(
                f'<polyline class="curve {measure}" data-arm="{escape(arm)}" fill="none" '
                f'stroke="{INK}" stroke-width="{1.8 if filled else 1}" '
                f'stroke-dasharray="{dash}" points="{coords}"/>'
            )
            for p in line:
                value = getattr(p, measure)
                name = "pass@" if filled else "pass^"
                title = escape(f"{arm}, {criterion}: {name}{p.k} = {value:.1%}")
                close = {"circle": "</circle>", "square": "</rect>"}.get(shape, "</polygon>")
                parts.append(
                    mark(shape, x(p.k), y(value), 4, filled, f"point {measure}")
                    + f' data-arm="{escape(arm)}" data-k="{p.k}" data-value="{value:.6f}">'
                    f"<title>{title}</title>{close}"
                )
        last = line[-1]
        parts.append(
            f'<text x="{x(last.k) + 8:.1f}" y="{y(last.pass_at_k) + 4:.1f}" font-size="10" '
            f'fill="{INK}">{escape(arm)}</text>'
        )
    parts.append("</g>")
    return parts


def _pass_k_legend(arms: list[str], top: float) -> str:
    items = [
        f'<text x="{PANEL_PAD}" y="{top + 10}" font-size="10" fill="{INK}">'
        "filled marks, thick line: pass@k (at least one of k trials passes) · hollow marks, "
        "thin line: pass^k (all k pass)</text>"
    ]
    for i, arm in enumerate(arms):
        shape, dash = ARM_SHAPES[i % len(ARM_SHAPES)], ARM_DASHES[i % len(ARM_DASHES)]
        cy = top + 26 + 18 * i
        items.append(
            f'<line x1="{PANEL_PAD}" y1="{cy}" x2="{PANEL_PAD + 40}" y2="{cy}" stroke="{INK}" '
            f'stroke-width="1.8" stroke-dasharray="{dash}"/>'
            + mark(shape, PANEL_PAD + 20, cy, 4, True)
            + "/>"
            + f'<text x="{PANEL_PAD + 50}" y="{cy + 4}" font-size="10" fill="{INK}">'
            f"{escape(arm)}</text>"
        )
    return f'<g class="legend">{"".join(items)}</g>'
