"""The demo's history of main (docs/dashboard.md, "The demo"): a few commits of the sample agent on
main, each evaluated as a main evaluation would be on a merge (trigger `main`: the previous main
commit against the new one), so that `/dashboard/datasets/bar/history` has points on first run —
one of them a regression, the last one a release.

The commits, on the branch `main-history` of the demo repository, from the demo's `main`:

1. the sample agent as it is (the demo's `main`): evaluated alone;
2. "retrieval: no chunks by default" (`DEFAULT_TOP_K = 0`): the agent's own check refuses a top_k
   below 1, so every run fails and the evaluation against 1 finds a regression (a gentler change,
   such as one chunk, moves too few of ten cases for a verdict at one trial);
3. the revert, tagged `v0.1` (git tag and experiment label `release=v0.1`).

Each evaluation is small (a few cases, one trial by default): the history shows the marks, the
experiment pages show the numbers behind them."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.planning import plan_experiment
from workflows.engine.repos import commit_all, git
from workflows.settings import Settings

BRANCH = "main-history"
RELEASE = "v0.1"
CONFIG = Path("legal_agent") / "config.py"
TOP_K = re.compile(r"^DEFAULT_TOP_K = \d+$", re.M)
WORSE = "retrieval: no chunks by default (the task's own text is enough)"
FIXED = "Revert 'retrieval: no chunks by default'"
# Ten cases: the fewest for which the paired test gives a verdict (workflows/stats MIN_CASES).
HISTORY_CASES = 10

Runner = Callable[[ExperimentSpec], Awaitable[object]]  # runs a spec to its end


@dataclass(frozen=True)
class HistoryCommit:
    sha: str
    message: str
    release: str = ""


def _set_top_k(repo: Path, value: int) -> None:
    path = repo / CONFIG
    text = path.read_text(encoding="utf-8")
    if not TOP_K.search(text):
        raise ValueError(f"{path} has no 'DEFAULT_TOP_K = N' line; the demo history cannot edit it")
    path.write_text(TOP_K.sub(f"DEFAULT_TOP_K = {value}", text), encoding="utf-8")


def history_commits(repo: Path, base: str) -> list[HistoryCommit]:
    """Commits 2 and 3 (module doc) on `main-history` from `base`; the checkout is restored."""
    original = (repo / CONFIG).read_text(encoding="utf-8")
    current = git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    git(repo, "checkout", "--quiet", "-B", BRANCH, base)
    try:
        _set_top_k(repo, 0)
        worse = commit_all(repo, WORSE)
        (repo / CONFIG).write_text(original, encoding="utf-8")
        fixed = commit_all(repo, FIXED)
        git(repo, "tag", RELEASE, fixed)
    finally:
        git(repo, "checkout", "--quiet", current)
    return [
        HistoryCommit(base, "legal agent: keyword retrieval"),
        HistoryCommit(worse, WORSE),
        HistoryCommit(fixed, FIXED, RELEASE),
    ]


def history_specs(
    settings: Settings,
    repo: Path,
    dataset: str,
    commits: list[HistoryCommit],
    cases: list[str],
    trials: int = 1,
) -> list[ExperimentSpec]:
    """One main evaluation per commit: the first alone, then each against the one before."""
    specs = []
    for n, commit in enumerate(commits):
        arms = [ArmSpec(name="main", ref="main", commit=commit.sha)]
        if n > 0:
            arms.insert(0, ArmSpec(name="previous", ref="main~1", commit=commits[n - 1].sha))
        labels = {"demo": "history"} | ({"release": commit.release} if commit.release else {})
        specs.append(
            plan_experiment(
                settings,
                repo=str(repo),
                dataset=dataset,
                arms=arms,
                trials=trials,
                case_selectors=cases,
                trigger="main",
                labels=labels,
            )
        )
    return specs


async def record_history(specs: list[ExperimentSpec], run: Runner) -> list[str]:
    """Run the evaluations one after the other (the history is ordered by when each finished)."""
    for spec in specs:
        await run(spec)
    return [spec.experiment_id for spec in specs]
