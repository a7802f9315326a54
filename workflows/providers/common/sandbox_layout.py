"""The host folder of one sandbox (shared by the `local` and `process` providers).

    <sandbox_dir>/<id>/
        world/      private copy of the case's world          -> /world
        case/       case.json and attachments                 -> /case
        out/        what the agent writes, logs, .state.json  -> /out
        meta.json   spec, uid, runner pid (root-only: it holds the spec's env)
        runner.log  the launcher's and runner's own stderr (never shown to the agent)

Sandbox ids are `<slug of run id>-<digest of run id>-<random hex>`: a retried provision never
collides with a sandbox an earlier attempt left behind, the sandboxes of a run can be found by
their id even before their metadata exists, and ids are safe as folder and cgroup names.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from workflows.file_systems import spread_subfolders
from workflows.providers.base import (
    RunSandbox,
    SandboxCreateError,
    SandboxError,
    SandboxNotFound,
    SandboxSpec,
)
from workflows.providers.common import small_files
from workflows.providers.common.tree_copy import copy_tree

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}-[0-9a-f]{12}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
NEW_PRIVATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
SANDBOX_ROOTS = ("repo", "world", "case", "out")
SLUG_FOLD = re.compile(r"[^a-z0-9]+")


POOL_RUN_ID = "pool"  # the run id warm-pool sandboxes are created under, until claimed


def sandbox_slug(text: str) -> str:
    """The readable start of sandbox ids: lowercase, punctuation folded, at most 40 characters."""
    return SLUG_FOLD.sub("-", text.lower()).strip("-")[:40].strip("-") or "sandbox"


@functools.lru_cache(maxsize=4096)
def run_prefix(run_id: str) -> str:
    """What every sandbox id of `run_id` starts with: its slug and a digest of the whole run id
    (slugs are cut short and fold punctuation; the digest keeps runs apart)."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
    return f"{sandbox_slug(run_id)}-{digest}-"


def make_sandbox_dir(sandbox_dir: Path) -> None:
    """The providers' folder of sandboxes, each sandbox made below it later in a block group of
    its own where the file system can (workflows/file_systems.py, `spread_subfolders`)."""
    sandbox_dir.mkdir(parents=True, exist_ok=True)
    spread_subfolders(sandbox_dir)


def new_sandbox_id(run_id: str) -> str:
    return run_prefix(run_id) + secrets.token_hex(6)


def run_sandboxes(sandbox_dir: Path) -> list[RunSandbox]:
    """Every sandbox below `sandbox_dir` created for a run, with the experiment and run its
    labels name (warm-pool sandboxes not yet claimed and ones without metadata are not listed:
    `reap_orphans` and `sandboxes_of` deal with those)."""
    found = []
    for folder in sorted(sandbox_dir.iterdir()) if sandbox_dir.is_dir() else ():
        if not ID_PATTERN.fullmatch(folder.name):
            continue
        try:
            meta = read_meta(Layout(folder))
        except SandboxError:
            continue
        labels = meta.get("labels") or {}
        if meta.get("run_id") in (None, POOL_RUN_ID):
            continue
        experiment, run = str(labels.get("experiment", "")), str(labels.get("run", ""))
        found.append(RunSandbox(id=folder.name, experiment=experiment, run=run))
    return found


def sandboxes_of(sandbox_dir: Path, run_id: str) -> list[str]:
    """Ids of the sandboxes below `sandbox_dir` that belong to `run_id`: their metadata says so
    (pool sandboxes were claimed for it), or their id does and they have no readable metadata
    (cut off mid-create, before it was written)."""
    prefix = run_prefix(run_id)
    candidates = (prefix, run_prefix(POOL_RUN_ID))  # pool sandboxes say whose they are in meta
    found = []
    for name in folder_names(sandbox_dir):  # every sandbox in flight: names, not paths
        if not (name.startswith(candidates) and ID_PATTERN.fullmatch(name)):
            continue
        try:
            owner = read_meta(Layout(sandbox_dir / name)).get("run_id")
        except SandboxError:
            owner = run_id if name.startswith(prefix) else None
        if owner == run_id:
            found.append(name)
    return sorted(found)


