"""Where a running experiment stands, as the experiment page polls it (live_routes.py): cells done
per arm and by status, the cells' stage (queued, running, finished — from the experiment
workflow's `progress` query when it answers, else finished vs pending from the store), an ETA from
the pace so far, and the errors by class."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from workflows.engine.types import Progress
from workflows.records import RunResult
from workflows.report.checks import error_classes
from workflows.store import ExperimentRecord


def live_status(
    record: ExperimentRecord, runs: list[RunResult], progress: Progress | None, now: datetime
) -> dict[str, Any]:
    """The JSON the page's script renders (docs/dashboard.md, "Live")."""
    spec = record.spec
    per_arm = spec.trials * len(spec.case_ids)
    total = per_arm * len(spec.arms)
    done = len(runs)
    return {
        "experiment": spec.experiment_id,
        "state": record.status.value,
        "running": not record.status.is_terminal,
        "done": done,
        "total": total,
        "arms": _arms(spec.arms, runs, per_arm),
        "stages": _stages(progress, done, total),
        "eta_s": _eta(record, done, total, now),
        "errors": [
            {"status": e.status.value, "count": e.count, "infra": e.infra, "command": e.command}
            for e in error_classes(spec.experiment_id, runs)
        ],
        "spent_usd": round(sum(r.usage.cost_usd + r.sandbox.cost_usd for r in runs), 6),
    }


def _arms(arms: Any, runs: list[RunResult], per_arm: int) -> list[dict[str, Any]]:
    by_arm: dict[str, Counter[str]] = {arm.name: Counter() for arm in arms}
    for run in runs:
        by_arm.setdefault(run.arm, Counter())[run.status.value] += 1
    return [
        {"arm": name, "done": sum(c.values()), "total": per_arm, "by_status": dict(c.most_common())}
        for name, c in by_arm.items()
    ]


def _stages(progress: Progress | None, done: int, total: int) -> dict[str, int]:
    if progress is None:
        return {"pending": max(0, total - done), "finished": done}
    return {
        "queued": progress.queued,
        "running": progress.running,
        "finished": max(done, progress.finished),
    }


def _eta(record: ExperimentRecord, done: int, total: int, now: datetime) -> float | None:
    """Seconds left at the pace so far; None before the first cell or once it stopped."""
    if record.status.is_terminal or done == 0 or done >= total:
        return None
    elapsed = (now - record.created_at).total_seconds()
    if elapsed <= 0:
        return None
    return round(elapsed / done * (total - done), 1)
