"""A small world and a run's collected outputs on disk, as the collect stage writes them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from workflows.catalog.models import Case, Criterion, GraderKind, Rubric
from workflows.records import CriterionScore
from workflows.scoring import (
    OUT_DIR,
    WORLD_CHANGES_DIR,
    WORLD_DELETED_FILE,
    CollectedRun,
    Judge,
    grade_case,
    load_run_outputs,
)


def build_world(root: Path) -> Path:
    world = root / "world"
    (world / "documents").mkdir(parents=True)
    (world / "db").mkdir()
    (world / "world.toml").write_text('name = "w"\ndatabase = "db/matter.sqlite"\n')
    (world / "documents" / "lease.md").write_text("Annual rent: $84,000.\n")
    (world / "documents" / "nda.md").write_text("Mutual NDA, New York law.\n")
    with sqlite3.connect(world / "db" / "matter.sqlite") as db:
        db.execute("CREATE TABLE reviews (document TEXT, status TEXT)")
        db.execute("INSERT INTO reviews VALUES ('documents/nda.md', 'pending')")
    return world


class RunDir:
    """Writes a run's collected outputs: /out files, world changes, deletions."""

    def __init__(self, root: Path, world: Path) -> None:
        self.root = root
        self.world = world
        (root / OUT_DIR).mkdir(parents=True)

    def out(self, name: str, content: str | dict[str, Any] | list[Any]) -> RunDir:
        text = content if isinstance(content, str) else json.dumps(content)
        path = self.root / OUT_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return self

    def change(self, relative: str, content: str | bytes) -> Path:
        path = self.root / WORLD_CHANGES_DIR / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    def delete(self, *relative: str) -> RunDir:
        (self.root / WORLD_DELETED_FILE).write_text(json.dumps(list(relative)))
        return self

    def load(self) -> CollectedRun:
        return load_run_outputs(self.root, self.world)


def make_case(
    grader: str, params: dict[str, Any], *, name: str = "check", reference: str | None = None
) -> Case:
    criterion = Criterion(name=name, grader=GraderKind(grader), params=params)
    return Case(
        id="case-1",
        prompt="Do the task.",
        world="w",
        rubric=Rubric(criteria=(criterion,)),
        reference=reference,
    )


def grade_one(case: Case, run: RunDir, judge: Judge | None = None) -> CriterionScore:
    collected = run.load()
    (score,) = grade_case(case, collected.outputs, collected.world, judge)
    return score


def score_of(run: RunDir, grader: str, params: dict[str, Any]) -> float | None:
    return grade_one(make_case(grader, params), run).score