def folder_names(folder: Path) -> list[str]:
    """The names in `folder`; none if it does not exist (or is no folder)."""
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def check_sandbox_id(sandbox_id: str) -> str:
    if not ID_PATTERN.fullmatch(sandbox_id):
        raise SandboxNotFound(f"no sandbox has the id {sandbox_id!r} (not a sandbox id)")
    return sandbox_id


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def world(self) -> Path:
        return self.root / "world"

    @property
    def case(self) -> Path:
        return self.root / "case"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def meta(self) -> Path:
        return self.root / "meta.json"

    @property
    def log(self) -> Path:
        return self.root / "runner.log"

    def roots(self, repo: Path) -> dict[str, Path]:
        """Sandbox root name -> host folder."""
        return {"repo": repo, "world": self.world, "case": self.case, "out": self.out}


def spec_to_meta(spec: SandboxSpec) -> dict[str, Any]:
    return {
        "run_id": spec.run_id,
        "image": spec.image,
        "world_dir": str(spec.world_dir),
        "limits": spec.limits.as_dict(),
        "env": dict(spec.env),
        "allow_domains": list(spec.allow_domains),
        "labels": dict(spec.labels),
    }


def write_meta(layout: Layout, meta: Mapping[str, Any]) -> None:
    """Atomically, readable by root only (the spec's env may hold secrets)."""
    tmp = f"{layout.root}/.meta.json.{secrets.token_hex(4)}"
    small_files.write_bytes(tmp, json.dumps(meta).encode(), NEW_PRIVATE_FILE, 0o600)
    os.replace(tmp, layout.meta)


def read_meta(layout: Layout) -> dict[str, Any]:
    try:
        data = json.loads(small_files.read_bytes(layout.meta))
    except FileNotFoundError:
        raise SandboxNotFound(f"sandbox {layout.root.name} does not exist (any more)") from None
    except (OSError, ValueError) as error:
        raise SandboxError(f"sandbox {layout.root.name} has unreadable metadata: {error}") from None
    if not isinstance(data, dict):
        raise SandboxError(f"sandbox {layout.root.name} has malformed metadata")
    return data


def case_file_path(case_dir: Path, name: str) -> Path:
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\x00" in name:
        raise SandboxCreateError(f"case file name {name!r} must be a relative path inside /case")
    return case_dir.joinpath(*parts)


def write_case_files(case_dir: Path, files: Mapping[str, bytes]) -> None:
    case_dir.mkdir(mode=0o755, exist_ok=True)
    for name, content in files.items():
        path = case_file_path(case_dir, name)
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o644)


def copy_world_blocking(source: Path, dest: Path, owner: tuple[int, int] | None = None) -> None:
    """A private copy of the world (tree_copy.py: in this process, blocks shared where the file
    system allows), its entries given to `owner` (uid, gid) if set."""
    if not source.is_dir():
        raise SandboxCreateError(f"world folder {source} does not exist")
    try:
        copy_tree(source, dest, owner)
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise SandboxCreateError(
            f"could not copy the world {source.name}: {error.strerror or error}{where}"
        ) from None


def tree_size(path: Path) -> int:
    """Bytes the files below `path` occupy (4 KiB blocks, plus one block per folder)."""
    total = 0
    for folder, dirs, files in os.walk(path):
        total += 4096 * (1 + len(dirs))
        for name in files:
            with contextlib.suppress(OSError):
                total += -(-os.lstat(os.path.join(folder, name)).st_size // 4096) * 4096
    return total


def build_env(
    base: Mapping[str, str], *layers: Mapping[str, str], fixed: Mapping[str, str]
) -> dict[str, str]:
    """`base`, then each layer (later wins), then `fixed` (the EVALBOT_*_DIR paths) on top."""
    env = dict(base)
    for layer in layers:
        for name, value in layer.items():
            if not ENV_NAME.fullmatch(name):
                raise SandboxError(f"environment variable name {name!r} is not a valid name")
            if "\x00" in value:
                raise SandboxError(f"environment variable {name} contains a NUL byte")
            env[name] = value
    env.update(fixed)
    return env


def dir_env(paths: Mapping[str, str]) -> dict[str, str]:
    return {f"EVALBOT_{name.upper()}_DIR": path for name, path in paths.items()}
