"""Experiment identity for pull requests: `gh/<owner>/<repo>/pr<N>/<dataset>/<sha12>`.

The id is the Temporal workflow id, so the same request twice is one experiment, and a new push
(a new head SHA) is a new experiment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BASE_ARM = "base"  # a PR experiment's arms: the PR's base commit, and its head
HEAD_ARM = "head"
HEAD_SHA_LABEL = "head_sha"  # the spec label holding the PR's head commit (its check run's SHA)
SHA_CHARS = 12
ID_PATTERN = re.compile(
    r"^gh/(?P<repo>[^/]+/[^/]+)/pr(?P<number>\d+)/(?P<dataset>[^/]+)/(?P<sha>[0-9a-f]{12})$"
)


@dataclass(frozen=True)
class ExperimentKey:
    repo: str
    number: int
    dataset: str
    sha12: str

    @property
    def experiment_id(self) -> str:
        return f"{pr_prefix(self.repo, self.number, self.dataset)}{self.sha12}"

    def is_for(self, head_sha: str) -> bool:
        return head_sha.startswith(self.sha12)


def experiment_id(repo: str, number: int, dataset: str, head_sha: str) -> str:
    return ExperimentKey(repo, number, dataset, head_sha[:SHA_CHARS]).experiment_id


def pr_prefix(repo: str, number: int, dataset: str | None = None) -> str:
    """The id prefix shared by a PR's experiments (of one dataset, when given)."""
    prefix = f"gh/{repo}/pr{number}/"
    return f"{prefix}{dataset}/" if dataset else prefix


def parse_experiment_id(value: str) -> ExperimentKey | None:
    """The key of a PR experiment id; None for other ids (CLI experiments, run ids)."""
    match = ID_PATTERN.match(value)
    if match is None:
        return None
    return ExperimentKey(match["repo"], int(match["number"]), match["dataset"], match["sha"])
