"""The one name check (workflows/catalog/names.py) and the catalog files, the config boundary:
a case's `world` or a dataset's `name` breaking the rule fails with the file, the field and the
rule, and no world outside the catalog is loaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.disk_watch import inside, touched
from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.loaders import load_dataset, load_world
from workflows.catalog.names import InvalidNameError, check_name, is_name

BAD = ["../../outside", "..", "a/b", "ti\x00ny", "t\u0456ny", "\uff54iny", "tiny\u202e",
       "a" * 10 * 1024, "a" * 101, "", "-x", "Tiny", "tiny\n", " tiny"]  # fmt: skip
GOOD = ["tiny", "a", "0.1_x-y", "a" * 100]


@pytest.mark.parametrize("name", GOOD)
def test_good_names_pass(name: str) -> None:
    assert is_name(name) and check_name("dataset", name) == name


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused_with_the_rule_and_a_safe_quote(name: str) -> None:
    assert not is_name(name)
    with pytest.raises(InvalidNameError) as caught:
        check_name("world", name)
    message = str(caught.value)
    assert message.startswith("world name ") and "lowercase ASCII letters" in message
    assert message.isascii() and message.isprintable() and len(message) < 300


@pytest.fixture
def outside(catalog: Path) -> Path:
    """A valid world beside the catalog, where `../../outside` from `worlds/` leads."""
    world = catalog.parent / "outside"
    shutil.copytree(catalog / "worlds" / "tiny", world)
    (world / "world.toml").write_text((world / "world.toml").read_text().replace("tiny", "outside"))
    return world


def test_a_case_world_that_walks_out_of_the_catalog_fails_with_file_and_field(
    catalog: Path, outside: Path
) -> None:
    case = catalog / "datasets/tiny/cases/lease-rent/case.toml"
    case.write_text('world = "../../outside"\n' + case.read_text())
    with touched() as paths, pytest.raises(CatalogError) as caught:
        load_dataset(catalog, "tiny")
    assert caught.value.file == str(case) and caught.value.field == "world"
    assert "[a-z0-9]" in str(caught.value)  # the rule, as the pattern
    assert not [p for p in paths if inside(p, outside)]


@pytest.mark.parametrize("name", ["../../outside", "t\u0456ny", "a" * 10 * 1024])
def test_load_world_refuses_names_outside_the_rule(catalog: Path, outside: Path, name: str) -> None:
    with touched() as paths, pytest.raises(UnknownNameError):
        load_world(catalog, name)
    assert not [p for p in paths if inside(p, outside)]


def test_a_dataset_name_over_the_length_limit_fails_with_file_and_field(catalog: Path) -> None:
    manifest = catalog / "datasets/tiny/dataset.toml"
    manifest.write_text(manifest.read_text().replace('name = "tiny"', f'name = "{"a" * 101}"'))
    with pytest.raises(CatalogError) as caught:
        load_dataset(catalog, "tiny")
    assert caught.value.field == "name" and "at most 100" in str(caught.value)


def test_fork_safe_groups_must_be_declared_secret_groups(catalog: Path) -> None:
    manifest = catalog / "datasets/tiny/dataset.toml"
    manifest.write_text(
        manifest.read_text()
        + 'secret_groups = ["llm-keys"]\nfork_safe_secret_groups = ["search"]\n'
    )
    with pytest.raises(CatalogError) as caught:
        load_dataset(catalog, "tiny")
    assert "['search'] are not in secret_groups" in str(caught.value)
