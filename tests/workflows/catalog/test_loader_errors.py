"""Broken catalog files fail with a CatalogError that names the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.loaders import load_dataset, load_world

CASE = "datasets/tiny/cases/lease-rent/case.toml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"fixture changed: {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _dataset_error(catalog: Path) -> CatalogError:
    with pytest.raises(CatalogError) as caught:
        load_dataset(catalog, "tiny")
    return caught.value


def test_invalid_toml_names_the_file_and_the_line(catalog: Path) -> None:
    _edit(catalog / CASE, 'tags = ["extraction", "json"]', 'tags = ["extraction", "json"')
    error = _dataset_error(catalog)
    assert error.file == str(catalog / CASE)
    assert "not valid TOML" in str(error)
    assert re.search(r"line \d+", str(error))


def test_missing_prompt_names_the_field(catalog: Path) -> None:
    path = catalog / "datasets/tiny/cases/sale-plans/case.toml"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(x for x in lines if not x.startswith("prompt")), encoding="utf-8")
    error = _dataset_error(catalog)
    assert (error.file, error.field) == (str(path), "prompt")
    assert str(path) in str(error) and "prompt" in str(error)


def test_wrong_type_in_dataset_manifest(catalog: Path) -> None:
    manifest = catalog / "datasets/tiny/dataset.toml"
    _edit(manifest, "default_trials = 2", 'default_trials = "two"')
    error = _dataset_error(catalog)
    assert (error.file, error.field) == (str(manifest), "default_trials")


def test_wrong_type_in_criterion_weight(catalog: Path) -> None:
    _edit(catalog / CASE, "weight = 2.0", 'weight = "heavy"')
    error = _dataset_error(catalog)
    assert error.file == str(catalog / CASE)
    assert error.field == "rubric.criteria.0.weight"


def test_unknown_grader_kind(catalog: Path) -> None:
    _edit(catalog / CASE, 'grader = "number_within"', 'grader = "vibes"')
    error = _dataset_error(catalog)
    assert error.field == "rubric.criteria.0.grader"


def test_duplicate_criterion_name(catalog: Path) -> None:
    _edit(catalog / CASE, 'name = "citations"', 'name = "accuracy"')
    error = _dataset_error(catalog)
    assert error.file == str(catalog / CASE)
    assert error.field == "rubric.criteria"
    assert "accuracy" in error.problem


def test_unknown_key_in_case_is_rejected(catalog: Path) -> None:
    _edit(catalog / CASE, "tags =", 'difficulty = "hard"\ntags =')
    error = _dataset_error(catalog)
    assert error.field == "difficulty"


def test_case_without_criteria(catalog: Path) -> None:
    path = catalog / CASE
    text = path.read_text(encoding="utf-8")
    path.write_text(text.split("[[criteria]]")[0], encoding="utf-8")
    error = _dataset_error(catalog)
    assert (error.file, error.field) == (str(path), "rubric.criteria")


def test_case_id_must_match_its_folder(catalog: Path) -> None:
    _edit(catalog / CASE, "prompt =", 'id = "lease-rental"\nprompt =')
    error = _dataset_error(catalog)
    assert error.field == "id" and "lease-rent" in error.problem


def test_world_with_missing_database_file(catalog: Path) -> None:
    (catalog / "worlds/tiny/db/tiny.sqlite").unlink()
    with pytest.raises(CatalogError) as caught:
        load_world(catalog, "tiny")
    assert caught.value.file == str(catalog / "worlds/tiny/world.toml")
    assert caught.value.field == "database"


def test_world_name_must_match_its_folder(catalog: Path) -> None:
    _edit(catalog / "worlds/tiny/world.toml", 'name = "tiny"', 'name = "small"')
    with pytest.raises(CatalogError) as caught:
        load_world(catalog, "tiny")
    assert caught.value.field == "name"


def test_world_with_wrong_type(catalog: Path) -> None:
    _edit(catalog / "worlds/tiny/world.toml", 'acting_user = "ana"', "acting_user = 7")
    with pytest.raises(CatalogError) as caught:
        load_world(catalog, "tiny")
    assert caught.value.field == "acting_user"


def test_unknown_names_list_the_known_ones(catalog: Path) -> None:
    with pytest.raises(UnknownNameError, match="known worlds: tiny"):
        load_world(catalog, "huge")
    with pytest.raises(UnknownNameError, match="known datasets: tiny"):
        load_dataset(catalog, "bar")


@pytest.mark.parametrize("name", ["tiny/../tiny", "./tiny", "../datasets/tiny", "TINY", " tiny"])
def test_a_name_that_is_a_path_is_unknown_even_where_the_path_exists(
    catalog: Path, name: str
) -> None:
    """`eval:<name>` labels come from anyone who may label a PR: a name never walks the disk.
    `datasets/tiny/../tiny` exists on disk; it is still not a dataset name."""
    with pytest.raises(UnknownNameError, match="known datasets: tiny"):
        load_dataset(catalog, name)
    with pytest.raises(UnknownNameError, match="known worlds: tiny"):
        load_world(catalog, name.replace("datasets", "worlds"))
