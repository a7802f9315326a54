"""How each arm's image was built, read from its runs' image references (the fragment that
workflows/prewarm/image_label.py defines): the report warns about cold builds and about
prewarmed images older than two hours (the hourly prewarm job may have stopped)."""

from __future__ import annotations

from workflows.catalog.models import ExperimentSpec
from workflows.prewarm.image_label import ImageOrigin, duration, split_reference
from workflows.records import RunResult
from workflows.report.report_models import ImageNote

STALE_AFTER_S = 2 * 3600


def image_notes(spec: ExperimentSpec, runs: list[RunResult]) -> list[ImageNote]:
    """One note per arm whose runs say how its image was built, in the spec's arm order."""
    origins = {}
    for run in runs:
        if run.arm not in origins and run.image:
            origin = split_reference(run.image)[1]
            if origin is not None:
                origins[run.arm] = origin
    return [_note(arm.name, origins[arm.name]) for arm in spec.arms if arm.name in origins]


def _note(arm: str, origin: ImageOrigin) -> ImageNote:
    return ImageNote(
        arm=arm,
        kind=origin.kind,
        build_s=origin.build_s,
        base=origin.base,
        newest_age_s=origin.newest_age_s,
        reason=origin.reason,
        warnings=warnings(arm, origin),
    )


def warnings(arm: str, origin: ImageOrigin) -> list[str]:
    """Cold and full builds (what they cost), and a prewarmed image older than two hours."""
    found = []
    if origin.kind == "cold":
        found.append(
            f"cold build: {duration(origin.build_s)} ({arm}: no prewarmed image is an ancestor "
            "of its commit)"
        )
    elif origin.kind == "full":
        deps = origin.reason.startswith("deps:")
        why = f"{origin.reason[5:]} changed" if deps else origin.reason.replace("-", " ")
        found.append(f"full build: {duration(origin.build_s)} ({arm}: {why})")
    age = origin.newest_age_s
    if age is not None and age > STALE_AFTER_S:
        found.append(
            f"the newest prewarmed image was {duration(age)} old when {arm} was built: "
            "is the hourly prewarm job running?"
        )
    return found
