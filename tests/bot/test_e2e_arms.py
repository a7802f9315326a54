"""Per-arm overrides from a PR comment, end to end: GitHub's real `issue_comment` payload (its body
changed), signed, through the webhook app -> the real Temporal dev server -> the engine with the
`process` provider -> `publish_report` -> the fake GitHub. Then the experiment's cells are exported
by the real CLI and the dashboard, and read back: each arm's per-criterion mean over counted runs
is the report's."""

from __future__ import annotations

import csv
import io
import math
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client

from bot.composition import open_store, session
from tests.bot.payloads import REPO
from tests.bot.test_e2e_temporal import Bot, bot_comments, comment, serve_pull
from tests.fakes.github_server import FakeGitHub
from tests.support.agent_repo import TINY_CATALOG, AgentRepo, tiny_agent_repo
from tests.support.cli import evalbot
from workflows.engine.devserver import DevServer
from workflows.report import build_report
from workflows.settings import Settings
from workflows.store import Store

TOKEN = "arms-dashboard-token"
COMMAND = (
    "/eval tiny --trials 2 --cases consent-draft,sale-plans --set top_k=1 "
    "--arm main=BASE --arm pr=HEAD --arm pr-mini=HEAD,model=gpt-4.1-mini,top_k=3"
)


@pytest.fixture
def agent_repo(tmp_path: Path) -> AgentRepo:
    return tiny_agent_repo(tmp_path / "agent")


@pytest.fixture
def arms_settings(
    tmp_path: Path, temporal_server: DevServer, github: FakeGitHub, bot_settings: Settings
) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return bot_settings.with_changes(
        data_dir=tmp_path / "evalbot",
        catalog_root=TINY_CATALOG,
        temporal={
            "address": temporal_server.address,
            "run_task_queue": f"runs-{suffix}",
            "collect_task_queue": f"collect-{suffix}",
            "score_task_queue": f"score-{suffix}",
        },
        sandbox={"provider": "process", "allow_process_provider": True, "poll_interval_s": 0.2},
        dashboard={"token": SecretStr(TOKEN)},
    )


@pytest.fixture
async def running(arms_settings: Settings) -> AsyncIterator[tuple[Bot, Client, Store]]:
    store = open_store(arms_settings)
    async with session(arms_settings, store) as active:  # workers incl. publish_report
        bot = Bot(arms_settings, store)
        with bot.server:
            yield bot, active.client, store
    store.close()


async def test_three_arms_from_one_comment_run_and_the_comment_shows_their_configs(
    running: tuple[Bot, Client, Store],
    github: FakeGitHub,
    agent_repo: AgentRepo,
    arms_settings: Settings,
) -> None:
    bot, client, store = running
    pr = 100 + uuid.uuid4().int % 1_000_000  # the dev server is shared by the test session
    serve_pull(github, agent_repo, pr)
    started = await bot.deliver("issue_comment", comment(github, pr, COMMAND))
    assert started["action"] == "started", started
    (experiment_id,) = started["experiments"]
    await client.get_workflow_handle(experiment_id).result()

    record = store.get_experiment(experiment_id)
    assert record is not None
    arms = [(a.name, a.commit, a.config) for a in record.spec.arms]
    assert arms == [
        ("main", agent_repo.base, {"top_k": "1"}),
        ("pr", agent_repo.head, {"top_k": "1"}),
        ("pr-mini", agent_repo.head, {"top_k": "3", "model": "gpt-4.1-mini"}),
    ]
    runs = store.list_runs(experiment_id)
    assert sorted({(r.arm, r.status.value) for r in runs}) == [
        ("main", "scored"),
        ("pr", "scored"),
        ("pr-mini", "scored"),
    ]
    assert len(runs) == 3 * 2 * 2

    (check,) = github.check_runs_for(REPO)  # on the PR's head, though no arm is called "head"
    assert check["head_sha"] == agent_repo.head and check["status"] == "completed"
    (report_comment,) = bot_comments(github, pr)
    text = report_comment["body"]
    print(text)  # the sample in the report (pytest -s)
    # the sticky comment: each arm's ref, commit and config ("_" is escaped in Markdown)
    assert f"| **main** (baseline) | master | {agent_repo.base[:7]} | top\\_k=1 |" in text
    assert f"| **pr** | refs/pull/{pr}/head | {agent_repo.head[:7]} | top\\_k=1 |" in text
    assert (
        f"| **pr-mini** | refs/pull/{pr}/head | {agent_repo.head[:7]} | "
        "top\\_k=3, model=gpt-4.1-mini |"
    ) in text
    assert "#### pr vs main" in text and "#### pr-mini vs main" in text
    frontier = text.split("#### Cost and quality frontier", 1)[1].split("####", 1)[0]
    rows = [line.split(" | ")[0] for line in frontier.splitlines() if "$" in line]
    assert rows == ["| main", "| pr", "| pr-mini"]

    # the export, by the real CLI, read back: the report's means, arm by arm
    exported = evalbot(
        arms_settings.data_dir,
        TINY_CATALOG,
        "results",
        experiment_id,
        "--cells",
        "--format",
        "csv",
    )
    assert exported.returncode == 0, exported.stderr
    cells = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(cells) == sum(len(r.criteria) for r in runs)
    assert {row["counted"] for row in cells} == {"true"}
    assert {(row["arm"], row["case"], row["trial"]) for row in cells} == {
        (r.arm, r.case_id, str(r.trial)) for r in runs
    }
    means = criterion_means(cells)
    report = build_report(record.spec, runs)
    for comparison in report.comparisons:
        for row in comparison.rows[1:]:
            assert means[(comparison.base, row.criterion)] == pytest.approx(row.base_mean)
            assert means[(comparison.head, row.criterion)] == pytest.approx(row.head_mean)
    checked = {c.head for c in report.comparisons} | {report.baseline}
    assert checked == {"main", "pr", "pr-mini"}

    # the dashboard's download is the same table
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=bot.server.url, headers=auth) as web:
        download = await web.get(
            "/dashboard/export/cells.csv", params={"experiment": experiment_id}
        )
    assert download.status_code == 200
    assert download.text == exported.stdout
    assert "attachment" in download.headers["content-disposition"]


def criterion_means(rows: list[dict[str, str]]) -> dict[tuple[str, str], float]:
    """(arm, criterion) -> the mean score over the counted runs that scored it."""
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row["counted"] == "true" and row["score"] != "":
            scores[(row["arm"], row["criterion"])].append(float(row["score"]))
    return {key: math.fsum(values) / len(values) for key, values in scores.items()}
