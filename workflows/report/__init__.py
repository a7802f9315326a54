"""The experiment report as data: paired comparisons per criterion, errors apart, cost and time.

`build_report(spec, runs)` works on any subset of the cells, so the same report describes a
running experiment (with `progress.complete = False`) and a finished one. It is JSON-serialisable
(`report.model_dump(mode="json")`) and rendered to Markdown and HTML by bot/render.
"""

from workflows.report.build import build_report, build_report_and_table
from workflows.report.report_models import (
    ArmComparison,
    ArmInfo,
    ArmSummary,
    CaseMove,
    ComparisonRow,
    ErrorClass,
    ExperimentReport,
    FrontierPoint,
    JudgeUsage,
    NoiseSummary,
    PassKRow,
    Progress,
    ResourceChange,
    RubricCheck,
    RunErrorItem,
    TrialsMde,
)
from workflows.report.table import OVERALL

__all__ = [
    "OVERALL",
    "ArmComparison",
    "ArmInfo",
    "ArmSummary",
    "CaseMove",
    "ComparisonRow",
    "ErrorClass",
    "ExperimentReport",
    "FrontierPoint",
    "JudgeUsage",
    "NoiseSummary",
    "PassKRow",
    "Progress",
    "ResourceChange",
    "RubricCheck",
    "RunErrorItem",
    "TrialsMde",
    "build_report",
    "build_report_and_table",
]
