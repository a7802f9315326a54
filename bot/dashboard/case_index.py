"""The experiment page's case list: one summary per case, filtered, sorted and paged, so a page
stays small however many cells the experiment has (answers load on demand, case_routes.py).

Filters (`show`): all (dataset order), moved (largest |Δ| first), regressed (Δ < 0, worst first),
improved (Δ > 0, best first), errored (a run of either arm ended with an error); `tag` keeps cases
with that catalog tag, `q` cases whose id contains it. Δ is the head arm's mean score minus the
baseline's over the case's scored trials.
"""

from __future__ import annotations

import functools
import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Annotated, Any

from fastapi import HTTPException, Query

from workflows.catalog.loaders import DATASET_MANIFEST, load_dataset
from workflows.catalog.models import ExperimentSpec
from workflows.records import RunResult, RunStatus
from workflows.store import ExperimentRecord

SHOWS = ("all", "moved", "regressed", "improved", "errored")
PAGE_SIZE = 50


@dataclass(frozen=True)
class CaseFilters:
    """The case list's query parameters."""

    show: str = "all"
    tag: Annotated[str, Query(max_length=100)] = ""
    q: Annotated[str, Query(max_length=200)] = ""
    page: Annotated[int, Query(ge=1)] = 1

    def query(self, experiment_id: str, **changes: object) -> str:
        values: dict[str, object] = {
            "experiment": experiment_id,
            "show": self.show,
            "tag": self.tag,
            "q": self.q,
            "page": self.page,
        }
        values.update(changes)
        return urllib.parse.urlencode({k: v for k, v in values.items() if v not in ("", None)})


@dataclass(frozen=True)
class CaseSummary:
    case_id: str
    tags: tuple[str, ...]
    base: float | None
    head: float | None
    errors: int
    runs: int

    @property
    def delta(self) -> float | None:
        if self.base is None or self.head is None:
            return None
        return self.head - self.base


@dataclass(frozen=True)
class CasePage:
    cases: list[CaseSummary]
    page: int
    pages: int
    matched: int
    total: int


def summarize(
    spec: ExperimentSpec,
    runs: list[RunResult],
    base: str,
    head: str,
    tags: Mapping[str, tuple[str, ...]],
) -> list[CaseSummary]:
    """One summary per case of the spec, in the dataset's order."""
    scores: dict[tuple[str, str], list[float]] = {}
    errors: dict[str, int] = {}
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.case_id] = counts.get(run.case_id, 0) + 1
        if run.status.is_error:
            errors[run.case_id] = errors.get(run.case_id, 0) + 1
        if run.status is RunStatus.SCORED and run.score is not None:
            scores.setdefault((run.case_id, run.arm), []).append(run.score)
    return [
        CaseSummary(
            case_id=case,
            tags=tags.get(case, ()),
            base=_mean(scores.get((case, base))),
            head=_mean(scores.get((case, head))),
            errors=errors.get(case, 0),
            runs=counts.get(case, 0),
        )
        for case in spec.case_ids
    ]


def select(
    summaries: list[CaseSummary], filters: CaseFilters, page_size: int = PAGE_SIZE
) -> CasePage:
    """The summaries `filters` keep, sorted for its `show`, and the requested page of them."""
    if filters.show not in SHOWS:
        raise ValueError(f"no case filter '{filters.show}'; use one of {', '.join(SHOWS)}")
    kept = [
        s
        for s in summaries
        if (not filters.tag or filters.tag in s.tags)
        and (not filters.q or filters.q.lower() in s.case_id.lower())
    ]
    kept = _shown(kept, filters.show)
    pages = max(1, math.ceil(len(kept) / page_size))
    page = min(filters.page, pages)
    chunk = kept[(page - 1) * page_size : page * page_size]
    return CasePage(chunk, page, pages, len(kept), len(summaries))


def _shown(kept: list[CaseSummary], show: str) -> list[CaseSummary]:
    with_delta = [s for s in kept if s.delta is not None]
    if show == "moved":
        return sorted(with_delta, key=lambda s: -abs(s.delta or 0.0))
    if show == "regressed":
        return sorted((s for s in with_delta if (s.delta or 0.0) < 0), key=lambda s: s.delta or 0.0)
    if show == "improved":
        return sorted(
            (s for s in with_delta if (s.delta or 0.0) > 0), key=lambda s: -(s.delta or 0.0)
        )
    if show == "errored":
        return [s for s in kept if s.errors]
    return kept


def _mean(values: list[float] | None) -> float | None:
    return fmean(values) if values else None


def case_tags(catalog_root: str | Path, dataset: str) -> Mapping[str, tuple[str, ...]]:
    """Each case's tags from the catalog (cached until its dataset.toml changes); none when the
    dataset is not (or no longer) there."""
    try:
        stamp = (Path(catalog_root) / "datasets" / dataset / DATASET_MANIFEST).stat().st_mtime_ns
    except (OSError, ValueError):
        return {}
    return _tags(str(catalog_root), dataset, stamp)


@functools.lru_cache(maxsize=16)
def _tags(catalog_root: str, dataset: str, _stamp: int) -> Mapping[str, tuple[str, ...]]:
    try:
        return {case.id: case.tags for case in load_dataset(Path(catalog_root), dataset).cases}
    except Exception:
        return {}


def case_list(
    record: ExperimentRecord, runs: list[RunResult], catalog_root: str | Path, filters: CaseFilters
) -> dict[str, Any]:
    """What `_cases.html.j2` needs (the experiment page renders its first page too);
    ValueError for an unknown filter."""
    base, head = arms_compared(record)
    tags = case_tags(catalog_root, record.spec.dataset)
    chosen = select(summarize(record.spec, runs, base, head, tags), filters)
    return {
        "listing": chosen,
        "filters": filters,
        "experiment_id": record.spec.experiment_id,
        "all_tags": sorted({tag for one in tags.values() for tag in one}),
        "base": base,
        "head": head,
    }


def arms_compared(record: ExperimentRecord) -> tuple[str, str]:
    """The baseline (first arm) and the head (second, or the baseline alone), as the report."""
    names = [arm.name for arm in record.spec.arms]
    return names[0], names[1] if len(names) > 1 else names[0]


def case_list_or_400(
    record: ExperimentRecord, runs: list[RunResult], catalog_root: str | Path, filters: CaseFilters
) -> dict[str, Any]:
    """`case_list` for a route: an unknown filter is the request's fault (400)."""
    try:
        return case_list(record, runs, catalog_root, filters)
    except ValueError as error:
        raise HTTPException(400, str(error)) from None
