"""Settings that derive values: what the engine uses when a value is left at its default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workflows.experiment_budget import default_budget
from workflows.settings import Settings


def test_experiment_parallelism_defaults_to_what_the_machine_holds() -> None:
    local = Settings(provider="local", max_concurrent_runs=3)
    assert local.resolved_experiment_parallelism == 6
    assert Settings(provider="modal").resolved_experiment_parallelism == 500
    explicit = Settings(provider="local", experiment_parallelism=40)
    assert explicit.resolved_experiment_parallelism == 40


def test_sqlite_in_the_data_dir_unless_a_database_url_is_set(tmp_path: Path) -> None:
    default = Settings(data_dir=tmp_path)
    assert default.resolved_database_url == f"sqlite:///{(tmp_path / 'evalbot.db').resolve()}"
    postgres = Settings(data_dir=tmp_path, database_url="postgresql://u@h/db")
    assert postgres.resolved_database_url == "postgresql://u@h/db"


def test_environment_variables_configure_everything(monkeypatch: object) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("EVALBOT_PROVIDER", "process")
    monkeypatch.setenv("EVALBOT_TEMPORAL_ADDRESS", "temporal:7233")
    settings = Settings()
    assert (settings.provider, settings.temporal_address) == ("process", "temporal:7233")


def test_repo_budgets_are_keyed_as_the_lookup_tries_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The description says what keys EVALBOT_REPO_BUDGETS_USD takes, and they are the ones
    workflows.experiment_budget.default_budget tries: the bot's owner/name then clone URL, the
    CLI's --repo, else EVALBOT_BUDGET_USD."""
    monkeypatch.setenv(
        "EVALBOT_REPO_BUDGETS_USD",
        '{"acme/agent": 2.5, "https://github.com/acme/other.git": 1.25, "/src/agent": 0.5}',
    )
    monkeypatch.setenv("EVALBOT_BUDGET_USD", "7")
    settings = Settings()
    url = "https://github.com/acme/agent.git"
    assert default_budget(settings, "acme/agent", url) == 2.5
    assert default_budget(settings, "acme/other", "https://github.com/acme/other.git") == 1.25
    assert default_budget(settings, "/src/agent") == 0.5
    assert default_budget(settings, "acme/unlisted", "https://github.com/acme/unlisted.git") == 7.0
    description = Settings.model_fields["repo_budgets_usd"].description or ""
    for key in ("owner/name", "clone URL", "--repo", "EVALBOT_BUDGET_USD"):
        assert key in description


def test_collect_slots_follow_the_provider_unless_set(tmp_path: Path) -> None:
    def slots(**values: Any) -> int:
        return Settings(data_dir=tmp_path, **values).collect_slots

    assert slots(provider="local") == 2  # bound by the local disk
    assert slots(provider="modal") == 16  # bound by round trips to the sandbox
    assert slots(provider="modal", max_concurrent_collect=3) == 3
