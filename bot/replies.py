"""What the bot says in a pull request when it answers a command directly.

(The sticky experiment report is rendered by bot/github/report_comment.py.)
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.grammar import USAGE
from bot.identity import parse_experiment_id
from bot.trust import APPROVAL_LABEL
from workflows.engine.types import Progress


def usage_error(actor: str, problem: str) -> str:
    return f"@{actor} I could not run that: {_sentence(problem)}\n\n```\n{USAGE}\n```"


def budget_spent(actor: str, problem: str) -> str:
    return f"@{actor} I did not start it: {_sentence(problem)}"


def help_text(actor: str) -> str:
    return (
        f"@{actor} here is what I understand. Datasets, worlds and rubrics come from the "
        f"evaluation service's catalog, never from this branch.\n\n```\n{USAGE}\n```"
    )


def refusal(actor: str, reason: str) -> str:
    return reason if f"@{actor}" in reason else f"@{actor} {reason}"


def closed_pull(actor: str) -> str:
    return f"@{actor} this pull request is closed, so there is nothing to evaluate."


def nothing_running(actor: str, dataset: str | None) -> str:
    scope = f" for `{dataset}`" if dataset else ""
    return f"@{actor} no evaluation is running{scope} on this pull request."


def nothing_to_rerun(actor: str, head_sha: str, dataset: str | None) -> str:
    scope = f"`{dataset}` " if dataset else ""
    return (
        f"@{actor} there is no {scope}evaluation of the current head `{head_sha[:12]}` "
        "to rerun; start one with `/eval <dataset>`."
    )


def not_a_fork(actor: str) -> str:
    return (
        f"@{actor} this pull request is not from a fork, so it needs no approval: "
        "anyone with write access can start an evaluation."
    )


def approved(actor: str, head_sha: str, started: Sequence[str]) -> str:
    text = f"@{actor} approved commit `{head_sha[:12]}` for evaluation."
    if started:
        text += " Started: " + ", ".join(f"`{_dataset_of(i)}`" for i in started) + "."
    return text + f" A new push will need a new approval (`/eval approve` or `{APPROVAL_LABEL}`)."


def head_moved(reviewed: str, head_sha: str) -> str:
    return (
        f"the head of this pull request is now `{head_sha[:12]}`, not `{reviewed[:12]}`; "
        "review the new commits and approve again"
    )


def needs_new_approval(head_sha: str, datasets: Sequence[str]) -> str:
    names = ", ".join(f"`{d}`" for d in datasets)
    return (
        f"New commits arrived from the fork, so the labelled evaluations ({names}) wait until a "
        f"maintainer approves commit `{head_sha[:12]}` with `/eval approve` or the "
        f"`{APPROVAL_LABEL}` label."
    )


def status_table(actor: str, rows: Sequence[tuple[str, Progress | None]]) -> str:
    if not rows:
        return f"@{actor} no evaluations have been started on this pull request yet."
    lines = [f"@{actor} evaluations of this pull request:", "", _STATUS_HEADER, "|---|---|---|---|"]
    lines += [_status_row(experiment_id, progress) for experiment_id, progress in rows]
    return "\n".join(lines)


_STATUS_HEADER = "| dataset | head | cells done | state |"


def _status_row(experiment_id: str, progress: Progress | None) -> str:
    key = parse_experiment_id(experiment_id)
    dataset, sha = (key.dataset, key.sha12) if key else (experiment_id, "?")
    if progress is None:
        return f"| `{dataset}` | `{sha}` | – | unknown |"
    state = "finished" if progress.done else "running"
    errors = f", {progress.errored} errors" if progress.errored else ""
    return f"| `{dataset}` | `{sha}` | {progress.finished}/{progress.total}{errors} | {state} |"


def _dataset_of(experiment_id: str) -> str:
    key = parse_experiment_id(experiment_id)
    return key.dataset if key else experiment_id


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."
