"""file_created and file_changed: what the run did to its world."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from workflows.catalog.models import GraderKind, World
from workflows.scoring.graders.grader_base import Grade, GradeContext, Grader, Params, passed
from workflows.scoring.outputs_layout import safe_relative
from workflows.scoring.text_helpers import occurring, one_line


class FileParams(Params):
    path: str = Field(min_length=1, description="World-relative path.")
    contains: list[str] = Field(default_factory=list)
    case_sensitive: bool = False

    @field_validator("path")
    @classmethod
    def _inside_world(cls, value: str) -> str:
        return safe_relative(value)


def _missing_values(params: FileParams, path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = occurring(params.contains, text, case_sensitive=params.case_sensitive)
    return [v for v in params.contains if v not in found]


def _with_contents(params: FileParams, path: Path, what: str) -> Grade:
    missing = _missing_values(params, path)
    if missing:
        listed = one_line(", ".join(f"'{v}'" for v in missing), 160)
        return passed(False, f"{what}, but it lacks {listed}")
    extra = f" with all {len(params.contains)} values" if params.contains else ""
    return passed(True, f"{what}{extra}")


def grade_file_created(params: FileParams, ctx: GradeContext) -> Grade:
    if ctx.world.before(params.path) is not None:
        return passed(False, f"{params.path} already existed in the world")
    after = ctx.world.after(params.path)
    if after is None:
        return passed(False, f"{params.path} was not created")
    return _with_contents(params, after, f"{params.path} was created")


def grade_file_changed(params: FileParams, ctx: GradeContext) -> Grade:
    if ctx.world.before(params.path) is None:
        return passed(False, f"{params.path} did not exist before the run")
    if ctx.world.was_deleted(params.path):
        return passed(False, f"{params.path} was deleted")
    after = ctx.world.after(params.path)
    if after is None or not ctx.world.was_changed(params.path):
        return passed(False, f"{params.path} is unchanged")
    return _with_contents(params, after, f"{params.path} was changed")


def _must_be_absent(params: FileParams, world: World) -> list[str]:
    if (world.path / params.path).exists():
        return [f"{params.path} already exists in world '{world.name}', so it cannot be created"]
    return []


def _must_exist(params: FileParams, world: World) -> list[str]:
    if not (world.path / params.path).is_file():
        return [f"{params.path} is not a file in world '{world.name}', so it cannot change"]
    return []


FILE_CREATED = Grader(
    GraderKind.FILE_CREATED, FileParams, grade_file_created, check_world=_must_be_absent
)
FILE_CHANGED = Grader(
    GraderKind.FILE_CHANGED, FileParams, grade_file_changed, check_world=_must_exist
)
