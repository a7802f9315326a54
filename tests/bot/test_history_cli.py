"""`evalbot history` and `evalbot compare`/`wait` on a prepared store (no Temporal), and the
main-eval workflow: it parses, and every evalbot command and flag it uses exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bot.cli import _register_commands, cli
from tests.support.experiments import make_spec, scored_run
from workflows.store import Store

ROOT = Path(__file__).resolve().parents[2]
MAIN_EVAL = ROOT / ".github" / "workflows" / "main-eval.yml"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """Two completed main evaluations of `bar` (main then pr as head), and one CLI experiment."""
    data = tmp_path / "state"
    data.mkdir()
    store = Store(f"sqlite:///{data / 'evalbot.db'}")
    store.migrate()
    base = make_spec(n_cases=3, trials=2)
    for name, trigger, head_score in (("nightly-1", "main", 0.5), ("nightly-2", "main", 1.0),
                                      ("by-hand", "cli", 0.0)):  # fmt: skip
        spec = base.model_copy(update={"experiment_id": name, "trigger": trigger})
        store.save_experiment(spec)
        for i in range(3):
            for t in range(2):
                store.save_run(scored_run(spec, i, "main", t, {"accuracy": 0.0, "tone": 1.0}))
                store.save_run(scored_run(spec, i, "pr", t, {"accuracy": head_score, "tone": 1.0}))
        store.set_experiment_status(name, "completed")
    store.close()
    return data


def invoke(data: Path, *args: str) -> click.testing.Result:
    _register_commands()
    env = {"EVALBOT_DATA_DIR": str(data), "EVALBOT_DATABASE_URL": ""}
    return CliRunner().invoke(cli, list(args), env=env)


def test_history_json_lists_main_evaluations_oldest_first(state: Path) -> None:
    result = invoke(state, "history", "--dataset", "bar", "--json")
    assert result.exit_code == 0, result.output
    points = json.loads(result.output)["points"]
    assert [p["experiment_id"] for p in points] == ["nightly-1", "nightly-2"]
    assert points[0]["criteria"]["accuracy"]["mean"] == pytest.approx(0.5)
    assert points[1]["overall"]["mean"] == pytest.approx(1.0)
    assert points[0]["cost_usd"] == pytest.approx(12 * 0.01)
    text = invoke(state, "history", "--dataset", "bar")
    assert "| commit | date | overall | accuracy | tone | cost | experiment |" in text.output
    assert "nightly-2" in text.output and "by-hand" not in text.output


def test_compare_pairs_two_experiments_by_case(state: Path) -> None:
    result = invoke(state, "compare", "nightly-1", "nightly-2", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    row = next(r for r in report["comparisons"][0]["rows"] if r["criterion"] == "accuracy")
    assert (row["base_mean"], row["head_mean"], row["n_cases"]) == (0.5, 1.0, 3)
    same = json.loads(invoke(state, "compare", "nightly-1:main", "by-hand:main", "--json").output)
    assert next(r for r in same["comparisons"][0]["rows"] if r["overall"])["delta"] == 0.0
    missing = invoke(state, "compare", "nightly-1", "nope")
    assert missing.exit_code == 2 and "no experiment 'nope'" in missing.output


def test_wait_returns_the_final_state_and_exit_codes(state: Path) -> None:
    done = invoke(state, "wait", "nightly-1", "--json")
    assert done.exit_code == 0 and json.loads(done.output)["status"] == "completed"
    store = Store(f"sqlite:///{state / 'evalbot.db'}")
    store.set_experiment_status("by-hand", "failed")
    spec = make_spec().model_copy(update={"experiment_id": "still-running"})
    store.save_experiment(spec)
    store.close()
    assert invoke(state, "wait", "by-hand").exit_code == 1
    timed_out = invoke(
        state, "wait", "still-running", "--timeout", "0.2", "--poll", "0.05", "--json"
    )
    assert timed_out.exit_code == 3 and json.loads(timed_out.output)["timed_out"] is True
    assert invoke(state, "wait", "nope").exit_code == 2


def _evalbot_lines(script: str) -> list[list[str]]:
    joined = script.replace("\\\n", " ")
    return [m.group(0).split()[1:] for m in re.finditer(r"evalbot [a-z][^\n|>;]*", joined)]


def test_main_eval_workflow_uses_existing_commands_and_flags() -> None:
    text = MAIN_EVAL.read_text()  # no YAML library here; actionlint checks the syntax (CI test)
    assert re.search(r"^  schedule:\n    - cron: ", text, re.M)
    assert re.search(r"^  workflow_dispatch:", text, re.M)
    assert "permissions:\n  contents: read\n" in text
    _register_commands()
    used = _evalbot_lines(text.split("jobs:", 1)[1])
    assert {line[0] for line in used} >= {"run", "history", "results"}
    for line in used:
        command = cli.commands[line[0]]
        flags = {o for p in command.params for o in getattr(p, "opts", [])}
        for word in line[1:]:
            if word.startswith("--"):
                assert word in flags, (line[0], word)
    run_line = next(line for line in used if line[0] == "run")
    assert run_line[run_line.index("--trigger") + 1] == "main"
