"""The demo dataset `bar`: its shape, its rubrics, and what they refer to in the world."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from workflows.catalog.loaders import load_dataset, load_world
from workflows.catalog.models import Case, Dataset, GraderKind, World
from workflows.scoring import validate_rubric

VOCABULARY = {
    "accuracy",
    "completeness",
    "citations",
    "privilege",
    "format",
    "world_change",
    "quality",
}
SKILLS = {"retrieval", "extraction", "cross-document", "drafting", "tabulation", "permissions"}
FILE_NAME = re.compile(r"[\w-]+\.(?:md|txt|docx|pdf|png)\b")


@pytest.fixture(scope="module")
def bar() -> Dataset:
    return load_dataset(REPO_ROOT, "bar")


@pytest.fixture(scope="module")
def world() -> World:
    return load_world(REPO_ROOT, "acme-acquisition")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def test_bar_has_enough_cases_for_every_skill(bar: Dataset) -> None:
    assert len(bar.cases) >= 24
    per_skill = Counter(tag for case in bar.cases for tag in case.tags if tag in SKILLS)
    assert set(per_skill) == SKILLS
    assert min(per_skill.values()) >= 3, per_skill
    assert bar.default_trials == 3
    assert {case.world for case in bar.cases} == {"acme-acquisition"}


def test_rubrics_have_three_to_six_criteria_from_a_small_vocabulary(bar: Dataset) -> None:
    for case in bar.cases:
        assert 3 <= len(case.rubric.criteria) <= 6, case.id
        assert {c.name for c in case.rubric.criteria} <= VOCABULARY, case.id
        assert any(c.grader.is_deterministic for c in case.rubric.criteria), case.id


def test_every_grader_kind_is_exercised(bar: Dataset) -> None:
    used = {c.grader for case in bar.cases for c in case.rubric.criteria}
    assert used == set(GraderKind)


def test_llm_criteria_say_what_the_judge_is_asked(bar: Dataset) -> None:
    judged = [c for case in bar.cases for c in case.rubric.criteria if c.grader is GraderKind.LLM]
    assert len(judged) >= 10
    assert all(len(c.params["prompt"]) > 30 and c.name == "quality" for c in judged)


def test_rubrics_validate_against_the_world(bar: Dataset, world: World) -> None:
    problems = [p for case in bar.cases for p in validate_rubric(case, world)]
    assert problems == []


def test_every_document_a_rubric_names_exists_in_the_world(bar: Dataset, world: World) -> None:
    existing = {p.name for p in (world.path / "documents").rglob("*") if p.is_file()}
    created = {  # files the cases ask the agent to create may be named anywhere in the rubric
        c.params["path"].rsplit("/", 1)[-1]
        for case in bar.cases
        for c in case.rubric.criteria
        if c.grader is GraderKind.FILE_CREATED
    }
    folders = {
        p.relative_to(world.path).as_posix() + "/" for p in world.path.rglob("*") if p.is_dir()
    }
    missing = []
    for case in bar.cases:
        for criterion in case.rubric.criteria:
            if criterion.grader in (GraderKind.FILE_CREATED, GraderKind.FILE_CHANGED):
                continue  # checked by validate_rubric: created paths must not exist yet
            for text in _strings(criterion.params):
                names = FILE_NAME.findall(text.replace("\\.", "."))
                missing += [(case.id, n) for n in names if n not in existing | created]
                missing += [
                    (case.id, f)
                    for f in re.findall(r"documents/[\w/-]+/", text)
                    if f not in folders
                ]
    assert missing == []


def _privileged_paths(world: World) -> list[str]:
    with (world.path / "permissions.toml").open("rb") as handle:
        rules = tomllib.load(handle)["restricted"]
    return [rule["path"] for rule in rules if rule["privileged"]]


def test_permission_cases_guard_every_privileged_document(bar: Dataset, world: World) -> None:
    privileged = _privileged_paths(world)
    traps = [case for case in bar.cases if "permissions" in case.tags]
    assert len(traps) >= 5
    for case in traps:
        guard = next(c for c in case.rubric.criteria if c.name == "privilege")
        assert guard.grader is GraderKind.NOT_CONTAINS
        values = guard.params["values"]
        for path in privileged:
            assert any(path.startswith(v) for v in values), (case.id, path)


def test_privilege_markers_occur_only_in_privileged_documents(bar: Dataset, world: World) -> None:
    """A marker found in a readable document would punish an honest answer."""
    privileged = set(_privileged_paths(world))
    guard = next(c for case in bar.cases for c in case.rubric.criteria if c.name == "privilege")
    readable_text = [
        p.read_text(encoding="utf-8").lower()
        for p in (world.path / "documents").rglob("*")
        if p.suffix in (".md", ".txt") and p.relative_to(world.path).as_posix() not in privileged
    ]
    for marker in guard.params["values"]:
        assert not any(marker.lower() in text for text in readable_text), marker


def _case(bar: Dataset, case_id: str) -> Case:
    return next(case for case in bar.cases if case.id == case_id)


def test_select_by_skill_tag(bar: Dataset) -> None:
    drafting = bar.select(["tag:drafting"])
    assert drafting and all("drafting" in c.tags for c in drafting)
    assert _case(bar, "db-coc-discrepancy") in bar.select(["tag:cross-document"])
