"""The grader registry: one `Grader` per GraderKind."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from workflows.catalog.models import GraderKind
from workflows.scoring.graders.files import FILE_CHANGED, FILE_CREATED
from workflows.scoring.graders.grader_base import Grader
from workflows.scoring.graders.json_field import JSON_FIELD_EQUALS
from workflows.scoring.graders.llm import LLM
from workflows.scoring.graders.numbers import NUMBER_WITHIN
from workflows.scoring.graders.sql import SQL_QUERY
from workflows.scoring.graders.text import CONTAINS_ALL, CONTAINS_ANY, NOT_CONTAINS, REGEX

_ALL: tuple[Grader[Any], ...] = (
    CONTAINS_ALL,
    CONTAINS_ANY,
    NOT_CONTAINS,
    REGEX,
    NUMBER_WITHIN,
    JSON_FIELD_EQUALS,
    FILE_CREATED,
    FILE_CHANGED,
    SQL_QUERY,
    LLM,
)

GRADERS: Mapping[GraderKind, Grader[Any]] = MappingProxyType({g.kind: g for g in _ALL})


def grader_for(kind: GraderKind) -> Grader[Any]:
    return GRADERS[kind]
