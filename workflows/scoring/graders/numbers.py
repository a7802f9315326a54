"""number_within: a number extracted from the answer is within an absolute tolerance."""

from __future__ import annotations

import re

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
from workflows.scoring.graders.json_field import read_json
from workflows.scoring.outputs_layout import safe_relative
from workflows.scoring.text_helpers import first_number, lookup, parse_number


class NumberParams(Params):
    expected: float
    tolerance: float = Field(ge=0)
    pattern: str | None = Field(None, description="Regex with one group capturing the number.")
    label: str | None = Field(None, min_length=1, description="Take the first number after it.")
    json_path: str | None = Field(None, min_length=1, description="Dot path into `file`.")
    file: str = "answer.json"

    @field_validator("file")
    @classmethod
    def _inside_out(cls, value: str) -> str:
        return safe_relative(value)

    @model_validator(mode="after")
    def _one_source(self) -> NumberParams:
        chosen = [k for k in ("pattern", "label", "json_path") if getattr(self, k) is not None]
        if len(chosen) > 1:
            raise ValueError(f"give at most one of pattern, label, json_path (got {chosen})")
        if self.pattern is not None and compile_regex(self.pattern).groups != 1:
            raise ValueError("pattern must have exactly one capturing group (the number)")
        return self


def _from_text(params: NumberParams, answer: str) -> tuple[float | None, str]:
    if params.pattern is not None:
        match = compile_regex(params.pattern).search(answer)
        if match is None or match.group(1) is None:
            return None, "the pattern did not match"
        return parse_number(match.group(1)), "matched the pattern"
    if params.label is not None:
        words = [re.escape(w) for w in params.label.split()]
        found = re.search(r"\s+".join(words), answer, re.IGNORECASE)
        if found is None:
            return None, f"label '{params.label}' not found"
        return first_number(answer, found.end()), f"after '{params.label}'"
    return first_number(answer), "first number in the answer"


def _from_json(params: NumberParams, ctx: GradeContext, path: str) -> tuple[float | None, str]:
    data, problem = read_json(ctx.outputs, params.file)
    if problem is not None:
        return None, problem
    found, value = lookup(data, path)
    if not found:
        return None, f"{params.file} has no field '{path}'"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value), f"at '{path}'"
    return (parse_number(value) if isinstance(value, str) else None), f"at '{path}'"


def grade_number(params: NumberParams, ctx: GradeContext) -> Grade:
    if params.json_path is not None:
        value, where = _from_json(params, ctx, params.json_path)
    else:
        value, where = _from_text(params, ctx.outputs.answer)
    if value is None:
        return passed(False, f"no number found ({where})")
    slack = 1e-9 * max(1.0, abs(params.expected))  # so 1.0 is within 0.1 of 1.1 despite floats
    ok = abs(value - params.expected) <= params.tolerance + slack
    return passed(
        ok, f"found {value:g} ({where}); expected {params.expected:g} ± {params.tolerance:g}"
    )


NUMBER_WITHIN = Grader(GraderKind.NUMBER_WITHIN, NumberParams, grade_number)
