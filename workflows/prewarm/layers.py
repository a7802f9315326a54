"""Copy-on-write starts from a prewarmed snapshot: an overlayfs mount, or a plain copy.

overlay   `mount -t overlay` with the snapshot as the read-only lower layer and a per-commit upper
          layer: milliseconds whatever the size of the build (a venv with thousands of files), and
          only what the reset changes takes space. Mounts vanish with a reboot; `ensure_mounted`
          puts one back when the image is used again.
copy      `cp -a --reflink=auto` (block sharing on btrfs/xfs, a full copy on ext4): the fallback
          when overlayfs is unavailable (not root, nested overlay, odd paths).

    <image folder>/repo    what sandboxes bind at /repo (the overlay's merged view, or the copy)
    <image folder>/upper   overlay: the reset's changes (files, and whiteouts for deletions)
    <image folder>/work    overlay: its work folder
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workflows.providers.base import SandboxCreateError

MODES = ("auto", "overlay", "copy")


@dataclass(frozen=True)
class Layer:
    mode: str  # "overlay" | "copy"
    lower: Path
    folder: Path

    @property
    def merged(self) -> Path:
        return self.folder / "repo"

    @property
    def upper(self) -> Path:
        return self.folder / "upper"

    @property
    def work(self) -> Path:
        return self.folder / "work"

    def as_record(self) -> dict[str, Any]:
        return {"mode": self.mode, "lower": str(self.lower)}

    def changed(self) -> Iterator[Path]:
        """Paths (in the merged view) of everything the reset may have changed or created. The
        top folder comes first: an overlay's root takes its owner and mode from the upper layer."""
        top = self.upper if self.mode == "overlay" else self.merged
        yield self.merged
        for folder, dirs, names in os.walk(top):
            for name in (*dirs, *names):
                path = Path(folder, name)
                yield self.merged / path.relative_to(top)


async def _run(*argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode(errors="replace").strip()


async def mount_overlay(layer: Layer) -> None:
    paths = (layer.lower, layer.upper, layer.work)
    if any(char in str(path) for path in paths for char in ",:\\"):
        raise SandboxCreateError("overlay paths must not contain ',', ':' or '\\'")
    options = f"lowerdir={layer.lower},upperdir={layer.upper},workdir={layer.work}"
    code, detail = await _run("mount", "-t", "overlay", "overlay", "-o", options, str(layer.merged))
    if code != 0:
        raise SandboxCreateError(f"could not mount an overlay: {detail[-200:]}")


async def unmount(path: Path) -> None:
    if os.path.ismount(path):
        code, _ = await _run("umount", str(path))
        if code != 0:
            await _run("umount", "--lazy", str(path))


async def copy_tree(source: Path, dest: Path) -> None:
    code, detail = await _run(
        "cp", "-a", "--reflink=auto", "--no-target-directory", "--", str(source), str(dest)
    )
    if code != 0:
        raise SandboxCreateError(f"could not copy the prewarmed image: {detail[-200:]}")


async def start_from(lower: Path, folder: Path, mode: str = "auto") -> Layer:
    """`folder`/repo becomes a copy-on-write view of `lower` (folder must be empty or new)."""
    if mode not in MODES:
        raise ValueError(f"copy-on-write mode must be one of {MODES}, not {mode!r}")
    folder.mkdir(parents=True, exist_ok=True)
    if mode in ("auto", "overlay"):
        layer = Layer("overlay", lower, folder)
        for path in (layer.merged, layer.upper, layer.work):
            path.mkdir(exist_ok=True)
        try:
            await mount_overlay(layer)
            return layer
        except SandboxCreateError:
            if mode == "overlay":
                raise
        for path in (layer.merged, layer.upper, layer.work):
            path.rmdir()
    layer = Layer("copy", lower, folder)
    await copy_tree(lower, layer.merged)
    return layer


async def ensure_mounted(folder: Path, record: dict[str, Any]) -> bool:
    """Make a built image usable again (after a reboot the overlay is gone); False if it cannot be
    (its prewarmed snapshot was deleted): the caller rebuilds it."""
    if record.get("mode") != "overlay":
        return (folder / "repo").is_dir()
    layer = Layer("overlay", Path(record["lower"]), folder)
    if os.path.ismount(layer.merged):
        return True
    if not layer.lower.is_dir():
        return False
    await mount_overlay(layer)
    return True
