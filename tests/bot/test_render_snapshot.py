"""The rendered comment for 100 cases × 2 arms × 5 trials × 12 criteria: its size, and a snapshot
that pins its layout.

Update the snapshot after an intended change to the layout:

    EVALBOT_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q tests/bot/test_render_snapshot.py

and review the diff of tests/bot/snapshots/ before committing it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import numpy as np
import pytest

from bot.render import MAX_CHARS, render_html, render_json, render_markdown
from bot.render.markdown import DETAIL_LEVELS, TEMPLATE, environment
from bot.render.view import report_view
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.records import (
    CriterionScore,
    JudgeRecord,
    RunResult,
    RunStatus,
    Usage,
    weighted_score,
)
from workflows.report import ExperimentReport, build_report

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("EVALBOT_UPDATE_SNAPSHOTS") == "1"

# (name, base pass rate, head pass rate); the last two are judged (continuous) criteria
BINARY = [
    ("finds-consent-clauses", 0.60, 0.80),
    ("cites-sources", 0.70, 0.45),
    ("no-privileged-docs", 0.95, 0.95),
    ("correct-governing-law", 0.80, 0.82),
    ("amount-within-tolerance", 0.50, 0.50),
    ("json-schema-valid", 0.90, 0.88),
    ("flags-contradiction", 0.30, 0.33),
    ("updates-review-status", 0.75, 0.75),
    ("memo-file-created", 0.85, 0.86),
    ("no-hallucinated-parties", 0.65, 0.60),
]
JUDGED = [("judge-clarity", 0.6, 0.62), ("judge-completeness", 0.55, 0.65)]


def spec_100x2x5() -> ExperimentSpec:
    return ExperimentSpec(
        experiment_id="bar-20261129-snapshot",
        repo="acme/legal-agent",
        dataset="bar",
        case_ids=tuple(f"contract-review-{i:03d}" for i in range(100)),
        arms=(
            ArmSpec(name="main", ref="main", commit="a" * 40),
            ArmSpec(name="pr-42", ref="pull/42/head", commit="b1c2d3e" + "f" * 33),
        ),
        trials=5,
    )


def _criteria(rng: np.random.Generator, arm: int, level: np.ndarray, case: int) -> tuple:
    scores = []
    for k, (name, base, head) in enumerate(BINARY):
        ok = bool(rng.random() < np.clip((head if arm else base) + level[case, k], 0, 1))
        why = "all 3 values found" if ok else f"missing 1 of 3: 'Clause {case % 7 + 1}.{k}'"
        scores.append(
            CriterionScore(
                name=name,
                grader="contains_all",
                weight=1.0,
                score=float(ok),
                rationale=why,
                rubric_hash=f"h{k}",
            )
        )
    for k, (name, base, head) in enumerate(JUDGED):
        value = float(np.clip(rng.normal(head if arm else base, 0.15), 0, 1).round(2))
        record = JudgeRecord(
            model="judge-1",
            samples=1,
            sample_scores=(value,),
            calls=1,
            input_tokens=900,
            output_tokens=60,
            cost_usd=0.0004,
        )
        scores.append(
            CriterionScore(
                name=name,
                grader="llm",
                weight=2.0,
                score=value,
                rationale=f"The memo is {'clear' if value > 0.5 else 'vague'}"
                f" about clause {case % 5}.",
                rubric_hash=f"j{k}",
                judge=record,
            )
        )
    return tuple(scores)


def runs_100x2x5(spec: ExperimentSpec) -> list[RunResult]:
    rng = np.random.default_rng(20261129)
    level = rng.normal(0, 0.15, (100, len(BINARY)))
    runs = []
    for cell in spec.cells():
        case = spec.case_ids.index(cell.case_id)
        arm = 0 if cell.arm == "main" else 1
        base = RunResult(
            run_id=cell.run_id,
            experiment_id=spec.experiment_id,
            case_id=cell.case_id,
            arm=cell.arm,
            trial=cell.trial,
            seed=cell.seed,
            status=RunStatus.SCORED,
            usage=Usage(
                input_tokens=int(rng.integers(8000, 12000)),
                output_tokens=int(rng.integers(800, 1500)),
                cost_usd=round(0.02 + 0.01 * arm + rng.random() / 100, 4),
            ),
            wall_s=round(float(rng.gamma(4, 10 + 3 * arm)), 1),
        )
        draw = rng.random()
        if draw < 0.01:
            runs.append(
                base.model_copy(
                    update={
                        "status": RunStatus.TIMEOUT,
                        "error": "the agent did not finish within its time limit",
                    }
                )
            )
        elif draw < 0.015:
            runs.append(
                base.model_copy(
                    update={
                        "status": RunStatus.JUDGE_ERROR,
                        "error": "judge unavailable: the judge API failed 6 times: HTTP 503",
                    }
                )
            )
        else:
            criteria = _criteria(rng, arm, level, case)
            runs.append(
                base.model_copy(update={"criteria": criteria, "score": weighted_score(criteria)})
            )
    return runs


@pytest.fixture(scope="module")
def report() -> ExperimentReport:
    spec = spec_100x2x5()
    return build_report(spec, runs_100x2x5(spec))


def test_the_comment_fits_with_full_detail(report: ExperimentReport) -> None:
    markdown = render_markdown(report)
    assert len(markdown) < MAX_CHARS
    full = (
        environment()
        .get_template(TEMPLATE)
        .render(report=report, detail=DETAIL_LEVELS[0], details_url=None, view=report_view(report))
    )
    assert markdown == full  # nothing had to be cut
    assert markdown.count("<details>") == 13 + 1  # overall + 12 criteria, and pass@k


def test_the_comment_layout_matches_the_snapshot(report: ExperimentReport) -> None:
    path = SNAPSHOTS / "report_100x2x5x12.md"
    markdown = render_markdown(
        report, details_url="https://evalbot.example/e/bar-20261129-snapshot"
    )
    if UPDATE or not path.exists():
        path.write_text(markdown, encoding="utf-8")
        if not UPDATE:
            pytest.fail(f"wrote a new snapshot {path.name}; review and commit it")
    expected = path.read_text(encoding="utf-8")
    if markdown != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    markdown.splitlines(keepends=True),
                    "snapshot",
                    "rendered",
                )
            )[:80]
        )
        pytest.fail(
            f"the rendered comment differs from {path.name} "
            f"(EVALBOT_UPDATE_SNAPSHOTS=1 to accept):\n{diff}"
        )


def test_the_same_data_renders_as_html_and_json(report: ExperimentReport) -> None:
    page = render_html(report)
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    judge_errors = [e for e in report.errors if e.status is RunStatus.JUDGE_ERROR]
    assert len(report.errors) > 10  # every errored run is listed, nothing is cut
    assert page.count("judge unavailable: the judge API failed") == len(judge_errors)
    assert page.count("<tr><td>contract-review-") >= len(report.errors)
    assert ExperimentReport.model_validate_json(render_json(report)) == report
