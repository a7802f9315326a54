"""The score stage's grader: a run's collected outputs and its world, through the rubric."""

from __future__ import annotations

from pathlib import Path

from workflows.catalog.models import Case, World
from workflows.records import CriterionScore
from workflows.scoring import Judge, grade_case, load_run_outputs


class CaseGrader:
    def __init__(self, judge: Judge | None = None) -> None:
        self.judge = judge

    def __call__(self, case: Case, outputs_dir: Path, world: World) -> list[CriterionScore]:
        collected = load_run_outputs(outputs_dir, world.path, database=world.database)
        return grade_case(case, collected.outputs, collected.world, judge=self.judge)
