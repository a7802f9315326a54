"""A fake `Launcher` (bot/launcher.py) that records hand-offs instead of starting workflows.

Like Temporal with REJECT_DUPLICATE ids, starting an id that already exists starts nothing new.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from bot.launcher import LaunchError
from workflows.catalog.models import ExperimentSpec
from workflows.engine.types import Progress
from workflows.experiment_budget import BudgetExhausted


@dataclass
class FakeExperiment:
    spec: ExperimentSpec
    reporter: dict[str, Any]
    running: bool = True
    reruns: int = 0


@dataclass
class FakeLauncher:
    experiments: dict[str, FakeExperiment] = field(default_factory=dict)
    start_calls: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    cap_spent: str = ""  # set: reruns raise BudgetExhausted with it (the daily cap is spent)

    async def start(self, spec: ExperimentSpec, reporter: dict[str, Any]) -> str:
        with self.lock:
            self.start_calls.append(spec.experiment_id)
            self.experiments.setdefault(spec.experiment_id, FakeExperiment(spec, reporter))
        return spec.experiment_id

    async def cancel(self, experiment_id: str) -> bool:
        with self.lock:
            experiment = self.experiments.get(experiment_id)
            if experiment is None or not experiment.running:
                return False
            experiment.running = False
            self.cancelled.append(experiment_id)
            return True

    async def rerun(self, experiment_id: str, reporter: dict[str, Any]) -> str:
        with self.lock:
            experiment = self.experiments.get(experiment_id)
            if experiment is None:
                raise LaunchError(f"there is no record of experiment {experiment_id}")
            if experiment.running:
                raise LaunchError(f"experiment {experiment_id} is still running")
            if self.cap_spent:
                raise BudgetExhausted(self.cap_spent)
            experiment.reruns += 1
            experiment.running = True
        return experiment_id

    async def status(self, experiment_id: str) -> Progress | None:
        experiment = self.experiments.get(experiment_id)
        if experiment is None:
            return None
        total = len(experiment.spec.cells())
        done = 0 if experiment.running else total
        return Progress(total=total, queued=total - done, scored=done, done=not experiment.running)

    async def find(self, prefix: str, *, running_only: bool = True) -> list[str]:
        with self.lock:
            return sorted(
                i
                for i, e in self.experiments.items()
                if i.startswith(prefix) and (e.running or not running_only)
            )

    def finish(self, experiment_id: str) -> None:
        with self.lock:
            self.experiments[experiment_id].running = False

    @property
    def started(self) -> list[str]:
        return sorted(self.experiments)
