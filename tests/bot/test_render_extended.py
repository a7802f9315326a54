"""The report's new sections in Markdown and HTML: escaped, bounded, and saying the right thing."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

from bot.render import MAX_CHARS, code, render_html, render_json, render_markdown
from tests.bot.test_render import HOSTILE, parse
from tests.support.experiments import all_runs, binary_effect, errored_run, make_spec, scored_run
from tests.workflows.test_report_extended import aa_spec, crit, with_criteria
from workflows.records import RunStatus
from workflows.report import ExperimentReport, build_report


def regressing_report(rationale: str = "missing 'Clause 7'") -> ExperimentReport:
    spec = make_spec(n_cases=12, trials=2)
    runs = [
        with_criteria(
            scored_run(spec, i, arm, t, {}),
            crit("cites", 0.0 if arm == "pr" and i < 8 else 1.0, rationale, rubric_hash="r1"),
        )
        for i in range(12)
        for arm in ("main", "pr")
        for t in range(2)
    ]
    return build_report(spec, runs)


def test_moved_cases_show_the_reason_from_the_failing_arm() -> None:
    markdown = render_markdown(regressing_report())
    table = next(t for t in parse(markdown).tables if t[0][0] == "top moved cases")
    assert table[1] == ["🔻 case-00", "1.00", "0.00", "−1.00", "cites (pr): missing 'Clause 7'"]
    assert len(table) == 1 + 5  # the top five of eight


def test_hostile_rationales_stay_inert_in_markdown_and_html() -> None:
    report = regressing_report(HOSTILE)
    markdown = render_markdown(report)
    tables = parse(markdown)
    index = next(i for i, t in enumerate(tables.tables) if t[0][0] == "top moved cases")
    assert all(len(row) == 5 for row in tables.tables[index])
    assert {"script", "strong", "a", "code"}.isdisjoint(tables.cell_tags[index])
    assert "@octocat" not in markdown and "<script>" not in markdown
    page = render_html(report)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_details_blocks_one_per_row_with_bootstrap_and_flips() -> None:
    markdown = render_markdown(regressing_report())
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    assert markdown.count("<details><summary>") == 2 + 1  # overall, cites, pass@k
    assert "8 pass → fail (case-00, case-01, case-02, case-03, case-04, case-05" in markdown
    assert "paired bootstrap [" in markdown
    assert "<details><summary>cites — 🔴 regressed" in html


def test_errors_by_class_show_the_command_to_retry_them() -> None:
    spec = make_spec(n_cases=3, trials=1)
    runs = all_runs(spec, binary_effect(0.0))
    runs[0] = errored_run(spec, 0, "main", 0, RunStatus.JUDGE_ERROR, "judge unavailable")
    runs[1] = errored_run(spec, 0, "pr", 0, RunStatus.SANDBOX_ERROR, "died")
    markdown = render_markdown(build_report(spec, runs))
    table = next(t for t in parse(markdown).tables if t[0][0] == "error class")
    assert table[1:] == [
        ["judge_error (infra)", "1", "no: excluded", "evalbot regrade exp-1"],
        [
            "sandbox_error (infra)",
            "1",
            "no: excluded",
            "evalbot rerun exp-1 --failed or comment /eval rerun --failed",
        ],
    ]
    assert "`evalbot regrade exp-1`" in markdown


def test_commands_with_unusual_characters_are_not_code_spans() -> None:
    assert code("evalbot rerun exp-1 --failed") == "`evalbot rerun exp-1 --failed`"
    assert code("evalbot rerun a`b|c --failed") == "evalbot rerun a\\`b\\|c --failed"


def test_cost_table_shows_relative_changes_and_judge_cost_apart() -> None:
    spec = make_spec(n_cases=2, trials=1)
    runs = [
        scored_run(
            spec,
            i,
            arm,
            0,
            {"a": 1.0},
            cost=0.02 if arm == "pr" else 0.01,
            wall=20.0 if arm == "pr" else 10.0,
        )
        for i in range(2)
        for arm in ("main", "pr")
    ]
    table = next(
        t for t in parse(render_markdown(build_report(spec, runs))).tables if t[0][0] == "arm"
    )
    pr = table[2]
    assert pr[3] == "$0.020 (+100%)" and pr[7] == "20.0 s (+100%) / 20.0 s (+100%)"
    assert len(pr) == 8  # no judge column without judged criteria


def test_rubric_change_is_announced() -> None:
    report = regressing_report()
    assert "The ruler changed" not in render_markdown(report)
    spec = make_spec(n_cases=6, trials=2)
    runs = [
        with_criteria(scored_run(spec, i, arm, t, {}), crit("cites", 1.0, "", rubric_hash="r1"))
        for i in range(6)
        for arm in ("main", "pr")
        for t in range(2)
    ]
    current = {(f"case-{i:02d}", "cites"): "r2" for i in range(6)}
    markdown = render_markdown(build_report(spec, runs, current_rubric=current))
    expected = "⚠️ **The ruler changed:** the rubric of cites changed since these runs were scored"
    assert expected in markdown
    assert "`evalbot regrade exp-1`" in markdown


def test_aa_runs_get_the_noise_floor_section() -> None:
    spec = aa_spec(n_cases=30, trials=3)
    markdown = render_markdown(build_report(spec, all_runs(spec, binary_effect(0.0, seed=4))))
    assert "🔁 **A/A run:**" in markdown
    assert "**Noise floor (A/A):** 0 of 1 criteria flagged with no code change." in markdown
    mde = next(t for t in parse(markdown).tables if t[0][0] == "trials per case")
    assert mde[0] == ["trials per case", "1", "3", "5", "10"]
    assert "MDE with more trials" not in markdown  # shown in the A/A table instead


def test_many_criteria_drop_details_before_rows_and_never_exceed_the_limit() -> None:
    spec = make_spec(n_cases=30, trials=3)
    names = [f"criterion-{i:03d}-" + "z" * 40 for i in range(150)]

    def scores(case: int, arm: str, trial: int) -> dict[str, float | None]:
        return {n: float((case + trial + i) % 3 == 0) for i, n in enumerate(names)}

    markdown = render_markdown(build_report(spec, all_runs(spec, scores)))
    assert len(markdown) < MAX_CHARS
    assert len(parse(markdown).tables[0]) == 1 + 151  # every row kept
    assert "<details><summary>criterion-" not in markdown  # the details went first


class Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)


def test_html_is_a_page_with_the_same_numbers_and_json_round_trips() -> None:
    report = regressing_report()
    page = render_html(report, details_url="https://e.example/r/1")
    parsed = Text()
    parsed.feed(page)
    assert {"html", "table", "details", "code", "a"} <= parsed.tags
    row = report.comparisons[0].rows[1]
    assert f"{row.delta:+.2f}".replace("-", "−") in page
    assert ExperimentReport.model_validate_json(render_json(report)) == report


def test_a_row_whose_intervals_disagree_is_marked() -> None:
    report = regressing_report()
    comparison = report.comparisons[0]
    rows = [comparison.rows[0], comparison.rows[1].model_copy(update={"intervals_disagree": True})]
    flagged = report.model_copy(
        update={"comparisons": [comparison.model_copy(update={"rows": rows})]}
    )
    diff = parse(render_markdown(flagged)).tables[0]
    assert diff[2][3].endswith(" ⚠️") and not diff[1][3].endswith("⚠️")
    assert "they disagree about 0" in render_markdown(flagged)
