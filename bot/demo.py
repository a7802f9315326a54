"""`evalbot demo`: a sample agent in a fresh git repository with a `main` commit and a PR branch,
dataset `bar` on both arms on the local bubblewrap provider, and the diff table.

The sample agent, its PR change, the dataset and its world ship with the package
(`bot/demo_matter/`, package data; in a checkout its entries link to examples/, datasets/ and
worlds/), so the demo runs from any folder and from an installed wheel.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from workflows.engine.repos import commit_all, git, init_repo


@dataclass(frozen=True)
class DemoMatter:
    """What the demo evaluates: an agent folder, the PR's changed files, and a dataset."""

    agent: Path
    pr_overlay: Path
    catalog_root: Path
    dataset: str


DEMO_MATTER = Path(__file__).parent / "demo_matter"
DEMO_DATASET = "bar"


def demo_matter(root: Path = DEMO_MATTER) -> DemoMatter:
    """The packaged matter. Links are resolved (a checkout's entries point into the repository):
    the sandboxes copy the world with `cp -a`, which would copy a link, not the folder."""
    dataset = (root / "datasets" / DEMO_DATASET).resolve()
    return DemoMatter(
        agent=(root / "examples" / "legal-agent").resolve(),
        pr_overlay=(root / "examples" / "legal-agent-pr").resolve(),
        catalog_root=dataset.parents[1],
        dataset=DEMO_DATASET,
    )


def output_folder(base: Path) -> Path:
    folder = base / datetime.now(UTC).strftime("demo-%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=False)
    return folder


def overlay(source: Path, dest: Path) -> None:
    """Copy every file of `source` over `dest`; a file named `<name>.delete` removes `<name>`."""
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        target = dest / path.relative_to(source)
        if target.name.endswith(".delete"):
            target.with_name(target.name.removesuffix(".delete")).unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def build_demo_repo(matter: DemoMatter, dest: Path) -> tuple[str, str]:
    """A repository whose `main` is the sample agent and whose `pr` branch adds the PR change."""
    shutil.copytree(matter.agent, dest, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    init_repo(dest)
    base = commit_all(dest, "legal agent: keyword retrieval")
    git(dest, "checkout", "--quiet", "-b", "pr")
    overlay(matter.pr_overlay, dest)
    head = commit_all(dest, "retrieval: BM25 by default, wider context")
    git(dest, "checkout", "--quiet", "main")
    return base, head


def write_results(folder: Path, markdown: str, report_json: dict[str, object]) -> None:
    (folder / "report.md").write_text(markdown, encoding="utf-8")
    (folder / "results.json").write_text(json.dumps(report_json, indent=2), encoding="utf-8")
