"""A world's version is its content hash: it changes with any file and with nothing else."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from workflows.catalog.loaders import load_world


def _version(root: Path) -> str:
    return load_world(root, "tiny").version


def test_version_is_stable_and_independent_of_location(catalog: Path, tmp_path: Path) -> None:
    first = _version(catalog)
    assert _version(catalog) == first
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(catalog, elsewhere)
    assert _version(elsewhere) == first


def test_touching_a_file_without_changing_it_keeps_the_version(catalog: Path) -> None:
    before = _version(catalog)
    os.utime(catalog / "worlds/tiny/documents/nda.md", (0, 0))
    assert _version(catalog) == before


def test_editing_a_document_changes_the_version(catalog: Path) -> None:
    before = _version(catalog)
    path = catalog / "worlds/tiny/documents/nda.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n5. Counterparts.\n", encoding="utf-8")
    assert _version(catalog) != before


def test_changing_the_database_changes_the_version(catalog: Path) -> None:
    before = _version(catalog)
    path = catalog / "worlds/tiny/db/tiny.sqlite"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert _version(catalog) != before


def test_adding_or_renaming_a_file_changes_the_version(catalog: Path) -> None:
    base = _version(catalog)
    docs = catalog / "worlds/tiny/documents"
    (docs / "nda.md").rename(docs / "nda-2024.md")
    renamed = _version(catalog)
    assert renamed != base
    (docs / "note.txt").write_text("call Harbor Grocers", encoding="utf-8")
    assert _version(catalog) not in {base, renamed}


def test_python_caches_do_not_change_the_version(catalog: Path) -> None:
    before = _version(catalog)
    cache = catalog / "worlds/tiny/__pycache__"
    cache.mkdir()
    (cache / "x.pyc").write_bytes(b"\0")
    assert _version(catalog) == before
