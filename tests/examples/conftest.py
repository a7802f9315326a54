"""Run the sample agents the way the `process` provider does: a subprocess of the system python3
with EVALBOT_*_DIR pointing at a case folder, a private copy of the world and an output folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

LEGAL_AGENT = REPO_ROOT / "examples" / "legal-agent"
PR_OVERLAY = REPO_ROOT / "examples" / "legal-agent-pr"
ACME = REPO_ROOT / "worlds" / "acme-acquisition"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


@dataclass(frozen=True)
class AgentRun:
    exit_code: int
    stderr: str
    out: Path
    world: Path

    @property
    def answer(self) -> str:
        path = self.out / "answer.md"
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    @property
    def usage(self) -> dict:
        return json.loads((self.out / "usage.json").read_text(encoding="utf-8"))

    @property
    def steps(self) -> list[dict]:
        lines = (self.out / "transcript.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def steps_of(self, kind: str) -> list[dict]:
        return [s for s in self.steps if s["type"] == kind]


def run_agent(
    repo: Path,
    command: list[str],
    base: Path,
    prompt: str,
    *,
    world: Path = ACME,
    config: dict[str, str] | None = None,
    seed: int = 1,
    env: dict[str, str] | None = None,
) -> AgentRun:
    base.mkdir(parents=True)
    world_copy, case_dir, out = base / "world", base / "case", base / "out"
    shutil.copytree(world, world_copy)
    case_dir.mkdir()
    case = {
        "id": "test-case",
        "prompt": prompt,
        "attachments": [],
        "world": world.name,
        "arm": {"name": "test", "commit": "0" * 40, "config": config or {}},
        "trial": 0,
        "seed": seed,
    }
    (case_dir / "case.json").write_text(json.dumps(case), encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment.update(
        EVALBOT_CASE_DIR=str(case_dir),
        EVALBOT_WORLD_DIR=str(world_copy),
        EVALBOT_OUT_DIR=str(out),
        EVALBOT_REPO_DIR=str(repo),
        PYTHONDONTWRITEBYTECODE="1",
        **(env or {}),
    )
    done = subprocess.run(
        [PYTHON, *command], cwd=repo, env=environment, capture_output=True, text=True, timeout=60
    )
    return AgentRun(done.returncode, done.stderr, out, world_copy)


def copy_agent(dest: Path, overlay: Path | None = None) -> Path:
    shutil.copytree(LEGAL_AGENT, dest, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    if overlay is not None:
        for path in overlay.rglob("*"):
            if path.is_file():
                target = dest / path.relative_to(overlay)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return dest


@pytest.fixture
def legal(tmp_path: Path):
    """`legal(prompt, **kw)` runs the sample legal agent in its own folders."""
    counter = iter(range(1000))

    def run(prompt: str, **kwargs) -> AgentRun:
        return run_agent(
            LEGAL_AGENT, ["-m", "legal_agent"], tmp_path / f"run{next(counter)}", prompt, **kwargs
        )

    return run


@pytest.fixture(scope="session")
def legal_agent_package() -> Iterator[None]:
    """Make `import legal_agent` work in-process for unit tests."""
    sys.path.insert(0, str(LEGAL_AGENT))
    try:
        yield
    finally:
        sys.path.remove(str(LEGAL_AGENT))
