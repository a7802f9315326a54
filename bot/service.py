"""What the bot does for a pull request: trust checks, planning, hand-off, direct replies.

Handlers (bot/webhooks/) turn payloads into calls here. Nothing waits for an experiment: starting,
cancelling and rerunning are hand-offs to the `Launcher`. GitHub calls run in worker threads.
Reports (the sticky comment and the check run) are posted later by Temporal activities.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from github import GithubException

from bot import replies
from bot.github.gateway import RepoGateway
from bot.github.github_types import PullInfo, ReporterRef
from bot.grammar import (
    Approve,
    CancelEval,
    Command,
    GrammarError,
    Help,
    RerunFailed,
    StartEval,
    Status,
    eval_line,
    parse_command,
)
from bot.identity import parse_experiment_id, pr_prefix
from bot.launcher import Launcher, LaunchError
from bot.pr_planning import LimitError, Planner
from bot.trust import (
    ALLOWED,
    APPROVAL_LABEL,
    TRUSTED_ASSOCIATIONS,
    Verdict,
    actor_verdict,
    fork_verdict,
)
from workflows.catalog.catalog_errors import CatalogError, UnknownNameError
from workflows.engine.planning import PlanError
from workflows.experiment_budget import BudgetExhausted
from workflows.settings import Settings
from workflows.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
EVAL_LABEL_PREFIX = "eval:"
PLAN_ERRORS = (UnknownNameError, CatalogError, PlanError, LimitError, ValueError)


@dataclass(frozen=True)
class Origin:
    """Who asked, where: the repository, the PR, and the comment (for commands)."""

    repo: str
    number: int
    actor: str
    installation_id: int | None = None
    association: str | None = None
    comment_id: int | None = None


@dataclass
class Outcome:
    """What a delivery led to; the webhook answers with it (useful in GitHub's delivery log)."""

    action: str
    detail: str = ""
    experiments: list[str] = field(default_factory=list)


GatewayFactory = Callable[[str, int | None], RepoGateway]


def eval_labels(labels: tuple[str, ...] | list[str]) -> list[str]:
    """Datasets named by `eval:<dataset>` labels."""
    return [label[len(EVAL_LABEL_PREFIX) :] for label in labels if label.startswith("eval:")]


class EvalService:
    def __init__(
        self,
        settings: Settings,
        launcher: Launcher,
        gateways: GatewayFactory,
        bot_login: Callable[[], str],
        store: Store | None = None,
    ) -> None:
        """`store`: where the repository's spend today is counted (needed with a daily cap)."""
        self.settings = settings
        self.planner = Planner(settings, store)
        self.launcher = launcher
        self._gateways = gateways
        self._bot_login = bot_login

    # -- comments --------------------------------------------------------------------------------

    async def on_comment(self, origin: Origin, body: str) -> Outcome:
        if eval_line(body) is None:
            return Outcome("ignored", "not an /eval command")
        gw = await self._gateway(origin)
        verdict = await self._actor_verdict(gw, origin)
        if not verdict.allowed:
            await self._reply(gw, origin, replies.refusal(origin.actor, verdict.reason))
            return Outcome("refused", "no write access")
        try:
            command = parse_command(body, max_trials=self.settings.github.max_trials)
        except GrammarError as error:
            return await self._reject(gw, origin, str(error))
        assert command is not None  # eval_line() said this is an /eval comment
        return await self._run_command(gw, origin, command)

    async def _run_command(self, gw: RepoGateway, origin: Origin, command: Command) -> Outcome:
        if isinstance(command, StartEval):
            return await self._cmd_start(gw, origin, command)
        if isinstance(command, CancelEval):
            return await self._cmd_cancel(gw, origin, command.dataset)
        if isinstance(command, RerunFailed):
            return await self._cmd_rerun(gw, origin, command.dataset)
        if isinstance(command, Status):
            return await self._cmd_status(gw, origin)
        if isinstance(command, Approve):
            return await self._cmd_approve(gw, origin, command.sha)
        assert isinstance(command, Help)
        await self._reply(gw, origin, replies.help_text(origin.actor))
        return Outcome("help")

    async def _cmd_start(self, gw: RepoGateway, origin: Origin, command: StartEval) -> Outcome:
        pull = await _io(gw.pull, origin.number)
        if pull.state != "open":
            await self._reply(gw, origin, replies.closed_pull(origin.actor))
            return Outcome("ignored", "pull request is closed")
        verdict = await self._fork_verdict(gw, pull)
        if not verdict.allowed:
            await self._reply(gw, origin, replies.refusal(origin.actor, verdict.reason))
            return Outcome("refused", "fork head not approved")
        try:
            started = await self._launch(gw, pull, command, origin)
        except BudgetExhausted as error:
            await self._reply(gw, origin, replies.budget_spent(origin.actor, str(error)))
            return Outcome("refused", "daily cap spent")
        except PLAN_ERRORS as error:
            return await self._reject(gw, origin, str(error))
        await self._react(gw, origin, "rocket")
        return Outcome("started", experiments=[started])

    async def _cmd_cancel(self, gw: RepoGateway, origin: Origin, dataset: str | None) -> Outcome:
        running = await self.launcher.find(pr_prefix(origin.repo, origin.number, dataset))
        cancelled = [i for i in running if await self.launcher.cancel(i)]
        if not cancelled:
            await self._reply(gw, origin, replies.nothing_running(origin.actor, dataset))
            return Outcome("ignored", "nothing running")
        await self._react(gw, origin, "+1")
        return Outcome("cancelled", experiments=cancelled)

    async def _cmd_rerun(self, gw: RepoGateway, origin: Origin, dataset: str | None) -> Outcome:
        pull = await _io(gw.pull, origin.number)
        prefix = pr_prefix(origin.repo, origin.number, dataset)
        known = await self.launcher.find(prefix, running_only=False)
        current = [i for i in known if _is_for_head(i, pull.head_sha)]
        if not current:
            await self._reply(
                gw, origin, replies.nothing_to_rerun(origin.actor, pull.head_sha, dataset)
            )
            return Outcome("ignored", "nothing to rerun")
        try:
            rerun = [await self.launcher.rerun(i, self._reporter(i, origin)) for i in current]
        except BudgetExhausted as error:
            await self._reply(gw, origin, replies.budget_spent(origin.actor, str(error)))
            return Outcome("refused", "daily cap spent")
        except LaunchError as error:
            return await self._reject(gw, origin, str(error))
        await self._react(gw, origin, "+1")
        return Outcome("rerun", experiments=rerun)

    async def _cmd_status(self, gw: RepoGateway, origin: Origin) -> Outcome:
        known = await self.launcher.find(pr_prefix(origin.repo, origin.number), running_only=False)
        rows = [(i, await self.launcher.status(i)) for i in known]
        await self._reply(gw, origin, replies.status_table(origin.actor, rows))
        return Outcome("status", experiments=known)

    async def _cmd_approve(self, gw: RepoGateway, origin: Origin, sha: str | None) -> Outcome:
        pull = await _io(gw.pull, origin.number)
        if not pull.is_fork:
            await self._reply(gw, origin, replies.not_a_fork(origin.actor))
            return Outcome("ignored", "not a fork")
        if sha is not None and not pull.head_sha.startswith(sha):
            return await self._reject(gw, origin, replies.head_moved(sha, pull.head_sha))
        await _io(gw.approve, pull.head_sha, origin.actor)
        started = await self._start_labeled(gw, pull, origin)
        await self._react(gw, origin, "+1")
        await self._reply(gw, origin, replies.approved(origin.actor, pull.head_sha, started))
        return Outcome("approved", experiments=started)

    # -- pull request events ---------------------------------------------------------------------

    async def on_labeled(self, origin: Origin, pull: PullInfo, label: str) -> Outcome:
        datasets = eval_labels([label])
        if label != APPROVAL_LABEL and not datasets:
            return Outcome("ignored", f"label '{label}' is not for evalbot")
        gw = await self._gateway(origin)
        verdict = await self._actor_verdict(gw, origin)
        if not verdict.allowed:
            await self._reply(gw, origin, replies.refusal(origin.actor, verdict.reason))
            return Outcome("refused", "no write access")
        if label == APPROVAL_LABEL:
            return await self._approve_by_label(gw, pull, origin)
        verdict = await self._fork_verdict(gw, pull)
        if not verdict.allowed:
            await self._reply(gw, origin, replies.refusal(origin.actor, verdict.reason))
            return Outcome("refused", "fork head not approved")
        started = await self._start_datasets(gw, pull, datasets, origin)
        return Outcome("started" if started else "rejected", experiments=started)

    async def _approve_by_label(self, gw: RepoGateway, pull: PullInfo, origin: Origin) -> Outcome:
        if not pull.is_fork:
            return Outcome("ignored", "not a fork")
        await _io(gw.approve, pull.head_sha, origin.actor)
        started = await self._start_labeled(gw, pull, origin)
        return Outcome("approved", experiments=started)

    async def on_push(self, origin: Origin, pull: PullInfo) -> Outcome:
        """A new head: cancel the PR's experiments on older heads, start the labelled datasets."""
        cancelled = await self._cancel_older(pull, None)
        gw = await self._gateway(origin)
        if pull.is_fork and APPROVAL_LABEL in pull.labels:
            await _io(gw.remove_label, pull.number, APPROVAL_LABEL)  # the approval lapsed
        datasets = eval_labels(pull.labels)
        if not datasets:
            return Outcome("cancelled" if cancelled else "ignored", experiments=cancelled)
        if not (await self._fork_verdict(gw, pull)).allowed:
            await self._reply(gw, origin, replies.needs_new_approval(pull.head_sha, datasets))
            return Outcome("refused", "fork head not approved", experiments=cancelled)
        started = await self._start_datasets(gw, pull, datasets, origin)
        return Outcome("started", experiments=started + cancelled)

    async def on_opened(self, origin: Origin, pull: PullInfo) -> Outcome:
        """Opened or reopened with `eval:` labels already on: start them (forks need approval)."""
        datasets = eval_labels(pull.labels)
        if not datasets:
            return Outcome("ignored", "no eval: labels")
        gw = await self._gateway(origin)
        if not (await self._fork_verdict(gw, pull)).allowed:
            return Outcome("refused", "fork head not approved")
        started = await self._start_datasets(gw, pull, datasets, origin)
        return Outcome("started", experiments=started)

    async def on_closed(self, origin: Origin, pull: PullInfo) -> Outcome:
        running = await self.launcher.find(pr_prefix(pull.repo, pull.number))
        cancelled = [i for i in running if await self.launcher.cancel(i)]
        return Outcome("cancelled" if cancelled else "ignored", experiments=cancelled)

    # -- shared steps ----------------------------------------------------------------------------

    async def _start_labeled(self, gw: RepoGateway, pull: PullInfo, origin: Origin) -> list[str]:
        return await self._start_datasets(gw, pull, eval_labels(pull.labels), origin)

    async def _start_datasets(
        self, gw: RepoGateway, pull: PullInfo, datasets: list[str], origin: Origin
    ) -> list[str]:
        """Start each dataset with its defaults; problems are answered in the PR, one by one."""
        started = []
        for dataset in datasets:
            try:
                started.append(await self._launch(gw, pull, StartEval(dataset), origin))
            except BudgetExhausted as error:  # the same for every dataset: answer once
                await self._reply(gw, origin, replies.budget_spent(origin.actor, str(error)))
                break
            except PLAN_ERRORS as error:
                await self._reply(gw, origin, replies.usage_error(origin.actor, str(error)))
        return started

    async def _launch(
        self, gw: RepoGateway, pull: PullInfo, command: StartEval, origin: Origin
    ) -> str:
        base_sha = pull.base_sha
        if command.vs == "merge-base":
            base_sha = await _io(gw.merge_base, pull.base_sha, pull.head_sha)
        spec = await asyncio.to_thread(
            functools.partial(self.planner.plan, requested_by=origin.actor),
            pull,
            command,
            base_sha,
        )
        reporter = self._reporter_for(command.dataset, origin)
        started = await self.launcher.start(spec, reporter)
        await self._cancel_older(pull, command.dataset)
        return started

    async def _cancel_older(self, pull: PullInfo, dataset: str | None) -> list[str]:
        """Cancel the PR's running experiments (of `dataset`, or all) on other head SHAs."""
        running = await self.launcher.find(pr_prefix(pull.repo, pull.number, dataset))
        older = [i for i in running if not _is_for_head(i, pull.head_sha)]
        return [i for i in older if await self.launcher.cancel(i)]

    def _reporter(self, experiment_id: str, origin: Origin) -> dict[str, Any]:
        key = parse_experiment_id(experiment_id)
        return self._reporter_for(key.dataset if key else "", origin)

    def _reporter_for(self, dataset: str, origin: Origin) -> dict[str, Any]:
        return ReporterRef(
            repo=origin.repo,
            number=origin.number,
            dataset=dataset,
            installation_id=origin.installation_id,
        ).to_dict()

    async def _actor_verdict(self, gw: RepoGateway, origin: Origin) -> Verdict:
        """Write access needed; the permission API is asked only when the association says no."""
        if (origin.association or "").upper() in TRUSTED_ASSOCIATIONS:
            return ALLOWED  # settled by the payload: no thread, no request
        return await _io(actor_verdict, origin.actor, origin.association, gw.permission)

    async def _fork_verdict(self, gw: RepoGateway, pull: PullInfo) -> Verdict:
        if not pull.is_fork:
            return fork_verdict(False, pull.head_sha, None)
        login = await asyncio.to_thread(self._bot_login)
        approver = await _io(gw.approved_by, pull.head_sha, login)
        return fork_verdict(True, pull.head_sha, approver)

    async def _reject(self, gw: RepoGateway, origin: Origin, problem: str) -> Outcome:
        await self._react(gw, origin, "confused")
        await self._reply(gw, origin, replies.usage_error(origin.actor, problem))
        return Outcome("rejected", problem)

    async def _gateway(self, origin: Origin) -> RepoGateway:
        return await asyncio.to_thread(self._gateways, origin.repo, origin.installation_id)

    async def _reply(self, gw: RepoGateway, origin: Origin, text: str) -> None:
        await _io(gw.comment, origin.number, text)

    async def _react(self, gw: RepoGateway, origin: Origin, content: str) -> None:
        """Acknowledge with a reaction: best effort, since the work it confirms is already done
        (failing the delivery now would redo that work on redelivery)."""
        if origin.comment_id is None:
            return
        try:
            await _io(gw.react, origin.comment_id, content)
        except GithubException as error:
            log.warning("could not react to comment %s: GitHub %s", origin.comment_id, error.status)


def _is_for_head(experiment_id: str, head_sha: str) -> bool:
    key = parse_experiment_id(experiment_id)
    return key is not None and key.is_for(head_sha)


async def _io(function: Callable[..., T], *args: Any) -> T:
    """Run a blocking GitHub call in a worker thread."""
    return await asyncio.to_thread(function, *args)
