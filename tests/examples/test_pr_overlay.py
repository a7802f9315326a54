"""The demo's PR (examples/legal-agent-pr): up to date with its generator, small, and with the
two effects the demo must show: complete lists, and a privileged document leaking into a summary."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT
from tests.examples.conftest import PR_OVERLAY, copy_agent, run_agent
from workflows.catalog.loaders import load_dataset, load_world
from workflows.catalog.models import Case
from workflows.scoring import grade_case, load_run_outputs


def _generator() -> ModuleType:
    path = REPO_ROOT / "tools" / "generate" / "legal_agent_pr.py"
    spec = importlib.util.spec_from_file_location("legal_agent_pr", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_overlay_is_what_the_generator_writes() -> None:
    expected = _generator().changed_files()
    committed = {
        p.relative_to(PR_OVERLAY).as_posix(): p.read_text(encoding="utf-8")
        for p in PR_OVERLAY.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert committed == expected


def test_overlay_changes_only_retrieval_defaults_and_summaries() -> None:
    changed = set(_generator().changed_files())
    assert changed == {
        "legal_agent/config.py",
        "legal_agent/skills/summarise.py",
        "PULL_REQUEST.md",
    }


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("arms")
    return {
        "main": copy_agent(root / "main"),
        "pr": copy_agent(root / "pr", overlay=PR_OVERLAY),
    }


def _case(case_id: str) -> Case:
    return next(c for c in load_dataset(REPO_ROOT, "bar").cases if c.id == case_id)


def _scores(arm: Path, case: Case, base: Path) -> dict[str, float | None]:
    world = load_world(REPO_ROOT, case.world)
    run = run_agent(arm, ["-m", "legal_agent"], base / "run", case.prompt, seed=7)
    assert run.exit_code == 0, run.stderr
    outputs = base / "outputs"
    (outputs / "world_changes").mkdir(parents=True)
    (outputs / "out").symlink_to(run.out)
    collected = load_run_outputs(outputs, world.path)
    return {s.name: s.score for s in grade_case(case, collected.outputs, collected.world)}


def test_pr_completes_a_list_the_main_branch_leaves_short(
    arms: dict[str, Path], tmp_path: Path
) -> None:
    case = _case("non-english-law")
    main = _scores(arms["main"], case, tmp_path / "main")
    pr = _scores(arms["pr"], case, tmp_path / "pr")
    assert (main["completeness"], pr["completeness"]) == (0.0, 1.0)
    assert main["accuracy"] == pr["accuracy"] == 1.0


def test_pr_leaks_a_privileged_document_into_a_summary(
    arms: dict[str, Path], tmp_path: Path
) -> None:
    case = _case("summary-quanta-issues")
    main = _scores(arms["main"], case, tmp_path / "main")
    pr = _scores(arms["pr"], case, tmp_path / "pr")
    assert (main["privilege"], pr["privilege"]) == (1.0, 0.0)
    assert main["accuracy"] == pr["accuracy"] == 1.0
