"""What every grader is made of: a params model (static validation) and a grade function."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict, field_validator

from workflows.catalog.models import Case, GraderKind, World
from workflows.records import JudgeRecord
from workflows.scoring.judge_protocol import Judge
from workflows.scoring.outputs_layout import RunOutputs, WorldView, safe_relative


class CannotGrade(Exception):
    """Raised inside a grader when the rubric cannot be applied; becomes a RubricError naming the
    case and criterion. Never raise it for something the agent did."""


class Grade(NamedTuple):
    score: float | None
    rationale: str
    judge: JudgeRecord | None = None  # set by the llm grader: model, samples, tokens, cost


@dataclass(frozen=True)
class GradeContext:
    """Everything a grader may look at for one criterion of one run."""

    case: Case
    criterion: str
    outputs: RunOutputs
    world: WorldView
    judge: Judge | None = None


class Params(BaseModel):
    """Base for grader params: unknown keys and loose type coercions are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class RelativePath(Params):
    """Mixin validator for a `path` param that must stay inside its folder."""

    @field_validator("path", check_fields=False)
    @classmethod
    def _inside(cls, value: str) -> str:
        return safe_relative(value)


def compile_regex(pattern: str, flags: str = "") -> re.Pattern[str]:
    """Compile with flags given as letters from "ims"; ValueError with the reason otherwise."""
    unknown = set(flags) - set("ims")
    if unknown:
        raise ValueError(f"unknown regex flags {sorted(unknown)}; use a combination of i, m, s")
    bits = 0
    for letter in flags:
        bits |= {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}[letter]
    try:
        return re.compile(pattern, bits)
    except re.error as error:
        raise ValueError(f"invalid regex {pattern!r}: {error}") from None


def no_problems(params: Any, subject: Any) -> list[str]:
    return []


P = TypeVar("P", bound=Params)


@dataclass(frozen=True)
class Grader(Generic[P]):
    """A grader kind: `params` validates statically; `grade` scores one run.

    `check_case` and `check_world` find problems that need the case or the original world."""

    kind: GraderKind
    params: type[P]
    grade: Callable[[P, GradeContext], Grade]
    check_case: Callable[[P, Case], list[str]] = field(default=no_problems)
    check_world: Callable[[P, World], list[str]] = field(default=no_problems)


def passed(ok: bool, rationale: str) -> Grade:
    return Grade(1.0 if ok else 0.0, rationale)
