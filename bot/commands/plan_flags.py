"""The flags `evalbot run` and `evalbot estimate` plan an experiment from, defined once.

`@experiment_options` adds --repo, --dataset, --base/--head, --arm, --trials, --cases and --set to a
command and hands them to it as one `ExperimentFlags` (keyword `flags`); `ExperimentFlags.plan`
turns them into the ExperimentSpec both commands start from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click

from bot.commands.names import name_callback
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.engine.arm_grammar import (
    ArmRequest,
    arm_requests,
    checked_arms,
    is_ref,
    parse_settings,
)
from workflows.engine.planning import PlanError, plan_experiment
from workflows.engine.planning import resolve_arms as resolve_arm_refs
from workflows.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
CLI_MAX_ARMS = 16  # the CLI runs on the user's own machine and budget: a generous cap

_OPTIONS = (
    click.option("--repo", default=".", show_default=True, help="Agent repository (path or URL)."),
    click.option(
        "--dataset",
        required=True,
        callback=name_callback("dataset"),
        help="Dataset name (see datasets/).",
    ),
    click.option("--base", help="Base ref: the first arm, the one others are compared with."),
    click.option("--head", help="Head ref: the arm under test."),
    click.option("--arm", "arms", multiple=True, help="NAME=REF[,key=value...]; repeatable."),
    click.option("--trials", type=click.IntRange(1, 100), help="Trials per case and arm."),
    click.option("--cases", multiple=True, help="Case ids or tag:T (comma-separated, repeatable)."),
    click.option(
        "--set", "sets", multiple=True, help="key=value config for every arm; repeatable."
    ),
)


def split_multi(values: tuple[str, ...]) -> list[str]:
    """Repeated, comma-separated flag values as one flat list (empty parts dropped)."""
    return [part for value in values for part in value.split(",") if part]


def parse_arm_flags(
    base: str | None, head: str | None, arms: tuple[str, ...], sets: tuple[str, ...]
) -> list[ArmRequest]:
    """--base/--head (the arms `base` and `head`, first) and each --arm NAME=REF[,k=v...], parsed
    by the grammar the `/eval` comment shares (workflows/engine/arm_grammar.py); every --set k=v
    goes into each arm's config, an arm's own pairs winning."""
    common = parse_settings(split_multi(sets))
    parsed = arm_requests(arms, common, max_arms=CLI_MAX_ARMS)
    if base or head:
        if not (base and head):
            raise PlanError("--base and --head go together (or use --arm NAME=REF, repeated)")
        if not (is_ref(base) and is_ref(head)):
            raise PlanError("--base and --head take a ref or commit, without surrounding spaces")
        pair = [ArmRequest("base", base, dict(common)), ArmRequest("head", head, dict(common))]
        parsed = checked_arms([*pair, *parsed], max_arms=CLI_MAX_ARMS)
    if not parsed:
        raise PlanError("say what to compare: --base REF --head REF, or --arm NAME=REF (repeated)")
    return parsed


@dataclass(frozen=True)
class ExperimentFlags:
    """The planning flags as given on the command line."""

    repo: str
    dataset: str
    base: str | None
    head: str | None
    arms: tuple[str, ...]
    trials: int | None
    cases: tuple[str, ...]
    sets: tuple[str, ...]

    def arm_specs(self, settings: Settings) -> list[ArmSpec]:
        """The arms, their refs resolved to commits in the repository."""
        parsed = parse_arm_flags(self.base, self.head, self.arms, self.sets)
        return resolve_arm_refs(settings, self.repo, parsed)

    def plan(self, settings: Settings, *, seed: int = 0, trigger: str = "cli") -> ExperimentSpec:
        """The experiment these flags describe (PlanError, UnknownNameError when it can't be)."""
        return plan_experiment(
            settings,
            repo=self.repo,
            dataset=self.dataset,
            arms=self.arm_specs(settings),
            trials=self.trials,
            case_selectors=split_multi(self.cases),
            seed=seed,
            trigger=trigger,
        )


def experiment_options(command: F) -> F:
    """Add the planning flags to a click command; it receives them as `flags: ExperimentFlags`."""

    @functools.wraps(command)
    def with_flags(*args: Any, **kwargs: Any) -> Any:
        flags = ExperimentFlags(
            repo=kwargs.pop("repo"),
            dataset=kwargs.pop("dataset"),
            base=kwargs.pop("base"),
            head=kwargs.pop("head"),
            arms=kwargs.pop("arms"),
            trials=kwargs.pop("trials"),
            cases=kwargs.pop("cases"),
            sets=kwargs.pop("sets"),
        )
        return command(*args, flags=flags, **kwargs)

    decorated: Any = with_flags
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return cast(F, decorated)
