"""Build a case's reference run in the collected-outputs layout (docs/graders.md, docs/worlds.md).

cases/<id>/reference.md           -> out/answer.md
cases/<id>/reference/out/<name>   -> out/<name>
cases/<id>/reference/world/<path> -> world_changes/<path>
cases/<id>/reference/world.sql    -> applied to a copy of the world's database, which goes to
                                     world_changes/<database>
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from workflows.catalog.models import Case, World
from workflows.scoring import CollectedRun, load_run_outputs

REFERENCE_DIR = "reference"


def case_dir(root: Path, dataset: str, case: Case) -> Path:
    return root / "datasets" / dataset / "cases" / case.id


def reference_run(case_folder: Path, world: World, dest: Path) -> CollectedRun:
    out = dest / "out"
    changes = dest / "world_changes"
    out.mkdir(parents=True)
    changes.mkdir()
    reference = case_folder / "reference.md"
    if reference.is_file():
        shutil.copy2(reference, out / "answer.md")
    extra = case_folder / REFERENCE_DIR
    _copy_tree(extra / "out", out)
    _copy_tree(extra / "world", changes)
    script = extra / "world.sql"
    if script.is_file():
        _apply_sql(script, world, changes)
    return load_run_outputs(dest, world.path)


def empty_run(world: World, dest: Path) -> CollectedRun:
    """An agent that wrote an empty answer and changed nothing."""
    (dest / "out").mkdir(parents=True)
    (dest / "out" / "answer.md").write_text("", encoding="utf-8")
    return load_run_outputs(dest, world.path)


def _copy_tree(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, dirs_exist_ok=True)


def _apply_sql(script: Path, world: World, changes: Path) -> None:
    if world.database is None:
        raise AssertionError(f"{script} needs a world database")
    target = changes / world.database
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(world.path / world.database, target)
    connection = sqlite3.connect(target)
    try:
        with connection:
            connection.executescript(script.read_text(encoding="utf-8"))
    finally:
        connection.close()
