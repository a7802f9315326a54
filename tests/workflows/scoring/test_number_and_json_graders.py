from __future__ import annotations

from typing import Any

import pytest

from workflows.scoring import RubricError

from .support import RunDir, grade_one, make_case, score_of


@pytest.mark.parametrize(
    ("answer", "params", "expected"),
    [
        ("The rent is $84,000 a year.", {}, 1.0),
        ("The rent is €84,000.40 a year.", {}, 1.0),
        ("The rent is 84,001 a year.", {}, 0.0),
        ("In 2024 the rent is 84,000.", {"label": "rent is"}, 1.0),
        ("In 2024 the rent\nis   84,000.", {"label": "RENT IS"}, 1.0),
        ("In 2024 the rent is 84,000.", {}, 0.0),  # the first number is 2024
        ("Rent: USD 84,000", {"pattern": r"USD\s*([\d,]+)"}, 1.0),
        ("Rent: USD 85,000", {"pattern": r"USD\s*([\d,]+)"}, 0.0),
        ("no figures here", {}, 0.0),
        ("The rent is unknown; 2024.", {"label": "deposit"}, 0.0),
    ],
)
def test_number_within_from_text(
    run: RunDir, answer: str, params: dict[str, Any], expected: float
) -> None:
    run.out("answer.md", answer)
    assert (
        score_of(run, "number_within", {"expected": 84000, "tolerance": 0.5, **params}) == expected
    )


def test_number_within_tolerance_is_inclusive_despite_float_rounding(run: RunDir) -> None:
    run.out("answer.md", "1.0")
    assert score_of(run, "number_within", {"expected": 1.1, "tolerance": 0.1}) == 1.0
    assert score_of(run, "number_within", {"expected": 1.1, "tolerance": 0.09}) == 0.0


def test_negative_numbers_but_not_dashes(run: RunDir) -> None:
    run.out("answer.md", "Loss of −1,500 in 2023-2024")
    assert score_of(run, "number_within", {"expected": -1500, "tolerance": 0}) == 1.0
    assert (
        score_of(run, "number_within", {"expected": 2024, "tolerance": 0, "label": "2023"}) == 1.0
    )


def test_number_within_from_json(run: RunDir) -> None:
    run.out("answer.json", {"rent": {"annual": "$84,000"}, "deposit": 5000})
    params = {"expected": 84000, "tolerance": 0, "json_path": "rent.annual"}
    assert score_of(run, "number_within", params) == 1.0
    params = {"expected": 5000, "tolerance": 0, "json_path": "deposit"}
    assert score_of(run, "number_within", params) == 1.0
    params = {"expected": 5000, "tolerance": 0, "json_path": "missing"}
    score = grade_one(make_case("number_within", params), run)
    assert score.score == 0.0 and "no field 'missing'" in score.rationale


def test_number_pattern_needs_one_group(run: RunDir) -> None:
    run.out("answer.md", "84,000")
    params = {"expected": 1, "tolerance": 0, "pattern": r"\d+"}
    with pytest.raises(RubricError, match="exactly one capturing group"):
        grade_one(make_case("number_within", params), run)


def test_number_missing_required_param_is_a_rubric_error(run: RunDir) -> None:
    with pytest.raises(RubricError, match="missing required param 'tolerance'"):
        grade_one(make_case("number_within", {"expected": 1}), run)


ANSWER = {"law": "England and Wales", "sources": ["documents/supply.md"], "count": 2, "ok": True}


@pytest.mark.parametrize(
    ("path", "expected", "score"),
    [
        ("law", "england AND wales", 1.0),
        ("law", "New York", 0.0),
        ("sources.0", "documents/supply.md", 1.0),
        ("sources.1", "documents/supply.md", 0.0),
        ("count", 2.0, 1.0),
        ("count", 3, 0.0),
        ("ok", True, 1.0),
        ("ok", 1, 0.0),  # booleans equal booleans only
        ("sources", ["Documents/Supply.md"], 1.0),
    ],
)
def test_json_field_equals(run: RunDir, path: str, expected: Any, score: float) -> None:
    run.out("answer.json", ANSWER)
    assert score_of(run, "json_field_equals", {"path": path, "expected": expected}) == score


def test_json_field_missing_or_invalid_file_fails_the_agent(run: RunDir) -> None:
    params = {"path": "law", "expected": "x"}
    missing = grade_one(make_case("json_field_equals", params), run)
    assert missing.score == 0.0 and "answer.json is missing" in missing.rationale
    run.out("answer.json", "{not json")
    invalid = grade_one(make_case("json_field_equals", params), run)
    assert invalid.score == 0.0 and "not valid JSON" in invalid.rationale


def test_json_field_reads_another_out_file(run: RunDir) -> None:
    run.out("artifacts/result.json", {"status": "filed"})
    params = {"path": "status", "expected": "Filed", "file": "artifacts/result.json"}
    assert score_of(run, "json_field_equals", params) == 1.0
