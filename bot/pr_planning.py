"""Turn a pull request and an `/eval` request into an ExperimentSpec.

The agent repository is the PR's base repository (GitHub serves a fork's head commit there too); the
arms are `base` (the PR's base SHA, or the merge base with `--vs merge-base`) and `head` (the PR's
head SHA), or the request's `--arm`s, resolved and checked by bot/arm_policy.py (as are the config
keys of `--set`). The dataset, its worlds and rubrics come from the service's catalog
(`settings.catalog_root`), never from the PR branch. The experiment's budget is the repository's
default (EVALBOT_REPO_BUDGETS_USD under `owner/name` or the clone URL, else EVALBOT_BUDGET_USD),
lowered to what is left of the repository's daily cap (EVALBOT_DAILY_CAP_USD), and carried as the
spec label `budget_usd` like `evalbot run --budget-usd` (workflows/experiment_budget.py). Planning
raises BudgetExhausted when the daily cap is spent.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from bot.arm_policy import check_config_keys, head_ref, pr_arm
from bot.github.github_types import PullInfo
from bot.grammar import StartEval
from bot.identity import BASE_ARM, HEAD_ARM, HEAD_SHA_LABEL, experiment_id
from workflows.catalog.labels import budget_label, fork_secret_labels
from workflows.catalog.loaders import load_dataset
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.catalog.names import check_name
from workflows.engine.planning import plan_experiment
from workflows.experiment_budget import effective_budget
from workflows.settings import Settings
from workflows.store import Store

TRIGGER = "github"

Signature = tuple[tuple[str, int, int], ...]
TemplateKey = tuple[str, tuple[str, ...], int | None]
ForkSecrets = tuple[tuple[str, ...], tuple[str, ...]]  # the dataset's (fork-safe, withheld) groups


class LimitError(ValueError):
    """The request is well formed but larger than this service allows."""


class Planner:
    """Plans PR experiments with the engine's `plan_experiment`, which validates the dataset and
    selects the cases. What it decided is reused while the dataset's files are unchanged (loading
    a dataset costs more than the rest of a webhook delivery), so a changed catalog is seen at once.
    """

    def __init__(self, settings: Settings, store: Store | None = None) -> None:
        """`store` counts the repository's spend today; required with a daily cap."""
        self.settings = settings
        self.store = store
        self._templates: dict[TemplateKey, tuple[Signature, ExperimentSpec, ForkSecrets]] = {}
        self._lock = threading.Lock()

    def plan(
        self, pull: PullInfo, request: StartEval, base_sha: str, *, requested_by: str
    ) -> ExperimentSpec:
        _check_names(request)  # before the dataset's name is joined into a catalog path
        arms = _arms(pull, request, base_sha)
        check_config_keys(
            [key for arm in arms for key in arm.config],
            self.settings.github.allowed_arm_config_keys,
        )
        template, fork_secrets = self._template(request, arms)
        labels = _labels(pull, request, requested_by)
        if pull.is_fork:  # only the dataset's fork-safe secret groups (docs/secrets.md)
            labels |= fork_secret_labels(*fork_secrets)
        spec = template.model_copy(
            update={
                "experiment_id": experiment_id(
                    pull.repo, pull.number, request.dataset, pull.head_sha
                ),
                "repo": pull.clone_url,
                "arms": tuple(arms),
                "labels": labels,
            }
        )
        _check_limits(self.settings, spec)
        return spec.model_copy(update={"labels": spec.labels | self._budget(pull)})

    def _budget(self, pull: PullInfo) -> dict[str, str]:
        budget = effective_budget(
            self.settings, self.store, pull.clone_url, None, aliases=(pull.repo,)
        )
        return budget_label(budget)

    def _template(
        self, request: StartEval, arms: list[ArmSpec]
    ) -> tuple[ExperimentSpec, ForkSecrets]:
        key = (request.dataset, request.cases, request.trials)
        signature = _signature(Path(self.settings.catalog_root) / "datasets" / request.dataset)
        with self._lock:
            cached = self._templates.get(key)
        if cached is not None and cached[0] == signature:
            return cached[1], cached[2]
        template = plan_experiment(
            self.settings,
            repo="-",
            dataset=request.dataset,
            arms=arms,
            trials=request.trials,
            case_selectors=list(request.cases),
            experiment_id="-",
            trigger=TRIGGER,
        )
        dataset = load_dataset(Path(self.settings.catalog_root), request.dataset)
        fork_secrets = (dataset.fork_safe_secret_groups, dataset.withheld_from_forks)
        with self._lock:
            self._templates[key] = (signature, template, fork_secrets)
        return template, fork_secrets


def plan_for_pull(
    settings: Settings,
    pull: PullInfo,
    request: StartEval,
    base_sha: str,
    *,
    requested_by: str,
) -> ExperimentSpec:
    """One-off planning (no reuse); see `Planner`."""
    return Planner(settings).plan(pull, request, base_sha, requested_by=requested_by)


def _check_names(request: StartEval) -> None:
    """The dataset and case names of a comment or an `eval:<name>` label, checked against the
    catalog's rule (InvalidNameError, a ValueError, says which)."""
    check_name("dataset", request.dataset)
    for selector in request.cases:
        check_name("case", selector.removeprefix("tag:"))


def _arms(pull: PullInfo, request: StartEval, base_sha: str) -> list[ArmSpec]:
    if request.arms:
        return [pr_arm(arm, pull, base_sha) for arm in request.arms]
    config = dict(request.settings)
    return [
        ArmSpec(name=BASE_ARM, ref=pull.base_ref, commit=base_sha, config=config),
        ArmSpec(name=HEAD_ARM, ref=head_ref(pull), commit=pull.head_sha, config=config),
    ]


def _signature(folder: Path) -> Signature:
    """Every file below `folder` with its modification time and size (empty if absent)."""
    found = []
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            stat = os.stat(os.path.join(parent, name))
            found.append((os.path.join(parent, name), stat.st_mtime_ns, stat.st_size))
    return tuple(sorted(found))


def _labels(pull: PullInfo, request: StartEval, requested_by: str) -> dict[str, str]:
    return {
        "github_repo": pull.repo,
        "pull_request": str(pull.number),
        "requested_by": requested_by,
        "baseline": request.vs,
        HEAD_SHA_LABEL: pull.head_sha,
    }


def _check_limits(settings: Settings, spec: ExperimentSpec) -> None:
    if len(spec.case_ids) > settings.github.max_cases:
        raise LimitError(
            f"this selects {len(spec.case_ids)} cases, more than the limit of "
            f"{settings.github.max_cases}; narrow it with --cases"
        )
    if spec.trials > settings.github.max_trials:
        raise LimitError(
            f"the dataset's default of {spec.trials} trials is over the limit of "
            f"{settings.github.max_trials}; pass --trials"
        )
