"""`publish_report` against the fake GitHub and a real store: one sticky comment per (PR,
dataset), edited in place through the phases, and one check run per experiment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from bot.github import report_comment as rc
from bot.github.github_activities import GitHubReporter, PublishReportInput
from bot.github.github_client import ClientOptions, GitHubClients
from bot.github.github_types import PullInfo, ReporterRef
from bot.grammar import StartEval
from bot.pr_planning import plan_for_pull
from tests.bot.payloads import HEAD_SHA, NUMBER, REPO, pull_json
from tests.conftest import FIXTURES
from tests.fakes.github_server import FakeGitHub
from workflows.catalog.models import ExperimentSpec
from workflows.records import CriterionScore, RunResult, RunStatus
from workflows.settings import Settings
from workflows.store import Store

REPORTER = ReporterRef(repo=REPO, number=NUMBER, dataset="tiny", installation_id=1).to_dict()


def plan(settings: Settings, head_sha: str = HEAD_SHA) -> ExperimentSpec:
    pull = PullInfo.from_json(pull_json(head_sha=head_sha))
    return plan_for_pull(settings, pull, StartEval("tiny"), pull.base_sha, requested_by="x")


def run_result(spec: ExperimentSpec, index: int, status: RunStatus = RunStatus.SCORED) -> RunResult:
    cell = spec.cells()[index]
    score = (0.9 if cell.arm == "head" else 0.4) + 0.01 * (index % 5)
    criteria = (CriterionScore(name="accuracy", grader="regex", weight=1.0, score=score),)
    scored = status is RunStatus.SCORED
    return RunResult(
        run_id=cell.run_id,
        experiment_id=spec.experiment_id,
        case_id=cell.case_id,
        arm=cell.arm,
        trial=cell.trial,
        seed=cell.seed,
        status=status,
        error="" if scored else "sandbox died",
        score=score if scored else None,
        criteria=criteria if scored else (),
    )


@pytest.fixture
def reporter(bot_settings: Settings, store: Store, github: FakeGitHub) -> Iterator[GitHubReporter]:
    clients = GitHubClients(bot_settings, options=ClientOptions.fast())
    yield GitHubReporter(bot_settings, store, clients)


def publish(reporter: GitHubReporter, spec: ExperimentSpec, phase: str, reason: str = "") -> None:
    job = PublishReportInput(spec.experiment_id, REPORTER, phase, reason)
    ActivityEnvironment().run(reporter.publish, job)


def bot_comments(github: FakeGitHub) -> list[dict[str, object]]:
    return [c for c in github.comments_on(REPO, NUMBER) if c["user"]["type"] == "Bot"]


def test_phases_edit_one_comment_and_one_check_run(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    publish(reporter, spec, "queued")
    (queued,) = bot_comments(github)
    assert "Queued:** 5 cases × 2 arms × 2 trials = 20 cells" in str(queued["body"])

    for index in range(3):
        store.save_run(
            run_result(spec, index, RunStatus.SANDBOX_ERROR if index == 2 else RunStatus.SCORED)
        )
    publish(reporter, spec, "progress")
    (progress,) = bot_comments(github)
    assert progress["id"] == queued["id"]
    assert "3 of 20 cells done, 1 with errors" in str(progress["body"])
    (check,) = github.check_runs_for(REPO)
    assert check["status"] == "in_progress" and check["head_sha"] == HEAD_SHA

    for index in range(20):
        store.save_run(run_result(spec, index))
    publish(reporter, spec, "final")
    (final,) = bot_comments(github)
    assert final["id"] == queued["id"]
    body = str(final["body"])
    assert "| criterion |" in body
    assert "**Verdict: ⚠️ too few cases** — too few cases — 5 paired" in body  # tiny has 5
    assert HEAD_SHA[:7] in body
    (check,) = github.check_runs_for(REPO)
    assert check["status"] == "completed" and check["conclusion"] == "success"
    assert check["name"] == "evalbot / tiny" and check["external_id"] == spec.experiment_id
    assert check["output"]["title"].startswith("too few cases: overall Δ +0.5")
    assert len(github.calls_to("POST", r"/issues/2/comments$")) == 1
    assert len(github.calls_to("POST", r"/check-runs$")) == 1


def test_an_experiment_that_could_not_run_says_why_and_blames_no_one(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    publish(reporter, spec, "queued")
    reason = "the local sandbox provider cannot run here: bwrap is not installed; install it"
    publish(reporter, spec, "failed", reason)
    (comment,) = bot_comments(github)
    assert f"❌ **Could not run:** {reason}. No cell ran" in str(comment["body"])
    (check,) = github.check_runs_for(REPO)
    assert (check["conclusion"], check["output"]["title"]) == ("neutral", "Could not run")


def test_publishing_the_same_phase_twice_changes_nothing(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    publish(reporter, spec, "queued")
    publish(reporter, spec, "queued")
    assert len(bot_comments(github)) == 1
    assert github.calls_to("PATCH", r"/issues/comments/") == []
    assert len(github.check_runs_for(REPO)) == 1


def test_a_superseded_experiment_does_not_overwrite_the_newer_report(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    old, new = plan(bot_settings), plan(bot_settings, head_sha="4" * 40)
    store.save_experiment(old)
    store.save_experiment(new)
    publish(reporter, new, "queued")
    publish(reporter, old, "queued")  # late: it was started first
    publish(reporter, old, "cancelled")
    (comment,) = bot_comments(github)
    assert new.experiment_id in str(comment["body"]) and "Queued" in str(comment["body"])
    runs = {r["head_sha"]: r for r in github.check_runs_for(REPO)}
    assert runs[HEAD_SHA]["conclusion"] == "cancelled"
    assert runs["4" * 40]["status"] == "queued"


def test_concurrent_publishers_leave_one_comment_showing_the_newest(
    store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    """Two worker processes (two reporters, no shared lock) publish at the same moment."""
    old, new = plan(bot_settings), plan(bot_settings, head_sha="5" * 40)
    store.save_experiment(old)
    store.save_experiment(new)
    reporters = [
        GitHubReporter(
            bot_settings, store, GitHubClients(bot_settings, options=ClientOptions.fast())
        )
        for _ in range(2)
    ]
    barrier = threading.Barrier(2)

    def race(reporter: GitHubReporter, spec: ExperimentSpec) -> None:
        barrier.wait()
        publish(reporter, spec, "queued")

    threads = [
        threading.Thread(target=race, args=pair) for pair in zip(reporters, (old, new), strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(bot_comments(github)) == 1
    publish(reporters[0], new, "progress")
    publish(reporters[1], old, "cancelled")
    (comment,) = bot_comments(github)
    assert new.experiment_id in str(comment["body"])


def test_duplicates_left_by_an_earlier_race_are_removed(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    for _ in range(2):
        github.add_comment(REPO, NUMBER, rc.marker("tiny"), "evalbot[bot]", type="Bot")
    publish(reporter, spec, "queued")
    (comment,) = bot_comments(github)
    assert "Queued" in str(comment["body"])


def test_marker_comments_by_others_are_left_alone(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    github.add_comment(REPO, NUMBER, "<!-- evalbot:report dataset=tiny --> gotcha", "mallory")
    for n in range(35):  # the bot's own comment is on the second page
        github.add_comment(REPO, NUMBER, f"comment {n}", "someone")
    publish(reporter, spec, "queued")
    publish(reporter, spec, "progress")
    assert len(bot_comments(github)) == 1
    assert github.calls_to("PATCH", r"/issues/comments/")  # the bot's, found past page one
    mallory = [c for c in github.comments_on(REPO, NUMBER) if c["user"]["login"] == "mallory"]
    assert mallory[0]["body"].endswith("gotcha")


def test_github_outage_is_retryable_and_a_4xx_is_not(
    reporter: GitHubReporter, store: Store, github: FakeGitHub, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    github.fail("POST", r"/issues/2/comments$", status=502)
    with pytest.raises(ApplicationError) as outage:
        publish(reporter, spec, "queued")
    assert not outage.value.non_retryable and "502" in str(outage.value)
    github.fail("POST", r"/issues/2/comments$", status=422)
    with pytest.raises(ApplicationError) as refused:
        publish(reporter, spec, "queued")
    assert refused.value.non_retryable
    publish(reporter, spec, "queued")  # the outage is over: the retry posts it
    assert len(bot_comments(github)) == 1


def test_bad_reporter_and_phase_are_not_retried(
    reporter: GitHubReporter, store: Store, bot_settings: Settings
) -> None:
    spec = plan(bot_settings)
    store.save_experiment(spec)
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError, match="number") as bad:
        env.run(reporter.publish, PublishReportInput(spec.experiment_id, {"repo": REPO}, "queued"))
    assert bad.value.non_retryable
    with pytest.raises(ApplicationError, match="unknown report phase") as phase:
        env.run(reporter.publish, PublishReportInput(spec.experiment_id, REPORTER, "done"))
    assert phase.value.non_retryable


def test_a_worker_without_github_credentials_fails_only_github_reports(
    store: Store, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, catalog_root=FIXTURES / "catalog")
    reporter = GitHubReporter(settings, store)  # constructing it needs no credentials
    spec = plan(settings)
    store.save_experiment(spec)
    job = PublishReportInput(spec.experiment_id, REPORTER, "queued")
    with pytest.raises(ApplicationError, match="no GitHub credentials") as error:
        ActivityEnvironment().run(reporter.publish, job)
    assert error.value.non_retryable
