from __future__ import annotations

import pytest

from workflows.scoring import NOT_JUDGED, JudgeRequest, JudgeUnavailable, JudgeVerdict, RubricError

from .support import RunDir, grade_one, make_case


class RecordingJudge:
    """A Judge that answers from a fixed score and records what it was asked."""

    def __init__(self, score: float) -> None:
        self.score = score
        self.requests: list[JudgeRequest] = []

    def judge(self, request: JudgeRequest) -> JudgeVerdict:
        self.requests.append(request)
        return JudgeVerdict(self.score, "short\nand direct")


class DownJudge:
    def judge(self, request: JudgeRequest) -> JudgeVerdict:
        raise JudgeUnavailable("the judge API answered 503")


def test_without_a_judge_the_criterion_is_not_judged(run: RunDir) -> None:
    score = grade_one(make_case("llm", {"prompt": "Is it short?"}), run)
    assert score.score is None
    assert score.rationale == NOT_JUDGED == "not judged: no judge configured"


def test_judge_sees_question_answer_and_reference(run: RunDir) -> None:
    run.out("answer.md", "English law.")
    judge = RecordingJudge(0.75)
    case = make_case("llm", {"prompt": "Is it short?", "reference": True}, reference="Ref.")
    score = grade_one(case, run, judge)
    assert (score.score, score.rationale) == (0.75, "short and direct")
    (request,) = judge.requests
    assert (request.criterion, request.question, request.answer, request.reference) == (
        "check",
        "Is it short?",
        "English law.",
        "Ref.",
    )


def test_reference_is_withheld_unless_asked(run: RunDir) -> None:
    judge = RecordingJudge(1.0)
    grade_one(make_case("llm", {"prompt": "Q"}, reference="Ref."), run, judge)
    assert judge.requests[0].reference is None


def test_judge_outage_propagates_as_judge_unavailable(run: RunDir) -> None:
    with pytest.raises(JudgeUnavailable):
        grade_one(make_case("llm", {"prompt": "Q"}), run, DownJudge())


def test_judge_score_out_of_range_is_judge_unavailable(run: RunDir) -> None:
    with pytest.raises(JudgeUnavailable, match="outside"):
        grade_one(make_case("llm", {"prompt": "Q"}), run, RecordingJudge(7.0))


def test_reference_requested_but_missing_is_a_rubric_error(run: RunDir) -> None:
    case = make_case("llm", {"prompt": "Q", "reference": True})
    with pytest.raises(RubricError, match="reference"):
        grade_one(case, run, RecordingJudge(1.0))
