"""Build an ExperimentSpec and its RunResults from per-cell numbers, for report and render tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import numpy as np

from workflows.catalog.models import ArmSpec, CellRef, ExperimentSpec
from workflows.engine.types import PreparedArm, RunInput, StageQueues
from workflows.records import CriterionScore, RunResult, RunStatus, Usage, weighted_score
from workflows.store import Store

SHAS = {"main": "a" * 40, "pr": "b1c2d3e" + "f" * 33, "alt": "c" * 40}

# (case index, arm, trial) -> {criterion: score}
ScoreFn = Callable[[int, str, int], dict[str, float | None]]


def make_spec(
    n_cases: int = 10, trials: int = 3, arms: Sequence[str] = ("main", "pr"), dataset: str = "bar"
) -> ExperimentSpec:
    return ExperimentSpec(
        experiment_id="exp-1",
        repo="/repo",
        dataset=dataset,
        case_ids=tuple(f"case-{i:02d}" for i in range(n_cases)),
        arms=tuple(ArmSpec(name=a, ref=a, commit=SHAS[a]) for a in arms),
        trials=trials,
    )


def scored_run(
    spec: ExperimentSpec,
    case_index: int,
    arm: str,
    trial: int,
    scores: dict[str, float | None],
    *,
    cost: float = 0.01,
    wall: float = 10.0,
) -> RunResult:
    criteria = tuple(
        CriterionScore(name=name, grader="contains_all", weight=1.0, score=value)
        for name, value in scores.items()
    )
    return _run(spec, case_index, arm, trial, RunStatus.SCORED).model_copy(
        update={
            "criteria": criteria,
            "score": weighted_score(criteria),
            "usage": Usage(input_tokens=1000, output_tokens=200, cost_usd=cost),
            "wall_s": wall,
        }
    )


def errored_run(
    spec: ExperimentSpec, case_index: int, arm: str, trial: int, status: RunStatus, error: str
) -> RunResult:
    return _run(spec, case_index, arm, trial, status).model_copy(
        update={"error": error, "wall_s": 30.0, "usage": Usage(cost_usd=0.02)}
    )


def _run(
    spec: ExperimentSpec, case_index: int, arm: str, trial: int, status: RunStatus
) -> RunResult:
    case_id = spec.case_ids[case_index]
    return RunResult(
        run_id=f"{spec.experiment_id}/{case_id}/{arm}/{trial}",
        experiment_id=spec.experiment_id,
        case_id=case_id,
        arm=arm,
        trial=trial,
        seed=0,
        status=status,
    )


def all_runs(spec: ExperimentSpec, score: ScoreFn) -> list[RunResult]:
    return [
        scored_run(spec, i, arm.name, t, score(i, arm.name, t))
        for i in range(len(spec.case_ids))
        for arm in spec.arms
        for t in range(spec.trials)
    ]


def binary_effect(effect: float, seed: int = 0) -> ScoreFn:
    """Binary 'accuracy': pass probability 0.5 on base and 0.5 + effect on other arms, drawn
    once per cell from a fixed generator (so the data are the same on every call)."""
    rng = np.random.default_rng(seed)
    draws = rng.random((200, 3, 20))

    def score(case: int, arm: str, trial: int) -> dict[str, float | None]:
        p = 0.5 if arm == "main" else 0.5 + effect
        arm_index = {"main": 0, "pr": 1, "alt": 2}[arm]
        return {"accuracy": float(draws[case, arm_index, trial] < p)}

    return score


def run_input(cell: CellRef, *, image: str = "img", dataset: str = "tiny") -> RunInput:
    """What the engine hands a run's activities, for calling them without a workflow."""
    return RunInput(
        cell=cell,
        queues=StageQueues("runs", "collect", "score"),
        repo="/repo",
        commit="a" * 40,
        arm_config={},
        dataset=dataset,
        prepared=PreparedArm(image=image, command="true", timeout_s=60, limits={}),
    )


def hostile_arms(commit: str, names: Sequence[str], args: dict[str, str]) -> list[ArmSpec]:
    """An ordinary arm, then one arm per hostile behaviour of the hostile agent (its `hostile`
    config names the behaviour, `args` what it needs)."""
    return [ArmSpec(name="ordinary", ref="main", commit=commit)] + [
        ArmSpec(
            name=name.replace("_", "-"),
            ref="main",
            commit=commit,
            config={"hostile": name, "args": args.get(name, "")},
        )
        for name in names
    ]


async def wait_stored(
    store: Store, experiment_id: str, at_least: int, timeout_s: float = 120
) -> int:
    """Wait until `at_least` results are stored; return how many are."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = sum((await asyncio.to_thread(store.count_runs, experiment_id)).values())
        if done >= at_least:
            return done
        if time.monotonic() > deadline:
            raise AssertionError(f"only {done} of {at_least} results after {timeout_s:.0f} s")
        await asyncio.sleep(0.1)
