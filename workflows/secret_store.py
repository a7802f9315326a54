"""The local secret store: synced secret groups, readable only by the service, and the helper the
provision stage calls to turn a run's `sandbox.secrets` into environment variables.

Layout under `settings.secrets_dir` (mode 0700, files 0600):

    current -> gen-<id>          symlink, swapped atomically by `replace`
    gen-<id>/<group>.json        {"KEY": "value", ...}, one file per group
    .lock                        serialises writers

A writer builds a complete new generation beside the old one and then swaps the `current` link in
one rename, so readers see either every group before a sync or every group after it, never a mix.
`infra.secrets` writes through `replace`; the engine and the redactor only read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from workflows.settings import Settings

GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
DIR_MODE = 0o700
FILE_MODE = 0o600
CURRENT = "current"


class SecretStoreError(Exception):
    """The local secret store could not be read or written; `str()` names what, never a value."""


class MissingSecretGroup(SecretStoreError):
    """A run asked for a group that has never been synced."""

    def __init__(self, group: str, known: Iterable[str]) -> None:
        self.group = group
        listing = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"secret group '{group}' is not in the local secret store (synced groups: {listing}); "
            "add it to the mapping and run `evalbot secrets sync`"
        )


def check_group_name(name: str) -> str:
    if not GROUP_NAME.match(name):
        raise SecretStoreError(f"invalid secret group name '{name}': use a-z, 0-9, '.', '_', '-'")
    return name


class LocalSecretStore:
    """Secret groups kept as 0600 JSON files in a 0700 folder; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalSecretStore:
        return cls(settings.secrets_dir)

    def group_names(self) -> list[str]:
        with self._lock(shared=True) as held:
            return sorted(self._files()) if held else []

    def read_group(self, name: str) -> dict[str, str]:
        check_group_name(name)
        with self._lock(shared=True) as held:
            files = self._files() if held else {}
            if name not in files:
                raise MissingSecretGroup(name, files)
            return _read_values(files[name])

    def read_all(self) -> dict[str, dict[str, str]]:
        with self._lock(shared=True) as held:
            return self._read_all() if held else {}

    def replace(self, updates: Mapping[str, Mapping[str, str]]) -> None:
        """Write `updates` (group -> values) and keep every other group: all or nothing."""
        for name in updates:
            check_group_name(name)
        self._ensure_root()
        with self._lock(shared=False):
            merged: dict[str, Mapping[str, str]] = dict(self._read_all())
            merged.update(updates)
            self._swap_in(self._build_generation(merged))

    def _files(self) -> dict[str, Path]:
        generation = self._current()
        if generation is None:
            return {}
        return {p.stem: p for p in sorted(generation.glob("*.json"))}

    def _read_all(self) -> dict[str, dict[str, str]]:
        return {name: _read_values(path) for name, path in self._files().items()}

    def _current(self) -> Path | None:
        link = self.root / CURRENT
        if not link.is_symlink():
            return None
        return self.root / os.readlink(link)

    def _ensure_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        os.chmod(self.root, DIR_MODE)

    @contextlib.contextmanager
    def _lock(self, *, shared: bool) -> Iterator[bool]:
        """Readers share the lock, the writer holds it alone (it removes the old generation).
        Yields False, without locking, when a reader finds no store (nothing was ever written)."""
        path = self.root / ".lock"
        if shared and not path.exists():
            yield False
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield True
        finally:
            os.close(fd)

    def _build_generation(self, groups: Mapping[str, Mapping[str, str]]) -> Path:
        staging = self.root / f".staging-{uuid.uuid4().hex}"
        staging.mkdir(mode=DIR_MODE)
        try:
            for name, values in groups.items():
                _write_values(staging / f"{name}.json", values)
            _fsync_dir(staging)
            final = self.root / f"gen-{uuid.uuid4().hex}"
            staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return final

    def _swap_in(self, generation: Path) -> None:
        previous = self._current()
        temp_link = self.root / f".{CURRENT}-{uuid.uuid4().hex}"
        os.symlink(generation.name, temp_link)
        os.replace(temp_link, self.root / CURRENT)
        _fsync_dir(self.root)
        if previous is not None and previous != generation:
            shutil.rmtree(previous, ignore_errors=True)


def _read_values(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SecretStoreError(
            f"secret group file {path.name} is unreadable ({type(error).__name__})"
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SecretStoreError(f"secret group file {path.name} is not a JSON object of strings")
    return {str(k): v for k, v in data.items()}


def _write_values(path: Path, values: Mapping[str, str]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(dict(values), handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def resolve_run_secrets(settings: Settings, group_names: Iterable[str]) -> dict[str, str]:
    """Environment variables for one run: the values of exactly `group_names`.

    The engine passes only the groups the run may receive (a fork PR's runs: its dataset's
    fork-safe groups; docs/secrets.md, "Fork pull requests"). A group that was never synced raises
    `MissingSecretGroup` naming it; two groups defining the same variable differently raise
    `SecretStoreError` naming both groups and the variable (never the values).
    """
    store = LocalSecretStore.from_settings(settings)
    env: dict[str, str] = {}
    origin: dict[str, str] = {}
    for group in dict.fromkeys(group_names):
        for key, value in store.read_group(group).items():
            if key in env and env[key] != value:
                raise SecretStoreError(
                    f"secret groups '{origin[key]}' and '{group}' both set {key} differently"
                )
            env[key], origin[key] = value, group
    return env
