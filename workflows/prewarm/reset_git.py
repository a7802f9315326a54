"""The git steps of a reset: pick the base, see what changed, move the tree to the target commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workflows.catalog.catalog_errors import CatalogError
from workflows.catalog.loaders import AGENT_CONFIG, parse_agent_config
from workflows.prewarm.image_builder import git
from workflows.prewarm.manifest import changed_manifests
from workflows.prewarm.snapshots import Snapshot
from workflows.providers.base import SandboxCreateError

MAX_CANDIDATES = 20  # prewarmed images looked at, newest first


def _in(source: Path, *args: str) -> tuple[str, ...]:
    return ("-c", f"safe.directory={source}", "-C", str(source), *args)


async def is_ancestor(source: Path, older: str, newer: str) -> bool:
    code, _, _ = await git(*_in(source, "merge-base", "--is-ancestor", older, newer))
    return code == 0


async def newest_ancestor(source: Path, sha: str, snapshots: Sequence[Snapshot]) -> Snapshot | None:
    """The newest snapshot whose commit is `sha` or an ancestor of it."""
    for snapshot in snapshots[:MAX_CANDIDATES]:
        if snapshot.commit == sha or await is_ancestor(source, snapshot.commit, sha):
            return snapshot
    return None


async def changed_files(source: Path, older: str, newer: str) -> list[str]:
    """Every path added, modified or deleted between the commits (a rename is both of its names)."""
    code, out, error = await git(*_in(source, "diff", "--name-only", "--no-renames", older, newer))
    if code != 0:
        raise SandboxCreateError(f"could not diff {older[:12]}..{newer[:12]}: {error[-200:]}")
    return [line for line in out.splitlines() if line]


async def incremental_command(source: Path, sha: str) -> str | None:
    """`build.incremental` of evalbot.toml at `sha` (None if there is none or it is unreadable)."""
    code, text, _ = await git(*_in(source, "show", f"{sha}:{AGENT_CONFIG}"))
    if code != 0:
        return None
    try:
        incremental = parse_agent_config(text).build.incremental
    except CatalogError:
        return None
    return incremental if incremental and incremental.strip() else None


@dataclass(frozen=True)
class DeltaStep:
    """How to go from a prewarmed image of `base` to commit X: the incremental step (a reset), or
    a full build and why (`deps:<manifests>` changed, or `no-incremental` declared)."""

    kind: str  # reset | full
    command: str | None = None
    reason: str = ""


async def delta_step(source: Path, base: str, sha: str) -> DeltaStep:
    """The same rule for every provider (docs/prewarm.md, "Reset to commit")."""
    manifests = changed_manifests(await changed_files(source, base, sha))
    if manifests:
        return DeltaStep("full", reason="deps:" + ",".join(manifests[:5]))
    incremental = await incremental_command(source, sha)
    if incremental is None:
        return DeltaStep("full", reason="no-incremental")
    return DeltaStep("reset", command=incremental)


async def checkout_in_place(repo: Path, source: Path, sha: str) -> None:
    """Fetch `sha` from `source` into the reset tree and check it out. Tracked files become exactly
    those of `sha` (deleted and renamed ones included); untracked build outputs stay."""
    settings = ("-c", f"safe.directory={repo}", "-c", "advice.detachedHead=false", "-C", str(repo))
    code, _, error = await git(*settings, "fetch", "--quiet", "--no-tags", str(source), sha)
    if code == 0:
        code, _, error = await git(*settings, "checkout", "--quiet", "--force", "--detach", sha)
    if code != 0:
        raise SandboxCreateError(f"could not reset to {sha[:12]}: {error[-300:]}")
