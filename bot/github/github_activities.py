"""The engine's activity `publish_report` (ReportActivities) for GitHub: the sticky PR comment and
the check run of an experiment.

The experiment workflow calls it at start ("queued"), on progress (throttled), and at the end
("final" or "cancelled"), with the opaque `reporter` dict the bot gave `start_experiment`. Counts,
SHAs and scores are read from the store. Posting here, in an activity, means a GitHub outage is
retried by Temporal instead of losing the update; every step is idempotent (find-then-edit).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from github import GithubException
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from bot.github import report_comment as rc
from bot.github.gateway import CheckRunUpdate, RepoGateway, is_retryable
from bot.github.github_auth import GitHubConfigError
from bot.github.github_client import GitHubClients
from bot.github.github_types import ReporterRef
from bot.identity import HEAD_ARM, HEAD_SHA_LABEL
from bot.render import render_markdown
from workflows import faults
from workflows.catalog.models import ExperimentSpec
from workflows.engine.activities import ReportActivities
from workflows.engine.types import PublishReportInput
from workflows.report import ExperimentReport, build_report
from workflows.settings import Settings
from workflows.store import Store

__all__ = ["GitHubReporter", "PublishReportInput", "github_activities"]
log = logging.getLogger(__name__)


def github_activities(settings: Settings, store: Store) -> list[Callable[..., Any]]:
    """The activities a worker registers for GitHub reporting."""
    return [GitHubReporter(settings, store).publish_report]


class GitHubReporter(ReportActivities):
    """Publishes experiment phases to GitHub: the engine's `publish_report` activity, defined by
    ReportActivities (workflows/engine/activities.py), calls `publish`. GitHub clients are built
    on first use, so a worker without GitHub credentials starts fine and only GitHub-triggered
    experiments need them."""

    def __init__(
        self, settings: Settings, store: Store, clients: GitHubClients | None = None
    ) -> None:
        self._settings = settings
        self._store = store
        self._clients = clients
        self._locks: dict[tuple[str, int, str], threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def publish(self, job: PublishReportInput) -> None:
        """Create or edit the sticky comment, then create or update the check run."""
        where = _reporter(job.reporter)
        phase = _phase(job.phase)
        spec = self._spec(job.experiment_id)
        try:
            client = self._github().for_repo(where.repo, where.installation_id)
            gateway = RepoGateway(client, where.repo)
            text, report = self._render(spec, phase, job.reason)
            self._upsert_comment(gateway, where, spec, text)
            if self._settings.github.check_runs:
                self._upsert_check(gateway, spec, phase, text, report)
        except GithubException as error:
            raise _activity_error(error, job.experiment_id) from None

    def _github(self) -> GitHubClients:
        if self._clients is None:
            try:
                self._clients = GitHubClients(self._settings)
            except GitHubConfigError as error:
                raise ApplicationError(str(error), non_retryable=True) from None
        return self._clients

    def _estimate(self, spec: ExperimentSpec) -> str:
        """The first reply's "≈ $41, ~35 min" (workflows.experiment_budget); "" without history."""
        from workflows.experiment_budget import estimate_experiment, format_estimate

        estimate = estimate_experiment(
            self._store, spec, max_parallel=self._settings.sandbox.resolved_experiment_parallelism
        )
        return format_estimate(estimate) if estimate.known else ""

    def _spec(self, experiment_id: str) -> ExperimentSpec:
        record = self._store.get_experiment(experiment_id)
        if record is None:  # saved before the first publish; retry if the store lags
            raise ApplicationError(f"experiment {experiment_id} is not in the store yet")
        return record.spec

    def _render(
        self, spec: ExperimentSpec, phase: rc.Phase, reason: str = ""
    ) -> tuple[str, ExperimentReport | None]:
        url = self._details_url(spec.experiment_id)
        if phase == "queued":
            return rc.queued_text(spec, url, self._estimate(spec)), None
        if phase == "final":
            report = build_report(spec, self._store.list_runs(spec.experiment_id))
            return render_markdown(report, details_url=url), report
        if phase == "failed":
            return rc.failed_text(spec, reason, url), None
        counts = self._counts(spec)
        if phase == "cancelled":
            return rc.cancelled_text(spec, counts, url), None
        return rc.progress_text(spec, counts, url), None

    def _counts(self, spec: ExperimentSpec) -> rc.Counts:
        return rc.Counts(len(spec.cells()), self._store.count_runs(spec.experiment_id))

    def _details_url(self, experiment_id: str) -> str | None:
        base = self._settings.dashboard.public_url
        return f"{base.rstrip('/')}/experiments/{quote(experiment_id, safe='')}" if base else None

    def _upsert_comment(
        self, gw: RepoGateway, where: ReporterRef, spec: ExperimentSpec, text: str
    ) -> None:
        """One sticky comment per (PR, dataset), showing the newest experiment. Publishers in this
        process take turns; across processes, a duplicate created in a race is deleted (the
        oldest comment stays) and the newest experiment's text wins."""
        body = rc.comment_body(spec, text)
        marker, author = rc.marker(spec.dataset), self._github().bot_login()
        with self._lock_for(where.repo, where.number, spec.dataset):
            found = gw.find_comments(where.number, marker, author)
            if not found or faults.active("comment-twice"):  # a broken build (workflows/faults.py)
                gw.comment(where.number, body)
                found = gw.find_comments(where.number, marker, author)
            for duplicate, _ in found[1:]:
                gw.delete_comment(duplicate)
            comment_id, current = found[0]
            stale = faults.active("stale-comment")  # a broken build (workflows/faults.py)
            if current != body and self._may_replace(current, spec) and not stale:
                gw.edit_comment(comment_id, body)

    def _may_replace(self, current: str, spec: ExperimentSpec) -> bool:
        """Only the shown experiment, or a newer one (by creation in the store), edits it."""
        shown = rc.shown_experiment(current)
        if shown is None or shown == spec.experiment_id:
            return True
        ours, theirs = (self._store.get_experiment(i) for i in (spec.experiment_id, shown))
        if ours is None or theirs is None:
            return True
        newer = ours.created_at >= theirs.created_at
        if not newer:
            log.info("%s: the comment shows the newer %s; left as is", spec.experiment_id, shown)
        return newer

    def _lock_for(self, repo: str, number: int, dataset: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault((repo, number, dataset), threading.Lock())

    def _upsert_check(
        self,
        gw: RepoGateway,
        spec: ExperimentSpec,
        phase: rc.Phase,
        text: str,
        report: ExperimentReport | None,
    ) -> None:
        sha = pr_head_commit(spec)
        name = rc.check_name(spec.dataset)
        show = rc.check_for(phase, self._counts(spec), text, report)
        show = _with_details(show, self._details_url(spec.experiment_id))
        existing = gw.find_check_run(sha, name, spec.experiment_id)
        if existing is None:
            gw.create_check_run(sha, name, spec.experiment_id, show)
        else:
            gw.update_check_run(existing, show)


def pr_head_commit(spec: ExperimentSpec) -> str:
    """The PR head commit the check run belongs on: the spec's `head_sha` label (bot/pr_planning.py;
    with `--arm`s there may be no arm named `head`), else the `head` arm's, else the last arm's."""
    labelled = spec.labels.get(HEAD_SHA_LABEL)
    if labelled:
        return labelled
    by_name = {a.name: a.commit for a in spec.arms}
    return by_name.get(HEAD_ARM, spec.arms[-1].commit)


def _with_details(show: CheckRunUpdate, url: str | None) -> CheckRunUpdate:
    if url is None:
        return show
    return CheckRunUpdate(show.status, show.title, show.summary, show.conclusion, url)


def _reporter(data: dict[str, Any]) -> ReporterRef:
    try:
        return ReporterRef.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApplicationError(
            f"the reporter is not a GitHub reporter ({where}: {first['msg']})", non_retryable=True
        ) from None


def _phase(value: str) -> rc.Phase:
    for phase in rc.PHASES:
        if value == phase:
            return phase
    raise ApplicationError(f"unknown report phase '{value}'", non_retryable=True)


def _activity_error(error: GithubException, experiment_id: str) -> ApplicationError:
    message = f"GitHub answered {error.status} while reporting {experiment_id}"
    return ApplicationError(message, type="GitHubError", non_retryable=not is_retryable(error))
