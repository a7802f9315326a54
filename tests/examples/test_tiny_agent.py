"""The tiny test agent (tests/fixtures/agents/tiny-agent) behaves as the engine tests assume:
STRATEGY = "keyword" answers clearly better than "naive", top_k and the seed change its output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.examples.conftest import AgentRun, run_agent
from workflows.catalog.loaders import load_agent_config, load_dataset, load_world
from workflows.catalog.models import Case
from workflows.records import weighted_score
from workflows.scoring import grade_case, load_run_outputs

TINY_AGENT = FIXTURES / "agents" / "tiny-agent"
CATALOG = FIXTURES / "catalog"
STRATEGY_LINE = 'STRATEGY = "naive"\n'


def _agent(dest: Path, strategy: str) -> Path:
    shutil.copytree(TINY_AGENT, dest)
    source = dest / "agent.py"
    text = source.read_text(encoding="utf-8")
    assert text.count(STRATEGY_LINE) == 1
    source.write_text(text.replace(STRATEGY_LINE, f'STRATEGY = "{strategy}"\n'), encoding="utf-8")
    return dest


def _run(agent: Path, base: Path, case: Case, **kwargs) -> AgentRun:
    world = CATALOG / "worlds" / case.world
    return run_agent(agent, ["agent.py"], base, case.prompt, world=world, **kwargs)


def _score(run: AgentRun, case: Case, base: Path) -> float:
    world = load_world(CATALOG, case.world)
    outputs = base / "outputs"
    changes = outputs / "world_changes"
    changes.mkdir(parents=True)
    (outputs / "out").symlink_to(run.out)
    for path in run.world.rglob("*"):
        original = world.path / path.relative_to(run.world)
        if path.is_file() and (
            not original.is_file() or original.read_bytes() != path.read_bytes()
        ):
            target = changes / path.relative_to(run.world)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    collected = load_run_outputs(outputs, world.path)
    score = weighted_score(grade_case(case, collected.outputs, collected.world))
    assert score is not None
    return score


def test_config_is_small_and_fast() -> None:
    config = load_agent_config(TINY_AGENT)
    assert (config.run.command, config.run.timeout_s) == ("python3 agent.py", 60)
    assert (config.sandbox.memory_mb, config.sandbox.pids) == (256, 64)


def test_keyword_strategy_answers_clearly_better_than_naive(tmp_path: Path) -> None:
    cases = load_dataset(CATALOG, "tiny").cases
    means = {}
    for strategy in ("naive", "keyword"):
        agent = _agent(tmp_path / strategy, strategy)
        scores = []
        for case in cases:
            base = tmp_path / f"{strategy}-{case.id}"
            run = _run(agent, base, case, seed=3)
            assert run.exit_code == 0, run.stderr
            assert set(run.usage) == {"input_tokens", "output_tokens", "cost_usd"}
            scores.append(_score(run, case, base))
        means[strategy] = sum(scores) / len(scores)
    assert means["keyword"] >= 0.8
    assert means["keyword"] - means["naive"] >= 0.3


def _case(case_id: str) -> Case:
    return next(c for c in load_dataset(CATALOG, "tiny").cases if c.id == case_id)


def test_top_k_changes_how_many_documents_are_quoted(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "agent", "keyword")
    case = _case("supply-governing-law")
    one = _run(agent, tmp_path / "k1", case)
    three = _run(agent, tmp_path / "k3", case, config={"top_k": "3"})
    assert one.answer.count("Source:") == 1 and three.answer.count("Source:") == 3


@pytest.mark.parametrize("strategy", ["naive"])
def test_the_seed_varies_trials(tmp_path: Path, strategy: str) -> None:
    agent = _agent(tmp_path / "agent", strategy)
    case = _case("sale-plans")
    answers = {_run(agent, tmp_path / f"s{seed}", case, seed=seed).answer for seed in range(6)}
    assert len(answers) > 1
