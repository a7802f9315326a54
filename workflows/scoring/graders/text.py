"""Graders over the answer text: contains_all, contains_any, not_contains, regex."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from workflows.catalog.models import GraderKind
from workflows.scoring.graders.grader_base import (
    Grade,
    GradeContext,
    Grader,
    Params,
    compile_regex,
    passed,
)
from workflows.scoring.text_helpers import occurring, one_line


class ValuesParams(Params):
    values: list[str] = Field(min_length=1)
    case_sensitive: bool = False

    @field_validator("values")
    @classmethod
    def _non_blank(cls, values: list[str]) -> list[str]:
        if any(not v.strip() for v in values):
            raise ValueError("values must not be blank (a blank value occurs in every answer)")
        return values


def _quoted(values: list[str]) -> str:
    return one_line(", ".join(f"'{v}'" for v in values), 160)


def grade_contains_all(params: ValuesParams, ctx: GradeContext) -> Grade:
    found = occurring(params.values, ctx.outputs.answer, case_sensitive=params.case_sensitive)
    missing = [v for v in params.values if v not in found]
    if missing:
        return passed(False, f"missing {len(missing)} of {len(params.values)}: {_quoted(missing)}")
    return passed(True, f"all {len(params.values)} values found")


def grade_contains_any(params: ValuesParams, ctx: GradeContext) -> Grade:
    found = occurring(params.values, ctx.outputs.answer, case_sensitive=params.case_sensitive)
    if found:
        return passed(True, f"found {_quoted(found)}")
    return passed(False, f"none of {len(params.values)} values found")


def grade_not_contains(params: ValuesParams, ctx: GradeContext) -> Grade:
    found = occurring(params.values, ctx.outputs.answer, case_sensitive=params.case_sensitive)
    if found:
        return passed(False, f"answer contains {_quoted(found)}")
    return passed(True, f"none of {len(params.values)} forbidden values found")


class RegexParams(Params):
    pattern: str = Field(min_length=1)
    flags: str = ""
    min_matches: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _compiles(self) -> RegexParams:
        compile_regex(self.pattern, self.flags)
        return self


def grade_regex(params: RegexParams, ctx: GradeContext) -> Grade:
    regex = compile_regex(params.pattern, params.flags)
    count = sum(1 for _ in regex.finditer(ctx.outputs.answer))
    ok = count >= params.min_matches
    return passed(
        ok, f"{count} match(es) of /{one_line(params.pattern, 80)}/, need {params.min_matches}"
    )


CONTAINS_ALL = Grader(GraderKind.CONTAINS_ALL, ValuesParams, grade_contains_all)
CONTAINS_ANY = Grader(GraderKind.CONTAINS_ANY, ValuesParams, grade_contains_any)
NOT_CONTAINS = Grader(GraderKind.NOT_CONTAINS, ValuesParams, grade_not_contains)
REGEX = Grader(GraderKind.REGEX, RegexParams, grade_regex)
