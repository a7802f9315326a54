"""Scoring: deterministic graders and the LLM-judge hook, applied to a run's collected outputs.

    collected = load_run_outputs(outputs_dir, world_dir)
    scores = grade_case(case, collected.outputs, collected.world, judge=None)

See docs/graders.md for what each grader checks and for the outputs layout.
"""

from workflows.scoring.grade import failed_criteria, grade_case, validate_rubric
from workflows.scoring.graders.llm import NOT_JUDGED
from workflows.scoring.judge_protocol import Judge, JudgeRequest, JudgeUnavailable, JudgeVerdict
from workflows.scoring.outputs_layout import (
    OUT_DIR,
    WORLD_CHANGES_DIR,
    WORLD_DELETED_FILE,
    CollectedRun,
    RunOutputs,
    WorldView,
    load_run_outputs,
)
from workflows.scoring.registry import GRADERS
from workflows.scoring.scoring_errors import OutputsLayoutError, RubricError

__all__ = [
    "GRADERS",
    "NOT_JUDGED",
    "OUT_DIR",
    "WORLD_CHANGES_DIR",
    "WORLD_DELETED_FILE",
    "CollectedRun",
    "Judge",
    "JudgeRequest",
    "JudgeUnavailable",
    "JudgeVerdict",
    "OutputsLayoutError",
    "RubricError",
    "RunOutputs",
    "WorldView",
    "failed_criteria",
    "grade_case",
    "load_run_outputs",
    "validate_rubric",
]
