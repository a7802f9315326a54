"""A run the agent failed scores each criterion at its floor (docs/statistics.md)."""

from __future__ import annotations

from workflows.catalog.models import Case, Criterion, GraderKind, Rubric
from workflows.records import weighted_score
from workflows.scoring import failed_criteria
from workflows.scoring.rubric_hash import criterion_hash


def case_with(*criteria: Criterion) -> Case:
    return Case(id="c1", prompt="p", world="w", rubric=Rubric(criteria=criteria))


def test_every_criterion_scores_its_floor_with_the_failure_as_rationale() -> None:
    accuracy = Criterion(
        name="accuracy", grader=GraderKind.REGEX, weight=3.0, params={"pattern": "x"}
    )
    tone = Criterion(
        name="tone", grader=GraderKind.LLM, weight=1.0, floor=0.4, params={"prompt": "?"}
    )
    case = case_with(accuracy, tone)

    scores = failed_criteria(case, "timeout: the agent did not finish")

    assert [(s.name, s.score, s.weight) for s in scores] == [
        ("accuracy", 0.0, 3.0),
        ("tone", 0.4, 1.0),
    ]
    assert all(s.rationale == "failed run: timeout: the agent did not finish" for s in scores)
    assert weighted_score(scores) == 0.1  # (3 × 0 + 1 × 0.4) / 4
    assert [s.rubric_hash for s in scores] == [
        criterion_hash(case, accuracy),
        criterion_hash(case, tone),
    ]


def test_a_floor_is_part_of_the_rubric_hash_only_when_set() -> None:
    plain = Criterion(name="a", grader=GraderKind.REGEX, params={"pattern": "x"})
    explicit_zero = plain.model_copy(update={"floor": 0.0})
    raised = plain.model_copy(update={"floor": 0.5})
    case = case_with(plain)
    assert criterion_hash(case, plain) == criterion_hash(case, explicit_zero)  # old hashes hold
    assert criterion_hash(case, raised) != criterion_hash(case, plain)
