"""The sticky comment and check run for one experiment phase: pure functions, no I/O.

One sticky comment per (PR, dataset) is found by `marker(dataset)`; a second hidden line names
the experiment it currently shows, so that a late update from a superseded experiment does not
overwrite the newer one's report (bot/github/github_activities.py decides which is newer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bot.github.gateway import CheckRunUpdate
from bot.render import escape_text
from workflows.catalog.labels import secrets_decision
from workflows.catalog.models import ExperimentSpec
from workflows.report import ExperimentReport
from workflows.stats import Verdict

Phase = Literal["queued", "progress", "final", "cancelled", "failed"]
PHASES: tuple[Phase, ...] = ("queued", "progress", "final", "cancelled", "failed")
_SHOWN = re.compile(r"<!-- evalbot:experiment (?P<id>\S+) -->")


def marker(dataset: str) -> str:
    return f"<!-- evalbot:report dataset={dataset} -->"


def check_name(dataset: str) -> str:
    return f"evalbot / {dataset}"


def shown_experiment(body: str) -> str | None:
    match = _SHOWN.search(body)
    return match["id"] if match else None


@dataclass(frozen=True)
class Counts:
    """Stored runs of an experiment against its planned cells."""

    total: int
    by_status: dict[str, int]

    @property
    def done(self) -> int:
        return sum(self.by_status.values())

    @property
    def errors(self) -> int:
        return sum(n for status, n in self.by_status.items() if status != "scored")


def comment_body(spec: ExperimentSpec, text: str) -> str:
    """The sticky comment: markers, `text`, and for a fork PR which secret groups its runs get
    (docs/secrets.md; group names are catalog names, so plain text)."""
    decision = secrets_decision(spec.labels)
    if decision is not None:
        text = f"{text}\n\n🔒 {decision}"
    return f"{marker(spec.dataset)}\n<!-- evalbot:experiment {spec.experiment_id} -->\n{text}"


def header(spec: ExperimentSpec) -> str:
    arms = ", ".join(f"**{a.name}** `{a.commit[:12]}`" for a in spec.arms)
    return f"### evalbot · {spec.dataset} · {arms}"


def queued_text(spec: ExperimentSpec, details_url: str | None, estimate: str = "") -> str:
    cells = len(spec.cells())
    lines = [
        header(spec),
        "",
        f"⏳ **Queued:** {len(spec.case_ids)} cases × {len(spec.arms)} arms × "
        f"{spec.trials} trials = {cells} cells. This comment updates as they finish.",
    ]
    if estimate:  # workflows.experiment_budget: "≈ $41, ~35 min", from earlier runs of the dataset
        lines.append(f"Estimate: {estimate}.")
    return _with_link("\n".join(lines), details_url)


def progress_text(spec: ExperimentSpec, counts: Counts, details_url: str | None) -> str:
    errors = f", {counts.errors} with errors" if counts.errors else ""
    line = f"⏳ **Running:** {counts.done} of {counts.total} cells done{errors}."
    return _with_link(f"{header(spec)}\n\n{line}", details_url)


def cancelled_text(spec: ExperimentSpec, counts: Counts, details_url: str | None) -> str:
    line = (
        f"⏹️ **Cancelled** after {counts.done} of {counts.total} cells "
        "(a newer push or `/eval cancel`)."
    )
    return _with_link(f"{header(spec)}\n\n{line}", details_url)


def failed_text(spec: ExperimentSpec, reason: str, details_url: str | None) -> str:
    """The experiment stopped before its first cell (the host cannot run the provider)."""
    line = (
        f"❌ **Could not run:** {escape_text(reason, 500)}. No cell ran, so nothing here is "
        "the agent's doing; comment the same `/eval` again once it is fixed."
    )
    return _with_link(f"{header(spec)}\n\n{line}", details_url)


def _with_link(text: str, details_url: str | None) -> str:
    return f"{text}\n\n[Details]({details_url})" if details_url else text


def check_for(
    phase: Phase, counts: Counts, summary: str, report: ExperimentReport | None
) -> CheckRunUpdate:
    if phase == "queued":
        return CheckRunUpdate("queued", f"Queued: {counts.total} cells", summary)
    if phase == "progress":
        return CheckRunUpdate("in_progress", f"{counts.done} of {counts.total} cells", summary)
    if phase == "cancelled":
        return CheckRunUpdate("completed", "Cancelled", summary, conclusion="cancelled")
    if phase == "failed":  # the infrastructure's fault: a signal, never a merge blocker
        return CheckRunUpdate("completed", "Could not run", summary, conclusion="neutral")
    title, conclusion = _final_title(report, counts)
    return CheckRunUpdate("completed", title, summary, conclusion=conclusion)


def _final_title(report: ExperimentReport | None, counts: Counts) -> tuple[str, str]:
    """success unless the comparison regressed or is incomplete (neutral: a signal, not a merge
    blocker); the title leads with the comparison's verdict (workflows/report/verdict.py)."""
    if report is None or not report.comparisons:
        return f"Finished: {counts.done} cells", "neutral"
    comparison = report.comparisons[0]
    overall = comparison.rows[0]
    delta = "n/a" if overall.delta is None else f"{overall.delta:+.3f}"
    errors = f", {counts.errors} errors" if counts.errors else ""
    title = f"{comparison.verdict.value}: overall Δ {delta}{errors}"
    worrying = comparison.verdict in {Verdict.REGRESSED, Verdict.INCOMPLETE}
    return title, "neutral" if worrying else "success"
