"""The "what changed" page of one case (bot/dashboard/answer_diff.py, docs/dashboard.md):

    /dashboard/experiments/ID/cases/CASE/diff[?base=ARM&head=ARM&base_trial=N&head_trial=N]

Default: the report's baseline against the first other arm, each arm's first trial."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import HTTPException
from fastapi.responses import HTMLResponse

from bot.dashboard.answer_diff import grade_moves, read_answer, word_diff
from bot.dashboard.deps import BlobsDep, StoreDep, UserDep, experiment_or_404, signed_in_router
from bot.dashboard.pages import page
from bot.dashboard.view_cache import cached_runs
from workflows.blobs import BlobStore
from workflows.records import RunResult
from workflows.store import ExperimentRecord

router = signed_in_router()


@router.get("/experiments/{experiment_id:path}/cases/{case_id}/diff", response_class=HTMLResponse)
async def case_diff(
    experiment_id: str,
    case_id: str,
    store: StoreDep,
    blobs: BlobsDep,
    user: UserDep,
    base: str = "",
    head: str = "",
    base_trial: int | None = None,
    head_trial: int | None = None,
) -> HTMLResponse:
    record = await experiment_or_404(store, experiment_id)
    if case_id not in record.spec.case_ids:
        raise HTTPException(404, f"no case '{case_id}' in experiment '{experiment_id}'")
    arms = [a.name for a in record.spec.arms]
    base = _arm(arms, base or arms[0], "base")
    head = _arm(arms, head or (arms[1] if len(arms) > 1 else arms[0]), "head")
    runs = await anyio.to_thread.run_sync(cached_runs, store, record)
    mine = sorted((r for r in runs if r.case_id == case_id), key=lambda r: r.trial)
    view = await anyio.to_thread.run_sync(
        _view, record, mine, blobs, (base, base_trial), (head, head_trial)
    )
    return page("diff.html.j2", user=user, record=record, case_id=case_id, arms=arms, **view)


def _arm(arms: list[str], name: str, which: str) -> str:
    if name not in arms:
        raise HTTPException(404, f"no arm '{name}' ({which}); the arms are {', '.join(arms)}")
    return name


def _pick(runs: list[RunResult], arm: str, trial: int | None) -> RunResult | None:
    """The arm's run of `trial`, or its first trial; None if it has none (yet)."""
    own = [r for r in runs if r.arm == arm]
    if trial is None:
        return own[0] if own else None
    return next((r for r in own if r.trial == trial), None)


def _view(
    record: ExperimentRecord,
    runs: list[RunResult],
    blobs: BlobStore,
    base: tuple[str, int | None],
    head: tuple[str, int | None],
) -> dict[str, Any]:
    left, right = _pick(runs, *base), _pick(runs, *head)
    before = read_answer(blobs, left) if left else None
    after = read_answer(blobs, right) if right else None
    moves = grade_moves(left, right)
    return {
        "base": base[0],
        "head": head[0],
        "base_run": left,
        "head_run": right,
        "base_answer": before,
        "head_answer": after,
        "segments": word_diff(before.text, after.text) if before and after else [],
        "moves": moves,
        "moved": [m.criterion for m in moves if m.moved],
        "trials": list(range(record.spec.trials)),
        "base_trial": left.trial if left else base[1],
        "head_trial": right.trial if right else head[1],
    }
