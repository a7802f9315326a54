from __future__ import annotations

import pytest

from workflows.scoring import RubricError

from .support import RunDir, grade_one, make_case, score_of

ANSWER = "The Supply  Agreement and the\nLicence Agreement both require CONSENT."


@pytest.fixture
def answered(run: RunDir) -> RunDir:
    return run.out("answer.md", ANSWER)


def test_contains_all_passes_ignoring_case_and_whitespace(answered: RunDir) -> None:
    values = ["supply agreement", "Licence agreement", "consent"]
    assert score_of(answered, "contains_all", {"values": values}) == 1.0


def test_contains_all_fails_and_names_what_is_missing(answered: RunDir) -> None:
    score = grade_one(make_case("contains_all", {"values": ["consent", "Lease"]}), answered)
    assert score.score == 0.0
    assert "'Lease'" in score.rationale and "'consent'" not in score.rationale


def test_case_sensitive_comparison(answered: RunDir) -> None:
    params = {"values": ["consent"], "case_sensitive": True}
    assert score_of(answered, "contains_all", params) == 0.0
    params = {"values": ["CONSENT"], "case_sensitive": True}
    assert score_of(answered, "contains_all", params) == 1.0


def test_contains_any(answered: RunDir) -> None:
    assert score_of(answered, "contains_any", {"values": ["lease", "licence"]}) == 1.0
    assert score_of(answered, "contains_any", {"values": ["lease", "mortgage"]}) == 0.0


def test_not_contains(answered: RunDir) -> None:
    assert score_of(answered, "not_contains", {"values": ["board minutes"]}) == 1.0
    assert score_of(answered, "not_contains", {"values": ["Board", "licence"]}) == 0.0


def test_text_graders_read_answer_json_when_there_is_no_markdown(run: RunDir) -> None:
    run.out("answer.json", {"law": "England and Wales"})
    assert score_of(run, "contains_any", {"values": ["england and wales"]}) == 1.0


def test_no_answer_fails_a_positive_check(run: RunDir) -> None:
    assert score_of(run, "contains_any", {"values": ["anything"]}) == 0.0


def test_regex_with_flags_and_min_matches(answered: RunDir) -> None:
    assert score_of(answered, "regex", {"pattern": r"agreement"}) == 0.0
    assert score_of(answered, "regex", {"pattern": r"agreement", "flags": "i"}) == 1.0
    params = {"pattern": r"agreement", "flags": "i", "min_matches": 3}
    assert score_of(answered, "regex", params) == 0.0
    assert score_of(answered, "regex", {"pattern": r"^Licence", "flags": "m"}) == 1.0
    assert score_of(answered, "regex", {"pattern": r"the.Licence", "flags": "s"}) == 1.0


def test_invalid_regex_is_a_rubric_error_never_a_zero(answered: RunDir) -> None:
    with pytest.raises(RubricError, match=r"case 'case-1', criterion 'check'.*invalid regex"):
        grade_one(make_case("regex", {"pattern": "(unclosed"}), answered)


def test_unknown_param_is_a_rubric_error(answered: RunDir) -> None:
    match = "missing required param 'values'; unknown param 'value'"
    with pytest.raises(RubricError, match=match):
        grade_one(make_case("contains_all", {"value": ["x"]}), answered)
