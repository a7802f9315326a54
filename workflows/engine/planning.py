"""Turn a request (repo, dataset, arms, trials, case selectors) into an ExperimentSpec.

Arms are parsed by workflows/engine/arm_grammar.py (re-exported here with `PlanError`)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from pathlib import Path

from workflows.catalog.loaders import load_dataset
from workflows.catalog.models import ArmSpec, ExperimentSpec
from workflows.catalog.names import check_name
from workflows.engine.arm_grammar import ArmRequest
from workflows.engine.arm_grammar import PlanError as PlanError
from workflows.engine.repos import local_repo, resolve_ref
from workflows.settings import Settings


def new_experiment_id(dataset: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"exp-{dataset}-{stamp}-{secrets.token_hex(2)}"


def resolve_arms(settings: Settings, repo: str, arms: list[ArmRequest]) -> list[ArmSpec]:
    """The arms with their refs resolved to commits in `repo` (cloned or fetched as needed)."""
    path = local_repo(repo, settings.data_dir / "repos")
    return [
        ArmSpec(name=name, ref=ref, commit=resolve_ref(path, ref), config=config)
        for name, ref, config in arms
    ]


# The experiment workflow's history grows by about 1.1 KB per cell and it does not continue as new;
# Temporal terminates a workflow whose history passes 50 MB, near 45,000 cells
# (docs/engine.md, "Experiment size").
MAX_CELLS = 40_000


def check_size(cases: int, arms: int, trials: int) -> None:
    """PlanError (one sentence with the fix) for an experiment one workflow cannot hold."""
    cells = cases * arms * trials
    if cells > MAX_CELLS:
        raise PlanError(
            f"{cases:,} cases × {arms} arms × {trials} trials is {cells:,} cells; one experiment "
            f"holds at most {MAX_CELLS:,} (its Temporal history would pass the 50 MB limit): "
            "select fewer cases or trials, or split the dataset into several experiments"
        )


def plan_experiment(
    settings: Settings,
    *,
    repo: str,
    dataset: str,
    arms: list[ArmSpec],
    trials: int | None = None,
    case_selectors: list[str] | tuple[str, ...] = (),
    seed: int = 0,
    experiment_id: str | None = None,
    trigger: str = "cli",
    labels: dict[str, str] | None = None,
) -> ExperimentSpec:
    """Validate the dataset and cases (UnknownNameError lists the known ones) and build the spec."""
    loaded = load_dataset(Path(settings.catalog_root), check_name("dataset", dataset))
    cases = loaded.select(list(case_selectors))
    if len(arms) < 1:
        raise PlanError("an experiment needs at least one arm")
    trials = trials if trials is not None else loaded.default_trials
    check_size(len(cases), len(arms), trials)
    return ExperimentSpec(
        experiment_id=experiment_id or new_experiment_id(dataset),
        repo=repo,
        dataset=dataset,
        case_ids=tuple(c.id for c in cases),
        arms=tuple(arms),
        trials=trials,
        seed=seed,
        trigger=trigger,
        labels=labels or {},
    )
