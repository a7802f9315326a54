"""`evalbot run` (and `rerun`) and the daily cap: nothing starts once the repository's spend today
reached it (exit 4, one sentence); `estimate --budget-usd` exits 4 over budget. No Temporal
needed: all are decided before an experiment starts."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bot.cli import _register_commands, cli
from tests.support.agent_repo import TINY_CATALOG, tiny_agent_repo
from tests.support.experiments import make_spec, scored_run
from workflows.store import Store


def test_run_refuses_when_the_daily_cap_is_spent(tmp_path: Path) -> None:
    repo = tiny_agent_repo(tmp_path / "agent")
    data = tmp_path / "state"
    data.mkdir()
    store = Store(f"sqlite:///{data / 'evalbot.db'}")
    store.migrate()
    spec = make_spec(n_cases=2, trials=1, dataset="tiny").model_copy(
        update={"repo": str(repo.path), "experiment_id": "earlier"}
    )
    store.save_experiment(spec)
    for i in range(2):
        store.save_run(scored_run(spec, i, "main", 0, {"x": 1.0}, cost=0.3, wall=12.0))
    store.close()
    env = {"EVALBOT_DATA_DIR": str(data), "EVALBOT_CATALOG_ROOT": str(TINY_CATALOG),
           "EVALBOT_DAILY_CAP_USD": "0.5", "EVALBOT_TEMPORAL_ADDRESS": "127.0.0.1:9"}  # fmt: skip
    _register_commands()
    plan = ["--repo", str(repo.path), "--dataset", "tiny", "--base", repo.base,
            "--head", repo.head, "--trials", "1", "--cases", "lease-rent"]  # fmt: skip
    refused = CliRunner().invoke(cli, ["run", *plan], env=env)
    assert refused.exit_code == 4
    assert "daily cap of $0.50" in refused.output
    rerun = CliRunner().invoke(cli, ["rerun", "earlier", "--failed"], env=env)
    assert rerun.exit_code == 4, rerun.output  # a rerun is held to the cap as well
    assert "daily cap of $0.50" in rerun.output

    estimate = CliRunner().invoke(
        cli, ["estimate", *plan, "--budget-usd", "0.1", "--json"], env=env
    )
    assert estimate.exit_code == 4, estimate.output
    payload = json.loads(estimate.output)
    assert payload["known"] and payload["over_budget"]
    assert payload["cost_usd"] == 0.6  # 2 cells at the $0.30 a cell cost before
    assert payload["summary"].startswith("≈ $0.60")


def test_the_bots_first_reply_shows_the_estimate() -> None:
    from bot.github.report_comment import queued_text
    from workflows.experiment_budget import estimate_from_runs, format_estimate

    spec = make_spec(n_cases=41, trials=1, arms=("main",))
    past = spec.model_copy(update={"experiment_id": "past"})
    runs = [scored_run(past, 0, "main", 0, {"x": 1.0}, cost=1.0, wall=35 * 60 / 41 * 8)]
    estimate = format_estimate(estimate_from_runs(spec, [(past, runs)]))
    text = queued_text(spec, None, estimate)
    assert "⏳ **Queued:** 41 cases" in text and "Estimate: ≈ $41, ~35 min." in text
    assert "Estimate" not in queued_text(spec, None)
