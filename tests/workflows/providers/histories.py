"""An agent repository with a history for reset-to-commit tests (local and modal providers):
a base commit to prewarm, a commit three ahead (edits, deletions, a rename, a new folder, a mode
change, a symlink) and a sibling of the base that changes a dependency manifest."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.workflows.providers.kits import git

EVALBOT_TOML = """
[build]
setup = "echo setup >> .built-by && cat src/*.txt > all.txt"
incremental = "echo incremental >> .built-by && cat src/*.txt > all.txt && touch .stamp"
[run]
command = "cat all.txt"
"""
BUILD_OUTPUTS = {"all.txt", ".built-by", ".stamp"}  # .stamp: new at the top, by the build uid


@dataclass
class History:
    repo: Path
    base: str  # the prewarmed commit
    ahead: str  # three commits later: edits, deletions, a rename, a new folder, a mode change
    deps: str  # one commit after base that changes requirements.txt


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "--all")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def make_history(repo: Path) -> History:
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    files = {"evalbot.toml": EVALBOT_TOML, "requirements.txt": "requests==2\n", "src/a.txt": "a1\n",
             "src/b.txt": "b1\n", "src/old.txt": "old\n", "docs/keep.md": "keep\n",
             "docs/gone/x.md": "x\n", "tool.sh": "echo hi\n"}  # fmt: skip
    write(repo, files)
    os.chmod(repo / "tool.sh", 0o755)
    base = commit(repo, "base")
    write(repo, {"src/a.txt": "a2\n"})
    (repo / "src/old.txt").unlink()
    commit(repo, "edit and delete")
    git(repo, "mv", "src/b.txt", "src/renamed.txt")
    git(repo, "rm", "-rq", "docs/gone")
    write(repo, {"new/dir/file.txt": "new\n"})
    commit(repo, "rename, remove a folder, add one")
    os.chmod(repo / "tool.sh", 0o644)
    os.symlink("src/a.txt", repo / "link")
    ahead = commit(repo, "mode change and a symlink")
    git(repo, "checkout", "-q", "-b", "deps", base)
    write(repo, {"requirements.txt": "requests==3\n"})
    deps = commit(repo, "bump a dependency")
    git(repo, "checkout", "-q", "main")
    return History(repo, base, ahead, deps)
