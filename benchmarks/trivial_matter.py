"""The benchmarks' matter: a one-document world, `cases` identical cases graded by a keyword, and an
agent repository with one commit per arm whose agent writes the answer at once."""

from __future__ import annotations

from pathlib import Path

from workflows.engine.repos import commit_all, init_repo

AGENT_TOML = """
[build]
setup = "true"
[run]
command = "echo 'the answer is 42' > \\"$EVALBOT_OUT_DIR/answer.md\\""
timeout_s = 60
"""


def write_catalog(root: Path, cases: int) -> None:
    world = root / "worlds" / "bench"
    (world / "documents").mkdir(parents=True)
    (world / "world.toml").write_text('name = "bench"\n')
    (world / "documents" / "fact.md").write_text("The answer is 42.\n")
    dataset = root / "datasets" / "bench"
    dataset.mkdir(parents=True)
    (dataset / "dataset.toml").write_text('name = "bench"\nworld = "bench"\ndefault_trials = 5\n')
    for index in range(cases):
        case = dataset / "cases" / f"case-{index:03d}"
        case.mkdir(parents=True)
        (case / "case.toml").write_text(
            'prompt = "What is the answer?"\n\n[[criteria]]\nname = "accuracy"\n'
            'grader = "contains_all"\nparams = { values = ["42"] }\n'
        )


def write_agent(path: Path, arms: int, agent_toml: str = AGENT_TOML) -> list[str]:
    """The repository, and its commits: one per arm, differing only in a VERSION file."""
    init_repo(path)
    (path / "evalbot.toml").write_text(agent_toml)
    commits = []
    for arm in range(arms):
        (path / "VERSION").write_text(f"{arm}\n")
        commits.append(commit_all(path, f"arm {arm}"))
    return commits
