"""Content hashes: a folder's version is the hash of its files' relative paths and contents."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def tree_files(root: Path) -> list[Path]:
    """Regular files below `root`, sorted, ignoring symlinks and caches."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
    )


def tree_hashes(root: Path) -> dict[str, str]:
    """`relative posix path -> sha256` of every file below `root`."""
    return {p.relative_to(root).as_posix(): file_sha256(p) for p in tree_files(root)}


def tree_version(root: Path) -> str:
    digest = hashlib.sha256()
    for relative, file_hash in tree_hashes(root).items():
        digest.update(f"{relative}\0{file_hash}\n".encode())
    return digest.hexdigest()[:16]
