"""Every world and dataset in the repository loads, and every case points at a world that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO_ROOT
from workflows.catalog.loaders import list_datasets, list_worlds, load_dataset, load_world

ROOTS = [REPO_ROOT, FIXTURES / "catalog"]
WORLDS = [(root, name) for root in ROOTS for name in list_worlds(root)]
DATASETS = [(root, name) for root in ROOTS for name in list_datasets(root)]


def _id(item: tuple[Path, str]) -> str:
    root, name = item
    return f"{root.relative_to(REPO_ROOT).as_posix() or '.'}:{name}"


def test_the_demo_catalog_is_found() -> None:
    assert "acme-acquisition" in list_worlds(REPO_ROOT)
    assert "bar" in list_datasets(REPO_ROOT)
    assert {c.world for c in load_dataset(REPO_ROOT, "bar").cases} == {"acme-acquisition"}


def test_the_test_catalog_is_found() -> None:
    assert list_worlds(FIXTURES / "catalog") == ["tiny"]
    assert list_datasets(FIXTURES / "catalog") == ["tiny"]


@pytest.mark.parametrize("item", WORLDS, ids=_id)
def test_world_loads_with_a_version_and_its_files(item: tuple[Path, str]) -> None:
    root, name = item
    world = load_world(root, name)
    assert len(world.version) == 16
    assert world.path == (root / "worlds" / name).resolve()
    for relative in (world.database, world.permissions):
        if relative is not None:
            assert (world.path / relative).is_file()


@pytest.mark.parametrize("item", DATASETS, ids=_id)
def test_dataset_loads_and_its_cases_use_known_worlds(item: tuple[Path, str]) -> None:
    root, name = item
    dataset = load_dataset(root, name)
    known_worlds = set(list_worlds(root))
    assert dataset.cases
    assert len({c.id for c in dataset.cases}) == len(dataset.cases)
    for case in dataset.cases:
        assert case.world in known_worlds, f"{case.id} uses unknown world {case.world}"
        for attachment in case.attachments:
            assert (root / "worlds" / case.world / attachment).is_file(), attachment


def test_tiny_dataset_has_the_shape_engine_tests_rely_on() -> None:
    dataset = load_dataset(FIXTURES / "catalog", "tiny")
    assert dataset.default_trials == 2
    assert len(dataset.cases) == 5
    kinds = {c.grader.value for case in dataset.cases for c in case.rubric.criteria}
    assert {"file_created", "sql_query", "llm", "json_field_equals"} <= kinds
    assert all(case.reference for case in dataset.cases)
