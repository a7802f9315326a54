"""Turn a pull request and an `/eval` request into an ExperimentSpec.

The agent repository is the PR's base repository (GitHub serves a fork's head commit there too);
the arms are `base` (the PR's base SHA, or the merge base with `--vs merge-base`) and `head` (the
PR's head SHA). The dataset, its worlds and rubrics come from the service's catalog
(`settings.catalog_root`), never from the PR branch.
"""

from __future__ import annotations

from bot.github.types import PullInfo
from bot.grammar import StartEval
from bot.identity import experiment_id
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.planning import plan_experiment
from workflows.settings import Settings

BASE_ARM = "base"
HEAD_ARM = "head"
TRIGGER = "github"


class LimitError(ValueError):
    """The request is well formed but larger than this service allows."""


def plan_for_pull(
    settings: Settings,
    pull: PullInfo,
    request: StartEval,
    base_sha: str,
    *,
    requested_by: str,
) -> ExperimentSpec:
    """Validate dataset and cases against the catalog and enforce the size caps."""
    arms = [
        ArmSpec(name=BASE_ARM, ref=pull.base_ref, commit=base_sha, config=dict(request.settings)),
        ArmSpec(
            name=HEAD_ARM,
            ref=f"refs/pull/{pull.number}/head",
            commit=pull.head_sha,
            config=dict(request.settings),
        ),
    ]
    spec = plan_experiment(
        settings,
        repo=pull.clone_url,
        dataset=request.dataset,
        arms=arms,
        trials=request.trials,
        case_selectors=list(request.cases),
        experiment_id=experiment_id(pull.repo, pull.number, request.dataset, pull.head_sha),
        trigger=TRIGGER,
        labels=_labels(pull, request, requested_by),
    )
    _check_limits(settings, spec)
    return spec


def _labels(pull: PullInfo, request: StartEval, requested_by: str) -> dict[str, str]:
    return {
        "github_repo": pull.repo,
        "pull_request": str(pull.number),
        "requested_by": requested_by,
        "baseline": request.vs,
    }


def _check_limits(settings: Settings, spec: ExperimentSpec) -> None:
    if len(spec.case_ids) > settings.max_cases:
        raise LimitError(
            f"this selects {len(spec.case_ids)} cases, more than the limit of "
            f"{settings.max_cases}; narrow it with --cases"
        )
    if spec.trials > settings.max_trials:
        raise LimitError(
            f"the dataset's default of {spec.trials} trials is over the limit of "
            f"{settings.max_trials}; pass --trials"
        )
