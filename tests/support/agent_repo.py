"""Agent repositories for tests: the tiny agent committed as `base`, improved as `head`."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from workflows.engine.repos import commit_all, init_repo

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_AGENT = REPO_ROOT / "tests" / "fixtures" / "agents" / "tiny-agent"
TINY_CATALOG = REPO_ROOT / "tests" / "fixtures" / "catalog"


@dataclass(frozen=True)
class AgentRepo:
    path: Path
    base: str
    head: str


def tiny_agent_repo(dest: Path, source: Path = TINY_AGENT) -> AgentRepo:
    """Base = the naive strategy; head = the keyword strategy (answers more cases correctly)."""
    shutil.copytree(source, dest)
    init_repo(dest)
    base = commit_all(dest, "naive agent")
    agent = dest / "agent.py"
    agent.write_text(agent.read_text().replace('STRATEGY = "naive"', 'STRATEGY = "keyword"'))
    head = commit_all(dest, "keyword agent")
    return AgentRepo(dest, base, head)
