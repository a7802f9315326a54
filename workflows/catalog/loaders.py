"""Load worlds, datasets and `evalbot.toml` from disk, failing with file, field and expectation.

Layout (all data, no code):

    worlds/<name>/world.toml            name, description, database, permissions, acting_user
    worlds/<name>/...                   documents, database, blobs: anything the world holds
    datasets/<name>/dataset.toml        name, description, default_trials, world (default for cases)
    datasets/<name>/cases/<id>/case.toml   prompt, tags, attachments, world?, [[criteria]]
    datasets/<name>/cases/<id>/reference.md  optional reference answer
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.catalog.hashing import tree_version
from workflows.catalog.models import AgentRepoConfig, Case, Dataset, World
from workflows.catalog.names import is_name

WORLD_MANIFEST = "world.toml"
DATASET_MANIFEST = "dataset.toml"
CASE_FILE = "case.toml"
REFERENCE_FILE = "reference.md"
AGENT_CONFIG = "evalbot.toml"

M = TypeVar("M", bound=BaseModel)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise CatalogError(path, None, "file not found") from None
    except tomllib.TOMLDecodeError as error:
        raise CatalogError(path, None, f"not valid TOML ({error})") from None


def _validate(model: type[M], path: Path, data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise CatalogError.from_validation(path, error) from None


def list_worlds(root: Path) -> list[str]:
    return _names_with(root / "worlds", WORLD_MANIFEST)


def list_datasets(root: Path) -> list[str]:
    return _names_with(root / "datasets", DATASET_MANIFEST)


def _names_with(folder: Path, manifest: str) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / manifest).is_file())


def load_world(root: Path, name: str) -> World:
    folder = root / "worlds" / name
    if not _is_name(name) or not (folder / WORLD_MANIFEST).is_file():
        raise UnknownNameError("world", name, list_worlds(root))
    manifest = folder / WORLD_MANIFEST
    data = read_toml(manifest)
    data.setdefault("name", name)
    if data["name"] != name:
        raise CatalogError(manifest, "name", f"expected '{name}' (the folder's name)")
    world = _validate(World, manifest, {**data, "path": folder.resolve(), "version": ""})
    _check_world_paths(manifest, world)
    return world.model_copy(update={"version": tree_version(folder)})


def _is_name(name: str) -> bool:
    """A catalog name, never a path: no '/' or '..' walks out of the catalog (a label such as
    `eval:../../etc` comes from anyone who may label a PR). Boundaries check it first with
    `check_name`, which says the rule; here an invalid name is simply not in the catalog."""
    return is_name(name)


def _check_world_paths(manifest: Path, world: World) -> None:
    for field in ("database", "permissions"):
        relative = getattr(world, field)
        if relative is not None and not (world.path / relative).is_file():
            raise CatalogError(
                manifest, field, f"expected an existing file, '{relative}' is missing"
            )


def load_dataset(root: Path, name: str) -> Dataset:
    folder = root / "datasets" / name
    if not _is_name(name) or not (folder / DATASET_MANIFEST).is_file():
        raise UnknownNameError("dataset", name, list_datasets(root))
    manifest = folder / DATASET_MANIFEST
    data = read_toml(manifest)
    default_world = data.pop("world", None)
    data.setdefault("name", name)
    cases = [_load_case(case_dir, default_world) for case_dir in _case_dirs(folder)]
    if not cases:
        raise CatalogError(
            folder / "cases", None, "expected at least one case folder with case.toml"
        )
    return _validate(Dataset, manifest, {**data, "cases": cases})


def _case_dirs(dataset_folder: Path) -> list[Path]:
    cases = dataset_folder / "cases"
    if not cases.is_dir():
        return []
    return sorted(p for p in cases.iterdir() if (p / CASE_FILE).is_file())


def _load_case(case_dir: Path, default_world: str | None) -> Case:
    path = case_dir / CASE_FILE
    data = read_toml(path)
    data.setdefault("id", case_dir.name)
    if default_world is not None:
        data.setdefault("world", default_world)
    criteria = data.pop("criteria", None)
    data["rubric"] = {"criteria": criteria if criteria is not None else []}
    reference = case_dir / REFERENCE_FILE
    if reference.is_file():
        data["reference"] = reference.read_text(encoding="utf-8")
    case = _validate(Case, path, data)
    if case.id != case_dir.name:
        raise CatalogError(path, "id", f"expected '{case_dir.name}' (the folder's name)")
    return case


def load_agent_config(repo_dir: Path) -> AgentRepoConfig:
    path = repo_dir / AGENT_CONFIG
    return _validate(AgentRepoConfig, path, read_toml(path))


def parse_agent_config(text: str, origin: str = AGENT_CONFIG) -> AgentRepoConfig:
    """Parse `evalbot.toml` content read from a commit (e.g. `git show REF:evalbot.toml`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CatalogError(origin, None, f"not valid TOML ({error})") from None
    return _validate(AgentRepoConfig, Path(origin), data)
