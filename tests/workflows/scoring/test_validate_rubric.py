from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workflows.catalog.models import Case, Criterion, GraderKind, Rubric, World
from workflows.scoring import GRADERS, validate_rubric

from .support import make_case


def world_model(world_dir: Path) -> World:
    return World(name="w", path=world_dir, version="v", database="db/matter.sqlite")


def test_every_grader_kind_is_registered() -> None:
    assert set(GRADERS) == set(GraderKind)


@pytest.mark.parametrize(
    ("grader", "params", "problem"),
    [
        ("contains_all", {}, "missing required param 'values'"),
        ("contains_all", {"values": ["a"], "casesensitive": True}, "unknown param 'casesensitive'"),
        ("contains_any", {"values": []}, "param 'values'"),
        ("not_contains", {"values": [" "]}, "must not be blank"),
        ("contains_all", {"values": "a"}, "param 'values'"),
        ("regex", {"pattern": "[a-"}, "invalid regex"),
        ("regex", {"pattern": "a", "flags": "x"}, "unknown regex flags"),
        ("number_within", {"expected": 1, "tolerance": -1}, "param 'tolerance'"),
        (
            "number_within",
            {"expected": 1, "tolerance": 0, "label": "a", "pattern": "(1)"},
            "one of",
        ),
        ("json_field_equals", {"path": "a..b", "expected": 1}, "dot path"),
        ("json_field_equals", {"path": "a", "expected": 1, "file": "../x"}, "relative path"),
        ("file_created", {"path": "/etc/passwd"}, "relative path"),
        ("sql_query", {"query": "SELECT 1"}, "missing required param 'expected'"),
        ("llm", {"prompt": "Q", "reference": True}, "reference"),
    ],
)
def test_static_problems(grader: str, params: dict[str, Any], problem: str) -> None:
    problems = validate_rubric(make_case(grader, params))
    assert len(problems) == 1
    assert problems[0].startswith("case 'case-1', criterion 'check': ")
    assert problem in problems[0]


def test_every_problem_of_every_criterion_is_listed() -> None:
    case = Case(
        id="c",
        prompt="p",
        world="w",
        rubric=Rubric(
            criteria=(
                Criterion(name="a", grader=GraderKind.REGEX, params={"pattern": "(", "x": 1}),
                Criterion(name="b", grader=GraderKind.CONTAINS_ALL, params={"values": ["ok"]}),
                Criterion(name="c", grader=GraderKind.NUMBER_WITHIN, params={}),
            )
        ),
    )
    problems = validate_rubric(case)
    assert [p.split(":")[0] for p in problems] == [
        "case 'c', criterion 'a'",
        "case 'c', criterion 'c'",
        "case 'c', criterion 'c'",
    ]


def test_world_checks(world_dir: Path) -> None:
    world = world_model(world_dir)
    fine = [
        ("sql_query", {"query": "SELECT count(*) FROM reviews", "expected": 1}),
        ("file_created", {"path": "drafts/new.md"}),
        ("file_changed", {"path": "documents/lease.md"}),
    ]
    for grader, params in fine:
        assert validate_rubric(make_case(grader, params), world) == []
    broken = [
        ("sql_query", {"query": "SELECT * FROM nope", "expected": 1}, "no such table"),
        ("sql_query", {"query": "SELEC 1", "expected": 1}, "syntax error"),
        ("sql_query", {"query": "SELECT 1", "expected": 1, "database": "x.db"}, "not a file"),
        ("file_created", {"path": "documents/lease.md"}, "already exists"),
        ("file_changed", {"path": "documents/none.md"}, "not a file"),
    ]
    for grader, params, problem in broken:
        (found,) = validate_rubric(make_case(grader, params), world)
        assert problem in found
