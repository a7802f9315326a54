"""json_field_equals: a field of a JSON file the agent wrote under /out equals `expected`."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator

from workflows.catalog.models import GraderKind
from workflows.scoring.graders.grader_base import Grade, GradeContext, Grader, Params, passed
from workflows.scoring.outputs_layout import RunOutputs, safe_relative
from workflows.scoring.text_helpers import lookup, loosely_equal, one_line


class JsonFieldParams(Params):
    path: str = Field(min_length=1, description="Dot path: a.b.0.c")
    expected: Any
    file: str = "answer.json"

    @field_validator("file")
    @classmethod
    def _inside_out(cls, value: str) -> str:
        return safe_relative(value)

    @field_validator("path")
    @classmethod
    def _dot_path(cls, value: str) -> str:
        if any(not part for part in value.split(".")):
            raise ValueError(f"expected a dot path like 'a.b.0.c', got '{value}'")
        return value


def read_json(outputs: RunOutputs, name: str) -> tuple[Any, str | None]:
    """(data, None) or (None, why it could not be read) for a JSON file under /out."""
    text = outputs.read_text(name)
    if text is None:
        return None, f"{name} is missing"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as error:
        return None, f"{name} is not valid JSON ({error.msg} at line {error.lineno})"


def grade_json_field(params: JsonFieldParams, ctx: GradeContext) -> Grade:
    data, problem = read_json(ctx.outputs, params.file)
    if problem is not None:
        return passed(False, problem)
    found, actual = lookup(data, params.path)
    if not found:
        return passed(False, f"{params.file} has no field '{params.path}'")
    if loosely_equal(actual, params.expected):
        return passed(True, f"'{params.path}' equals the expected value")
    shown = one_line(json.dumps(actual, ensure_ascii=False), 80)
    return passed(
        False, f"'{params.path}' is {shown}, expected {one_line(repr(params.expected), 80)}"
    )


JSON_FIELD_EQUALS = Grader(GraderKind.JSON_FIELD_EQUALS, JsonFieldParams, grade_json_field)
