"""Where a run's collected outputs live on disk, and read-only views of them for the graders.

The collect stage writes, under one outputs folder per run:

    <outputs>/out/<name>                  the agent's /out, as written (answer.md, answer.json, ...)
    <outputs>/world_changes/<relative>    every world file the run created or modified, as it ended
    <outputs>/world_deleted.json          a JSON list of world-relative paths the run deleted

The world after the run is therefore: the original world folder, overlaid with `world_changes`,
minus `world_deleted.json`. Nothing here writes anywhere.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import NamedTuple

from workflows.scoring.scoring_errors import OutputsLayoutError

OUT_DIR = "out"
WORLD_CHANGES_DIR = "world_changes"
WORLD_DELETED_FILE = "world_deleted.json"
ANSWER_FILES = ("answer.md", "answer.json")
WORLD_MANIFEST = "world.toml"


def safe_relative(path: str) -> str:
    """`path` as a normalised relative posix path; ValueError if it is empty, absolute or climbs
    out of its root with `..`."""
    pure = PurePosixPath(path.replace("\\", "/"))
    if not path.strip() or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"expected a relative path inside the folder, got '{path}'")
    normalised = pure.as_posix()
    if normalised in {"", "."}:
        raise ValueError(f"expected a relative path inside the folder, got '{path}'")
    return normalised


def _file_under(root: Path, relative: str) -> Path | None:
    """The regular file at `root/relative`, or None; never follows a link out of `root`."""
    candidate = root / safe_relative(relative)
    try:
        resolved = candidate.resolve(strict=True)
    except (FileNotFoundError, RuntimeError, OSError):
        return None
    if not resolved.is_relative_to(root.resolve()) or not resolved.is_file():
        return None
    return resolved


@dataclass(frozen=True)
class RunOutputs:
    """The run's collected /out folder."""

    out_dir: Path

    def path(self, name: str) -> Path | None:
        """The file `name` (relative to /out) if the agent wrote it."""
        return _file_under(self.out_dir, name)

    def read_text(self, name: str) -> str | None:
        found = self.path(name)
        return None if found is None else found.read_text(encoding="utf-8", errors="replace")

    @cached_property
    def answer(self) -> str:
        """`answer.md` if present, else `answer.json` as text, else ""."""
        for name in ANSWER_FILES:
            text = self.read_text(name)
            if text is not None:
                return text
        return ""


@dataclass(frozen=True)
class WorldView:
    """The world after the run: `original` overlaid with `changes`, minus `deleted`.

    `database` is the world-relative path of the world's SQLite database (world.toml), if any."""

    original: Path
    changes: Path
    deleted: frozenset[str] = frozenset()
    database: str | None = None

    def before(self, relative: str) -> Path | None:
        """The file as it was in the original world, or None if it did not exist."""
        return _file_under(self.original, relative)

    def after(self, relative: str) -> Path | None:
        """The file as the run left it, or None if it does not exist after the run."""
        key = safe_relative(relative)
        if key in self.deleted:
            return None
        return _file_under(self.changes, key) or self.before(key)

    def was_deleted(self, relative: str) -> bool:
        return safe_relative(relative) in self.deleted

    def was_created(self, relative: str) -> bool:
        return self.before(relative) is None and self.after(relative) is not None

    def was_changed(self, relative: str) -> bool:
        """The file existed before, still exists, and its bytes differ."""
        before, after = self.before(relative), self.after(relative)
        if before is None or after is None or after == before:
            return False
        return _differ(before, after)


def _differ(a: Path, b: Path, chunk: int = 1 << 20) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return True
    with a.open("rb") as left, b.open("rb") as right:
        while True:
            x, y = left.read(chunk), right.read(chunk)
            if x != y:
                return True
            if not x:
                return False


class CollectedRun(NamedTuple):
    outputs: RunOutputs
    world: WorldView


def load_run_outputs(
    outputs_dir: Path, world_dir: Path, *, database: str | None = None
) -> CollectedRun:
    """Views of one run's collected outputs (layout above) and of its world after the run.

    `database` defaults to the `database` key of `world_dir/world.toml` when that file exists."""
    if not outputs_dir.is_dir():
        raise OutputsLayoutError(f"outputs folder {outputs_dir} does not exist")
    if not world_dir.is_dir():
        raise OutputsLayoutError(f"world folder {world_dir} does not exist")
    world = WorldView(
        original=world_dir,
        changes=outputs_dir / WORLD_CHANGES_DIR,
        deleted=_read_deleted(outputs_dir / WORLD_DELETED_FILE),
        database=database if database is not None else _world_database(world_dir),
    )
    return CollectedRun(RunOutputs(outputs_dir / OUT_DIR), world)


def _read_deleted(path: Path) -> frozenset[str]:
    if not path.is_file():
        return frozenset()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise ValueError("expected a JSON list of relative paths")
        return frozenset(safe_relative(p) for p in data)
    except ValueError as error:  # JSONDecodeError is a ValueError
        raise OutputsLayoutError(f"{path} is not a JSON list of relative paths ({error})") from None


def _world_database(world_dir: Path) -> str | None:
    manifest = world_dir / WORLD_MANIFEST
    if not manifest.is_file():
        return None
    try:
        with manifest.open("rb") as handle:
            value = tomllib.load(handle).get("database")
    except tomllib.TOMLDecodeError as error:
        raise OutputsLayoutError(f"{manifest} is not valid TOML ({error})") from None
    return value if isinstance(value, str) else None
