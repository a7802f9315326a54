"""`evalbot prewarm`, `prewarm gc`, `prewarm status` on the local provider and SQLite: images are
built and recorded, an unchanged head is only marked current, retention keeps the newest N and
what running experiments use, and status flags images older than two hours."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bot.commands.prewarm import prewarm_group
from tests.workflows.providers.kits import git
from tests.workflows.store.builders import make_spec
from workflows.catalog.models import ArmSpec
from workflows.prewarm.image_label import split_reference
from workflows.providers import create_provider
from workflows.providers.local import host_problem
from workflows.settings import Settings
from workflows.store import Store
from workflows.store.prewarmed_images import PrewarmRecords

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(host_problem(Path("/sys/fs/cgroup")) is not None, reason="no local"),
]

TOML = """
[build]
setup = "echo built > built.txt"
incremental = "echo again >> built.txt"
[run]
command = "cat built.txt"
"""


def new_commit(repo: Path, text: str) -> str:
    (repo / "agent.txt").write_text(text)
    git(repo, "add", "--all")
    git(repo, "commit", "-qm", text)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "evalbot.toml").write_text(TOML)
    new_commit(path, "v1")
    return path


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "evalbot", sandbox={"provider": "local", "prewarm_keep": 2})


def invoke(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(prewarm_group, list(args), obj=settings)


def prewarm(settings: Settings, repo: Path, *args: str) -> dict[str, object]:
    result = invoke(settings, "--repo", str(repo), "--json", *args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_prewarm_records_images_and_keeps_the_newest(settings: Settings, repo: Path) -> None:
    first = prewarm(settings, repo)
    assert first["built"] is True and first["commit"] == git(repo, "rev-parse", "HEAD")
    assert first["provider"] == "local" and first["repo"] == str(repo.resolve())
    assert Path(str(first["reference"]), "repo", "built.txt").read_text() == "built\n"
    again = prewarm(settings, repo)
    assert again["built"] is False and again["reference"] == first["reference"]
    assert str(again["checked_at"]) > str(first["checked_at"])
    new_commit(repo, "v2")
    second = prewarm(settings, repo)
    new_commit(repo, "v3")
    third = prewarm(settings, repo)  # keep 2: the first goes
    assert third["removed"] == [first["reference"]] and not Path(str(first["reference"])).exists()
    records = PrewarmRecords(settings.resolved_database_url)
    try:
        kept = [r.reference for r in records.records(str(repo.resolve()))]
    finally:
        records.close()
    assert kept == [third["reference"], second["reference"]]


def test_gc_keeps_what_a_running_experiment_uses(settings: Settings, repo: Path) -> None:
    old = prewarm(settings, repo)
    pr_commit = new_commit(repo, "a PR on top of v1")
    reference = asyncio.run(create_provider(settings).build_image(repo, pr_commit, "true"))
    assert split_reference(reference)[1].kind == "reset"  # type: ignore[union-attr]
    with Store.from_settings(settings) as store:
        arms = (ArmSpec(name="pr", ref="pr", commit=pr_commit),)
        store.save_experiment(make_spec(repo=str(repo), arms=arms), status="running")
    new_commit(repo, "v2")
    prewarm(settings, repo)
    result = invoke(settings, "gc", "--keep", "1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"removed": [], "kept_in_use": [old["reference"]]}
    with Store.from_settings(settings) as store:
        store.set_experiment_status("exp-1", "completed")
    result = invoke(settings, "gc", "--keep", "1")
    assert result.exit_code == 0 and "1 removed, 0 kept in use" in result.output
    assert not Path(split_reference(reference)[0]).exists()


def test_status_shows_the_newest_image_and_flags_stale_ones(settings: Settings, repo: Path) -> None:
    empty = invoke(settings, "status", "--check")
    assert empty.exit_code == 1 and "no prewarmed images yet" in empty.output
    image = prewarm(settings, repo)
    fresh = invoke(settings, "status", "--json", "--check")
    assert fresh.exit_code == 0, fresh.output
    (status,) = json.loads(fresh.output)["images"]
    assert status["reference"] == image["reference"] and status["stale"] is False
    assert status["age_s"] < 60
    records = PrewarmRecords(settings.resolved_database_url)
    try:
        three_hours_ago = datetime.now(UTC) - timedelta(hours=3)
        records.touch("local", str(image["reference"]), three_hours_ago)
    finally:
        records.close()
    stale = invoke(settings, "status", "--check")
    assert stale.exit_code == 1
    assert "3h00m" in stale.output and "stale (> 2h)" in stale.output


def test_errors_are_one_sentence(settings: Settings, repo: Path) -> None:
    missing = invoke(settings)
    assert missing.exit_code == 2 and "--repo URL|PATH" in missing.output
    unknown = invoke(settings, "--repo", str(repo), "--ref", "no-such-branch")
    assert unknown.exit_code == 2
    assert unknown.output.startswith("evalbot: error: unknown ref 'no-such-branch'")
