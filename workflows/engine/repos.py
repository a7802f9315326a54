"""The agent repository under evaluation: mirrors, ref resolution, `evalbot.toml` at a commit."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from workflows.catalog.loaders import AGENT_CONFIG, parse_agent_config
from workflows.catalog.models import AgentRepoConfig


class RepoError(RuntimeError):
    """A git operation on the agent repository failed; the message says which and why."""


def git(repo: Path, *args: str, timeout: float = 300) -> str:
    completed = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if completed.returncode != 0:
        detail = completed.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RepoError(f"git {args[0]} failed in {repo}: {detail[0]}")
    return completed.stdout.strip()


def is_remote(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


def local_repo(repo: str, mirrors_dir: Path) -> Path:
    """A local git repository for `repo`: the path itself, or a fetched mirror of a URL."""
    if not is_remote(repo):
        path = Path(repo).expanduser().resolve()
        if not (path / ".git").exists() and not (path / "HEAD").exists():
            raise RepoError(f"{repo} is not a git repository")
        return path
    mirror = mirrors_dir / hashlib.sha256(repo.encode()).hexdigest()[:16]
    if not mirror.exists():
        mirrors_dir.mkdir(parents=True, exist_ok=True)
        git(mirrors_dir, "clone", "--mirror", "--quiet", repo, str(mirror))
    return mirror


def fetch(repo: Path) -> None:
    git(repo, "fetch", "--quiet", "--all", "--prune")


def resolve_ref(repo: Path, ref: str) -> str:
    """The full commit SHA for a branch, tag or SHA, or a RepoError saying the ref is unknown."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except RepoError:
        raise RepoError(f"unknown ref '{ref}' in {repo}") from None


def agent_config_at(repo: Path, commit: str) -> AgentRepoConfig:
    try:
        text = git(repo, "show", f"{commit}:{AGENT_CONFIG}")
    except RepoError:
        message = f"commit {commit[:12]} has no {AGENT_CONFIG} at the repository root"
        raise RepoError(message) from None
    return parse_agent_config(text, origin=f"{AGENT_CONFIG}@{commit[:12]}")


def init_repo(path: Path) -> None:
    """A new repository on branch `main` with a local identity (for demos and tests)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    git(path, "config", "user.name", "evalbot")
    git(path, "config", "user.email", "evalbot@localhost")


def commit_all(path: Path, message: str) -> str:
    """Commit everything in the work tree; returns the new commit's SHA."""
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(path, "rev-parse", "HEAD")
