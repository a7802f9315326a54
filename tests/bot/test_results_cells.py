"""`evalbot results ID --cells`: the export's flags (the rows themselves are tested in
tests/workflows/test_cells_export.py, and read back against a real experiment's report in
tests/bot/test_e2e_arms.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.commands.experiments import results_command
from tests.support.experiments import make_spec, scored_run
from workflows.settings import Settings
from workflows.store import Store


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    settings = Settings(data_dir=tmp_path / "evalbot")
    store = Store.from_settings(settings)
    store.migrate()
    spec = make_spec(n_cases=2, trials=1)
    store.save_experiment(spec)
    for case in range(2):
        for arm in ("main", "pr"):
            store.save_run(scored_run(spec, case, arm, 0, {"accuracy": 0.5, "tone": 1.0}))
    store.close()
    return settings


def test_jsonl_to_a_file_has_a_row_per_run_and_criterion(
    settings: Settings, tmp_path: Path
) -> None:
    out = tmp_path / "cells.jsonl"
    args = ["exp-1", "--cells", "--format", "jsonl", "--output", str(out)]
    result = CliRunner().invoke(results_command, args, obj=settings)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 2 * 2
    assert {(r["arm"], r["criterion"]) for r in rows} == {
        (arm, c) for arm in ("main", "pr") for c in ("accuracy", "tone")
    }


def test_parquet_needs_a_file_and_an_unknown_experiment_is_named(settings: Settings) -> None:
    runner = CliRunner()
    parquet = runner.invoke(
        results_command, ["exp-1", "--cells", "--format", "parquet"], obj=settings
    )
    assert parquet.exit_code == 2
    assert "parquet is binary: name a file with --output" in parquet.output
    missing = runner.invoke(results_command, ["exp-nope", "--cells"], obj=settings)
    assert missing.exit_code == 2 and "no experiment 'exp-nope'" in missing.output
    bad = runner.invoke(results_command, ["exp-1", "--cells", "--format", "xlsx"], obj=settings)
    assert bad.exit_code == 2 and "'xlsx' is not one of 'csv', 'jsonl', 'parquet'" in bad.output
