"""This process's mount table (/proc/self/mounts), for tests that check what is mounted where."""

from __future__ import annotations

from pathlib import Path


def mounts() -> list[tuple[str, str]]:
    """(mount point, options) of every mount, in the table's order: a path mounted twice is
    there twice."""
    lines = Path("/proc/self/mounts").read_text().splitlines()
    return [(fields[1], fields[3]) for fields in (line.split() for line in lines)]


def mount_points() -> list[str]:
    return [point for point, _ in mounts()]
