"""Catalog fixtures: a private copy of the tiny test catalog that a test may break."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

TINY_CATALOG = FIXTURES / "catalog"


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/catalog (worlds/tiny, datasets/tiny)."""
    root = tmp_path / "catalog"
    shutil.copytree(TINY_CATALOG, root)
    return root
