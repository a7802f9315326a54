"""Reset to commit on Modal: which prewarmed image an arm starts from, and the delta to apply.

Modal has no index of our prewarmed images other than their names, so the newest prewarmed
ancestor of X is found by name: X's ancestors newest first (`git rev-list`, at most MAX_PROBES),
asked `PROBE_BATCH` at a time whether `prewarm_image_name(repo, commit)` is published. The hourly
job prewarms main, so the answer is usually within the first batch.

The delta travels as a git bundle of base..X made on the worker (which has the repository), and
is applied in a build sandbox started from the prewarmed image with `git fetch` + `git checkout`,
so the tree and its .git are exactly X's, as on the local provider. The prewarmed image needs git
for that; without it the reset fails and the builder falls back to a full build.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from workflows.prewarm.image_builder import git
from workflows.prewarm.image_label import ImageOrigin
from workflows.prewarm.reset_git import delta_step
from workflows.providers.base import SandboxCreateError

MAX_PROBES = 64  # ancestors of X looked at for a prewarmed image
PROBE_BATCH = 16  # names asked about at once
RESET = """set -e
command -v git >/dev/null || {{ echo "the prewarmed image has no git (install it in build.setup)" >&2; exit 3; }}
git -c safe.directory=/repo -C /repo fetch --quiet --no-tags /evalbot/delta.bundle {sha}
git -c safe.directory=/repo -c advice.detachedHead=false -C /repo checkout --quiet --force --detach {sha}
rm -f /evalbot/delta.bundle
"""  # noqa: E501

IsPrewarmed = Callable[[Path, str], Awaitable[bool]]


@dataclass(frozen=True)
class BuildPlan:
    kind: str  # prewarmed | reset | full | cold (workflows/prewarm/image_label.py)
    base: str | None = None  # the commit of the prewarmed image it starts from
    command: str | None = None  # the incremental step of a reset
    reason: str = ""

    def as_full(self) -> BuildPlan:
        return replace(self, kind="full", command=None)

    def origin(self, reason: str) -> Callable[[float], ImageOrigin]:
        """How the image was made, once its build time is known."""
        return lambda build_s: ImageOrigin(self.kind, build_s, self.base or "", None, reason)


async def ancestors(source: Path, sha: str, limit: int = MAX_PROBES) -> list[str]:
    """`sha` and its ancestors, newest first."""
    safe = f"safe.directory={source}"
    code, out, error = await git(
        "-c", safe, "-C", str(source), "rev-list", f"--max-count={limit}", sha
    )
    if code != 0:
        raise SandboxCreateError(f"could not list the ancestors of {sha[:12]}: {error[-200:]}")
    return out.split()


async def newest_prewarmed(source: Path, sha: str, is_prewarmed: IsPrewarmed) -> str | None:
    candidates = await ancestors(source, sha)
    for start in range(0, len(candidates), PROBE_BATCH):
        batch = candidates[start : start + PROBE_BATCH]
        found = await asyncio.gather(*(is_prewarmed(source, commit) for commit in batch))
        for commit, published in zip(batch, found, strict=True):
            if published:
                return commit
    return None


async def plan_build(source: Path, sha: str, is_prewarmed: IsPrewarmed) -> BuildPlan:
    base = await newest_prewarmed(source, sha, is_prewarmed)
    if base is None:
        return BuildPlan("cold")
    if base == sha:
        return BuildPlan("prewarmed", base)
    step = await delta_step(source, base, sha)
    return BuildPlan(step.kind, base, step.command, step.reason)


async def make_delta_bundle(source: Path, base: str, sha: str, folder: Path) -> Path:
    """A git bundle of base..sha. `git bundle` takes refs, not bare commits, so a throwaway ref
    under refs/evalbot-delta/ names `sha` while the bundle is written."""
    ref = f"refs/evalbot-delta/{secrets.token_hex(8)}"
    bundle = folder / "delta.bundle"
    at = ("-c", f"safe.directory={source}", "-C", str(source))
    code, _, error = await git(*at, "update-ref", ref, sha)
    if code == 0:
        try:
            code, _, error = await git(
                *at, "bundle", "create", "--quiet", str(bundle), ref, f"^{base}"
            )
        finally:
            await git(*at, "update-ref", "-d", ref)
    if code != 0:
        raise SandboxCreateError(f"could not bundle {base[:12]}..{sha[:12]}: {error[-300:]}")
    return bundle
