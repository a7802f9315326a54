"""bot.render: the Markdown report, checked by parsing it with a CommonMark + GFM-table parser."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

from bot.render import MAX_CHARS, escape_text, render_markdown, safe_url
from tests.support.experiments import (
    all_runs,
    binary_effect,
    errored_run,
    make_spec,
)
from workflows.records import RunStatus
from workflows.report import ExperimentReport, RunErrorItem, build_report

HOSTILE = "a|b `code` <script>alert(1)</script> **bold** [x](http://e) @octocat #12\nrow | 2\\|"


class Tables(HTMLParser):
    """Cells of every table in rendered HTML, and the tags found inside table cells."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.cell_tags: list[set[str]] = []  # per table
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._cell is not None:
            self.cell_tags[-1].add(tag)
        if tag == "table":
            self.tables.append([])
            self.cell_tags.append(set())
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in {"td", "th"}:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in {"td", "th"} and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(markdown: str) -> Tables:
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    tables = Tables()
    tables.feed(html)
    return tables


def verdict_of(tables: Tables, criterion: str) -> str:
    diff = tables.tables[0]
    assert diff[0] == ["criterion", "main", "pr", "Δ (95% CI)", "verdict"]
    return next(r[4] for r in diff if r[0] == criterion)


def report_for(effect: float, n_cases: int = 30) -> ExperimentReport:
    spec = make_spec(n_cases=n_cases, trials=3)
    return build_report(spec, all_runs(spec, binary_effect(effect, seed=5)))


@pytest.mark.parametrize(
    ("effect", "verdict"),
    [(0.45, "🟢 improved"), (-0.45, "🔴 regressed")],
)
def test_large_effects_get_their_verdict(effect: float, verdict: str) -> None:
    tables = parse(render_markdown(report_for(effect)))
    assert verdict_of(tables, "overall") == verdict
    assert verdict_of(tables, "accuracy") == verdict


def test_zero_effect_is_no_detectable_change_with_its_mde() -> None:
    report = report_for(0.0)
    tables = parse(render_markdown(report))
    accuracy = next(r for r in report.comparisons[0].rows if r.criterion == "accuracy")
    assert accuracy.mde is not None
    assert verdict_of(tables, "accuracy") == f"⚪ no detectable change (MDE ±{accuracy.mde:.2f})"


def test_hostile_strings_stay_inside_their_cell_and_stay_inert() -> None:
    spec = make_spec(n_cases=3, trials=1)
    runs = all_runs(spec, binary_effect(0.0))
    runs[0] = errored_run(spec, 0, "main", 0, RunStatus.AGENT_ERROR, HOSTILE)
    markdown = render_markdown(build_report(spec, runs))
    tables = parse(markdown)
    index = next(i for i, t in enumerate(tables.tables) if t[0][0] == "case")
    errors = tables.tables[index]
    assert all(len(row) == 5 for row in errors)
    shown = errors[1][4].replace("\u200b", "")
    assert shown == HOSTILE.replace("\n", " ")
    assert {"script", "strong", "a", "code"}.isdisjoint(tables.cell_tags[index])
    assert "@octocat" not in markdown and "#12" not in markdown


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a|b", "a\\|b"),
        ("`x`", "\\`x\\`"),
        ("<img src=x>", "&lt;img src=x&gt;"),
        ("one\ntwo\r\nthree", "one two  three"),
        ("hi @team", "hi @&#8203;team"),
        ("see #3", "see #&#8203;3"),
        ("_a_ *b* [c] ~d~ !e", "\\_a\\_ \\*b\\* \\[c\\] \\~d\\~ \\!e"),
        ("&amp;", "&amp;amp;"),
    ],
)
def test_escape_text(raw: str, escaped: str) -> None:
    assert escape_text(raw) == escaped


def test_escape_text_truncates_before_escaping() -> None:
    assert escape_text("|" * 500, limit=10) == "\\|" * 9 + "…"


def huge_report(n_criteria: int) -> ExperimentReport:
    """Long-named criteria (every tenth one improved) and 4,000 long error messages."""
    spec = make_spec(n_cases=20, trials=1)  # enough cases for Holm across 900 criteria
    names = [f"criterion-{i:03d}-" + "x" * 60 for i in range(n_criteria)]

    def scores(case: int, arm: str, trial: int) -> dict[str, float | None]:
        return {n: float(arm == "pr" and i % 10 == 0) for i, n in enumerate(names)}

    report = build_report(spec, all_runs(spec, scores))
    error = RunErrorItem(
        run_id="r",
        case_id="case-00",
        arm="pr",
        trial=0,
        status=RunStatus.AGENT_ERROR,
        infra=False,
        error="| boom " * 100,
    )
    return report.model_copy(update={"errors": [error] * 4000})


@pytest.mark.parametrize(("n_criteria", "rows_shown"), [(300, 301), (900, 91)])
def test_huge_report_fits_a_comment_and_keeps_every_changed_verdict(
    n_criteria: int, rows_shown: int
) -> None:
    markdown = render_markdown(huge_report(n_criteria))
    assert len(markdown) < MAX_CHARS
    rows = parse(markdown).tables[0][1:]
    assert len(rows) == rows_shown
    improved = [r[0] for r in rows if r[4] == "🟢 improved"]
    assert len(improved) == n_criteria // 10  # every tenth criterion (overall: +0.1 each case)
    assert re.search(r"… and \d+ more errored runs\.", markdown) or "omitted to fit" in markdown


def test_absurdly_many_changed_criteria_are_cut_with_a_note() -> None:
    spec = make_spec(n_cases=20, trials=1)  # enough cases for Holm across 1,200 criteria
    names = [f"c{i:04d}-" + "y" * 70 for i in range(1200)]
    runs = all_runs(spec, lambda case, arm, trial: {n: float(arm == "pr") for n in names})
    markdown = render_markdown(build_report(spec, runs))
    assert len(markdown) < MAX_CHARS
    assert markdown.endswith("…truncated to fit a GitHub comment; see the full report.\n")


def test_a_single_arm_has_nothing_to_compare() -> None:
    spec = make_spec(n_cases=2, trials=1, arms=("main",))
    markdown = render_markdown(build_report(spec, all_runs(spec, binary_effect(0.0))))
    assert "Only one arm: nothing to compare." in markdown
    assert "| main | 2 / 2 | 0 / 0 |" in markdown


def test_partial_report_says_it_is_running() -> None:
    spec = make_spec(n_cases=4, trials=2)
    runs = all_runs(spec, binary_effect(0.2))[:10]
    markdown = render_markdown(build_report(spec, runs))
    assert "⏳ **Running:** 10 of 16 cells done" in markdown


def test_title_names_dataset_arms_and_short_shas() -> None:
    first_line = render_markdown(report_for(0.2, n_cases=3)).splitlines()[0]
    assert first_line == "### evalbot · bar · **main** (aaaaaaa), **pr** (b1c2d3e)"


def test_details_url_is_linked_and_must_be_http() -> None:
    markdown = render_markdown(report_for(0.2, n_cases=3), details_url="https://ci.example/r/1 (x)")
    assert "[Full report](https://ci.example/r/1%20%28x%29)" in markdown
    with pytest.raises(ValueError, match="must be http"):
        safe_url("javascript:alert(1)")
