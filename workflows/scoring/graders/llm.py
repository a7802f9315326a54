"""llm: graded by a judge when one is passed in; otherwise "not judged" (score None), never 0."""

from __future__ import annotations

import math

from pydantic import Field

from workflows.catalog.models import Case, GraderKind
from workflows.scoring.graders.grader_base import CannotGrade, Grade, GradeContext, Grader, Params
from workflows.scoring.judge_protocol import JudgeRequest, JudgeUnavailable
from workflows.scoring.text_helpers import one_line

NOT_JUDGED = "not judged: no judge configured"
MAX_SAMPLES = 15


class LlmParams(Params):
    prompt: str = Field(min_length=1, description="What the judge is asked.")
    reference: bool = Field(False, description="Show the judge the case's reference answer.")
    judge_samples: int = Field(
        1, ge=1, le=MAX_SAMPLES, description="Ask the judge this many times; record agreement."
    )


def grade_llm(params: LlmParams, ctx: GradeContext) -> Grade:
    if ctx.judge is None:
        return Grade(None, NOT_JUDGED)
    if params.reference and ctx.case.reference is None:
        raise CannotGrade("asks for the reference answer but the case has none (reference.md)")
    request = JudgeRequest(
        case_id=ctx.case.id,
        criterion=ctx.criterion,
        question=params.prompt,
        task=ctx.case.prompt,
        answer=ctx.outputs.answer,
        reference=ctx.case.reference if params.reference else None,
        samples=params.judge_samples,
    )
    verdict = ctx.judge.judge(request)
    if not (math.isfinite(verdict.score) and 0.0 <= verdict.score <= 1.0):
        raise JudgeUnavailable(f"the judge returned score {verdict.score}, outside [0, 1]")
    return Grade(verdict.score, one_line(verdict.rationale, 300), verdict.record)


def _needs_reference(params: LlmParams, case: Case) -> list[str]:
    if params.reference and case.reference is None:
        return ["asks for the reference answer but the case has none (reference.md)"]
    return []


LLM = Grader(GraderKind.LLM, LlmParams, grade_llm, check_case=_needs_reference)
