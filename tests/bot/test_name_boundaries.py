"""Names from outside are checked against the catalog's rule at every boundary of the bot: the
`/eval` comment, the `eval:<name>` label, the CLI and the dashboard (workflows/catalog/names.py).

Each bad name — a traversal, NUL, look-alike letters, a bidirectional override, 10 KB — is refused
with a message naming the rule, nothing is started, and nothing is read outside the catalog: a
complete, valid dataset sits at `catalog/../outside` (where `../../outside` from `datasets/`
leads), and Python's audit hooks (tests/support/disk_watch.py) show that no path in it is opened
or listed."""

from __future__ import annotations

import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from bot.app import create_app
from bot.cli import _register_commands, cli
from bot.github.github_client import ClientOptions, GitHubClients
from tests.bot.conftest import AppServer, Sender
from tests.bot.payloads import NUMBER, REPO, pr_comment, pull_event
from tests.conftest import FIXTURES
from tests.fakes.github_server import FakeGitHub
from tests.fakes.launcher import FakeLauncher
from tests.support.disk_watch import inside, touched
from workflows.settings import Settings
from workflows.store import Store

RULE = "lowercase ASCII letters, digits"
TOKEN = "names-dashboard-token"
BAD_NAMES = {
    "traversal": "../../outside",
    "nul": "ti\x00ny",
    "cyrillic": "t\u0456ny",  # Cyrillic 'і' in place of 'i'
    "fullwidth": "\uff54iny",  # fullwidth 't'
    "rtl-override": "tiny\u202e",
    "10kb": "a" * 10 * 1024,
}


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    """A copy of the test catalog, and the sentinel dataset beside it (`outside`)."""
    root = tmp_path / "names"
    shutil.copytree(FIXTURES / "catalog", root / "catalog")
    shutil.copytree(FIXTURES / "catalog" / "datasets" / "tiny", root / "outside")
    (root / "outside" / "dataset.toml").write_text('name = "outside"\nworld = "tiny"\n')
    return root / "catalog"


@pytest.fixture
def bot_settings(bot_settings: Settings, catalog: Path) -> Settings:
    return bot_settings.with_changes(catalog_root=catalog, dashboard={"token": SecretStr(TOKEN)})


def outside_touches(paths: list[str], catalog: Path) -> list[str]:
    return [p for p in paths if inside(p, catalog.parent / "outside")]


def bot_replies(github: FakeGitHub) -> list[str]:
    return [c["body"] for c in github.comments_on(REPO, NUMBER) if c["user"]["type"] == "Bot"]


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_an_eval_comment_with_a_bad_dataset_name_is_refused(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, catalog: Path, name: str
) -> None:
    with touched() as paths:
        response = sender.deliver("issue_comment", pr_comment(f"/eval {name} --trials 1"))
    assert response.json()["action"] == "rejected"
    assert RULE in bot_replies(github)[0]
    assert launcher.start_calls == []
    assert outside_touches(paths, catalog) == []


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_an_eval_case_selector_with_a_bad_name_is_refused(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, name: str
) -> None:
    response = sender.deliver("issue_comment", pr_comment(f"/eval tiny --cases {name}"))
    assert response.json()["action"] == "rejected"
    assert RULE in bot_replies(github)[0]
    assert launcher.start_calls == []


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_an_eval_label_with_a_bad_dataset_name_is_refused(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, catalog: Path, name: str
) -> None:
    github.set_permission(REPO, "Codertocat", "admin")
    label = f"eval:{name}"
    with touched() as paths:
        response = sender.deliver(
            "pull_request", pull_event("labeled", label=label, labels=[label])
        )
    assert response.json()["action"] == "rejected"
    reply = bot_replies(github)[0]
    assert "dataset name" in reply and RULE in reply
    assert launcher.start_calls == []
    assert outside_touches(paths, catalog) == []


def test_a_push_with_a_bad_eval_label_starts_only_the_good_one(
    sender: Sender, github: FakeGitHub, launcher: FakeLauncher, catalog: Path
) -> None:
    labels = ["eval:../../outside", "eval:tiny"]
    with touched() as paths:
        response = sender.deliver("pull_request", pull_event("synchronize", labels=labels))
    assert [e.split("/")[-2] for e in response.json()["experiments"]] == ["tiny"]
    assert RULE in bot_replies(github)[0]
    assert outside_touches(paths, catalog) == []


def cli_run(settings: Settings, *args: str) -> tuple[int, str]:
    _register_commands()
    env = {"EVALBOT_DATA_DIR": str(settings.data_dir), "EVALBOT_DATABASE_URL": "",
           "EVALBOT_CATALOG_ROOT": str(settings.catalog_root)}  # fmt: skip
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize(
    "command",
    [["run", "--base", "HEAD~1", "--head", "HEAD", "--dataset"], ["estimate", "--dataset"],
     ["history", "--dataset"], ["cases", "new", "--prompt", "p", "--expect", "x"]],
    ids=["run", "estimate", "history", "cases-new"],
)  # fmt: skip
def test_the_cli_refuses_a_bad_dataset_name(
    bot_settings: Settings, catalog: Path, command: list[str], name: str
) -> None:
    args = [*command, name] + (["case-x"] if command[0] == "cases" else [])
    with touched() as paths:
        code, output = cli_run(bot_settings, *args)
    assert code == 2, output
    assert RULE in output
    assert outside_touches(paths, catalog) == []
    assert not (catalog.parent / "outside" / "cases" / "case-x").exists()


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_the_cli_refuses_a_bad_case_id_and_arm_name(
    bot_settings: Settings, catalog: Path, name: str
) -> None:
    code, output = cli_run(bot_settings, "cases", "new", "tiny", name, "--prompt", "p")
    assert code == 2 and RULE in output, output
    code, output = cli_run(
        bot_settings, "run", "--dataset", "tiny", "--arm", f"{name}=HEAD", "--arm", "b=HEAD"
    )
    assert code == 2 and RULE in output, output
    assert sorted(p.name for p in (catalog / "datasets" / "tiny" / "cases").iterdir()) == sorted(
        p.name for p in (FIXTURES / "catalog" / "datasets" / "tiny" / "cases").iterdir()
    )


@pytest.fixture
def dashboard_url(bot_settings: Settings, store: Store) -> Iterator[str]:
    clients = GitHubClients(bot_settings, options=ClientOptions.fast())
    with AppServer(create_app(bot_settings, FakeLauncher(), store, github=clients)) as server:
        yield server.url


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_the_dashboard_refuses_a_bad_dataset_name(
    dashboard_url: str, catalog: Path, name: str
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=dashboard_url, headers=headers) as client, touched() as paths:
        listed = client.get("/dashboard/", params={"dataset": name})
        history = client.get(f"/dashboard/datasets/{urllib.parse.quote(name, safe='')}/history")
    assert listed.status_code == 400 and RULE in listed.json()["detail"]
    if "/" not in name:  # a path with '/' is no dataset route at all
        assert history.status_code == 400 and RULE in history.json()["detail"]
    else:
        assert history.status_code == 404
    assert outside_touches(paths, catalog) == []
