"""Dataset.select picks cases by id and by tag; unknown selectors fail listing the known ids."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES
from workflows.catalog.catalog_errors import UnknownNameError
from workflows.catalog.loaders import load_dataset
from workflows.catalog.models import Dataset


@pytest.fixture(scope="module")
def tiny() -> Dataset:
    return load_dataset(FIXTURES / "catalog", "tiny")


def _ids(cases: list) -> list[str]:
    return [c.id for c in cases]


def test_no_selector_selects_every_case_in_order(tiny: Dataset) -> None:
    assert _ids(tiny.select()) == sorted(c.id for c in tiny.cases)


def test_select_by_id(tiny: Dataset) -> None:
    assert _ids(tiny.select(["lease-rent"])) == ["lease-rent"]


def test_select_by_tag(tiny: Dataset) -> None:
    assert _ids(tiny.select(["tag:world-change"])) == ["consent-draft", "lease-review"]


def test_selectors_are_a_union_without_duplicates(tiny: Dataset) -> None:
    selected = tiny.select(["tag:extraction", "sale-plans", "lease-rent"])
    assert _ids(selected) == ["lease-rent", "lease-review", "sale-plans", "supply-governing-law"]


def test_unknown_selector_lists_known_cases(tiny: Dataset) -> None:
    with pytest.raises(UnknownNameError) as caught:
        tiny.select(["lease-rent", "tag:nope"])
    assert caught.value.name == "tag:nope"
    assert "supply-governing-law" in str(caught.value)
