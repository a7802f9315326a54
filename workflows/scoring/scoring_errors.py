"""Errors raised by scoring. A rubric that cannot be applied is never a 0 for the agent."""

from __future__ import annotations


class RubricError(Exception):
    """A criterion could not be graded because of the rubric itself (bad params, invalid regex,
    SQL error, missing world file). `str()` names the case and criterion in one sentence."""

    def __init__(self, case_id: str, criterion: str, problem: str) -> None:
        self.case_id = case_id
        self.criterion = criterion
        self.problem = problem
        super().__init__(f"case '{case_id}', criterion '{criterion}': {problem}")


class OutputsLayoutError(ValueError):
    """A collected outputs folder does not follow the layout in scoring/outputs_layout.py."""
