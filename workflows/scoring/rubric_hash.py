"""The fingerprint of a criterion's definition, stored with every score ("which ruler was used").

Two scores of one criterion with different hashes were taken with different rulers: the grader,
its params, the weight, or (for a judge that sees it) the case's reference answer changed. The
regrade command and the report compare these hashes with the current catalog.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from workflows.catalog.models import Case, Criterion, GraderKind


def criterion_hash(case: Case, criterion: Criterion) -> str:
    """A short, stable hash of what decides this criterion's score for this case."""
    definition: dict[str, Any] = {
        "name": criterion.name,
        "grader": criterion.grader.value,
        "weight": criterion.weight,
        "params": criterion.params,
    }
    if criterion.floor:  # only when set, so criteria without one keep their hashes
        definition["floor"] = criterion.floor
    if criterion.grader is GraderKind.LLM and criterion.params.get("reference"):
        definition["reference"] = case.reference
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def rubric_hashes(cases: list[Case] | tuple[Case, ...]) -> dict[tuple[str, str], str]:
    """`(case id, criterion name) -> hash` for every criterion of every case."""
    return {
        (case.id, c.name): criterion_hash(case, c) for case in cases for c in case.rubric.criteria
    }
