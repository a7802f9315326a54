"""Grade a run against its case's rubric, and check rubrics statically."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from workflows.catalog.models import Case, Criterion, World
from workflows.records import CriterionScore
from workflows.scoring.graders.grader_base import CannotGrade, GradeContext, Params
from workflows.scoring.judge_protocol import Judge
from workflows.scoring.outputs_layout import RunOutputs, WorldView
from workflows.scoring.registry import grader_for
from workflows.scoring.rubric_hash import criterion_hash
from workflows.scoring.scoring_errors import RubricError


def grade_case(
    case: Case, outputs: RunOutputs, world: WorldView, judge: Judge | None = None
) -> list[CriterionScore]:
    """One CriterionScore per rubric criterion, in rubric order.

    Raises RubricError when a criterion cannot be applied (never a 0 for the agent), and lets
    `JudgeUnavailable` from the judge through (the run becomes a judge_error)."""
    return [
        _grade_one(case, criterion, outputs, world, judge) for criterion in case.rubric.criteria
    ]


def _grade_one(
    case: Case, criterion: Criterion, outputs: RunOutputs, world: WorldView, judge: Judge | None
) -> CriterionScore:
    grader = grader_for(criterion.grader)
    params = parse_params(case, criterion)
    context = GradeContext(case, criterion.name, outputs, world, judge)
    try:
        grade = grader.grade(params, context)
    except CannotGrade as error:
        raise RubricError(case.id, criterion.name, str(error)) from None
    return CriterionScore(
        name=criterion.name,
        grader=criterion.grader.value,
        weight=criterion.weight,
        score=grade.score,
        rationale=grade.rationale,
        rubric_hash=criterion_hash(case, criterion),
        judge=grade.judge,
    )


def failed_criteria(case: Case, reason: str) -> list[CriterionScore]:
    """A run the agent failed (docs/statistics.md, "Outcome policy"): every criterion at its
    floor, with the failure as the rationale, so the failure enters every number."""
    return [
        CriterionScore(
            name=criterion.name,
            grader=criterion.grader.value,
            weight=criterion.weight,
            score=criterion.floor,
            rationale=f"failed run: {reason}",
            rubric_hash=criterion_hash(case, criterion),
        )
        for criterion in case.rubric.criteria
    ]


def parse_params(case: Case, criterion: Criterion) -> Params:
    """The criterion's params as its grader's model; RubricError naming what is wrong."""
    model: type[Params] = grader_for(criterion.grader).params
    try:
        return model.model_validate(criterion.params)
    except ValidationError as error:
        problems = "; ".join(describe(e) for e in error.errors())
        raise RubricError(case.id, criterion.name, problems) from None


def describe(first: ErrorDetails) -> str:
    """One problem of a params ValidationError as a phrase."""
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"unknown param '{where}'"
    if first["type"] == "missing":
        return f"missing required param '{where}'"
    return f"param '{where}': {message}" if where else message


def validate_rubric(case: Case, world: World | None = None) -> list[str]:
    """Every problem found without running the agent, one sentence each (empty = fine).

    With `world` (the case's world), also checks world files and that SQL queries prepare."""
    return [p for criterion in case.rubric.criteria for p in _problems(case, criterion, world)]


def _problems(case: Case, criterion: Criterion, world: World | None) -> list[str]:
    grader = grader_for(criterion.grader)
    try:
        params: Any = grader.params.model_validate(criterion.params)
    except ValidationError as error:
        return [_sentence(case, criterion, describe(e)) for e in error.errors()]
    found = grader.check_case(params, case)
    if world is not None:
        found += grader.check_world(params, world)
    return [_sentence(case, criterion, p) for p in found]


def _sentence(case: Case, criterion: Criterion, problem: str) -> str:
    return str(RubricError(case.id, criterion.name, problem))
