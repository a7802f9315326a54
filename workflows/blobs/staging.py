"""Local staging folders for blob writes and reads: `<base>/.staging/<process>/…`, one folder per
worker process, so that a worker killed mid-collect leaves files its restart can find and
remove without touching those of a worker still running on the same host."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from workflows.blobs.base import safe_key
from workflows.file_systems import spread_subfolders
from workflows.process_owned import is_gone, this_process


def process_folder(base: Path) -> Path:
    return base / ".staging" / this_process()


def made_process_folder(base: Path) -> Path:
    """This process's staging folder, made at its first use. Each experiment's staging folder
    below it, and each experiment's folder of finished outputs in `base`, goes to a block group
    of its own (workflows/file_systems.py, `spread_subfolders`): away from those of earlier
    experiments and from the sandboxes' churn."""
    folder = process_folder(base)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        spread_subfolders(folder)
        spread_subfolders(base)
    return folder


def fresh_staging(base: Path, key: str) -> Path:
    """An empty folder of this process for `key`'s outputs."""
    staging = made_process_folder(base) / safe_key(key)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def scratch_folder(base: Path, prefix: str) -> Path:
    """A new temporary folder of this process (a download for a grader)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=made_process_folder(base)))


def reap_staging(base: Path) -> list[str]:
    """Remove the staging folders of processes that are gone; their names."""
    root = base / ".staging"
    reaped = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if is_gone(folder.name):  # also the folders of the layout before one per process
            shutil.rmtree(folder, ignore_errors=True)
            reaped.append(folder.name)
    return reaped
