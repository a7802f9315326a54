"""Each case's reference answer gets full marks from its own rubric; an empty answer does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO_ROOT
from tests.datasets.reference_runs import case_dir, empty_run, reference_run
from workflows.catalog.loaders import load_dataset, load_world
from workflows.catalog.models import Case, Dataset, GraderKind
from workflows.records import weighted_score
from workflows.scoring import grade_case

CATALOGS = {"bar": REPO_ROOT, "tiny": FIXTURES / "catalog"}
EMPTY_SCORE_CEILING = 0.25


def _cases() -> list[tuple[str, Case]]:
    return [(name, case) for name, root in CATALOGS.items() for case in _dataset(name).cases]


def _dataset(name: str) -> Dataset:
    return load_dataset(CATALOGS[name], name)


def _id(item: tuple[str, Case]) -> str:
    return f"{item[0]}/{item[1].id}"


@pytest.mark.parametrize("item", _cases(), ids=_id)
def test_reference_answer_gets_full_marks(item: tuple[str, Case], tmp_path: Path) -> None:
    name, case = item
    root = CATALOGS[name]
    world = load_world(root, case.world)
    run = reference_run(case_dir(root, name, case), world, tmp_path / "outputs")
    scores = grade_case(case, run.outputs, run.world)
    failed = {s.name: s.rationale for s in scores if s.score is not None and s.score < 1.0}
    assert failed == {}
    judged = [s for s in scores if s.grader == GraderKind.LLM.value]
    assert all(s.score is None for s in judged), "with no judge, llm criteria are not judged"


@pytest.mark.parametrize("case", _dataset("bar").cases, ids=lambda c: c.id)
def test_empty_answer_scores_low(case: Case, tmp_path: Path) -> None:
    world = load_world(REPO_ROOT, case.world)
    run = empty_run(world, tmp_path / "outputs")
    score = weighted_score(grade_case(case, run.outputs, run.world))
    assert score is not None and score <= EMPTY_SCORE_CEILING


def test_every_reference_file_belongs_to_a_world_changing_or_json_case() -> None:
    """reference/out holds JSON answers, reference/world only what a case asks to change."""
    for name, root in CATALOGS.items():
        for case in _dataset(name).cases:
            extra = case_dir(root, name, case) / "reference"
            if not extra.exists():
                continue
            kinds = {c.grader for c in case.rubric.criteria}
            if (extra / "out").exists():
                assert GraderKind.JSON_FIELD_EQUALS in kinds or "json" in case.tags, case.id
            if (extra / "world").exists() or (extra / "world.sql").exists():
                assert kinds & {
                    GraderKind.FILE_CREATED,
                    GraderKind.FILE_CHANGED,
                    GraderKind.SQL_QUERY,
                }, case.id
