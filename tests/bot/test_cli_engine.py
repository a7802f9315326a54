"""The engine's CLI through its real entry point (`python -m bot`), on embedded defaults: with no
EVALBOT_TEMPORAL_ADDRESS the command starts the Temporal dev server itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from tests.support.cli import evalbot as run_cli


def evalbot(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(data_dir, TINY_CATALOG, *args)


@pytest.fixture
def repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")


def test_run_on_embedded_defaults_prints_json_and_status_and_results_agree(
    tmp_path: Path, repo: AgentRepo
) -> None:
    data = tmp_path / "state"
    ran = evalbot(
        data, "run", "--repo", str(repo.path), "--dataset", "tiny",
        "--base", repo.base, "--head", repo.head, "--trials", "1",
        "--cases", "supply-governing-law,lease-rent", "--json",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["progress"] == {
        "cells_done": 4, "cells_total": 4, "complete": True, "by_status": {"scored": 4}
    }  # fmt: skip
    experiment = report["experiment_id"]
    assert (data / "temporal.db").is_file()  # the embedded server kept its state here

    status = evalbot(data, "status", experiment, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["by_status"] == {"scored": 4}

    results = evalbot(data, "results", experiment)
    assert results.returncode == 0
    assert "| criterion |" in results.stdout and repo.head[:7] in results.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dataset", "nope", "--base", "HEAD", "--head", "HEAD"], "known datasets: tiny"),
        (["--dataset", "tiny", "--base", "HEAD"], "--base and --head go together"),
        (["--dataset", "tiny", "--arm", "bad"], "is not NAME=REF"),
        (["--dataset", "tiny", "--base", "HEAD", "--head", "no-such-ref"], "unknown ref"),
        (["--dataset", "tiny", "--base", "HEAD", "--head", "HEAD", "--cases", "x"], "known case"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(
    tmp_path: Path, repo: AgentRepo, args: list[str], expected: str
) -> None:
    ran = evalbot(tmp_path / "state", "run", "--repo", str(repo.path), *args)
    assert ran.returncode == 2
    assert expected in ran.stderr
    assert "Traceback" not in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1


def test_unknown_experiment_is_a_clear_error(tmp_path: Path) -> None:
    ran = evalbot(tmp_path / "state", "results", "exp-missing")
    assert ran.returncode == 2
    assert "no experiment 'exp-missing'" in ran.stderr
