"""Deliberately broken builds, for the reliability battery's mutation checks only.

`EVALBOT_FAULT` names faults, comma-separated; it is unset in every real deployment, and this is
the one place it is read. Each fault is checked at exactly one call site, and a test under
tests/chaos/test_mutations.py runs a battery check against the build it breaks and asserts that
the check reports the failure (benchmarks/RESULTS.md, "Reliability", the mutation column):

- `skip-teardown`: the teardown activity returns without terminating the sandbox
  (workflows/engine/activities.py); caught by the host snapshot.
- `score-twice`: a cell's score stage runs twice (workflows/engine/workflows.py); caught by the
  result-producing completions counted in Temporal history.
- `comment-twice`: the report publisher creates the sticky comment even when it exists
  (bot/github/github_activities.py; the duplicate is then deleted); caught by the fake GitHub's
  request log.
- `stale-comment`: the publisher never edits the sticky comment after creating it (same file);
  caught by "PR comment correct".
- `drop-errors`: the score activity does not store a run the agent failed
  (workflows/engine/activities.py); caught by "results lost".
- `errors-as-infra`: the score activity stores every failure it classifies as a sandbox error
  (same file); caught by "cells misclassified".
"""

from __future__ import annotations

import os

VARIABLE = "EVALBOT_FAULT"


def active(name: str) -> bool:
    """Whether the fault `name` is switched on for this process."""
    return name in os.environ.get(VARIABLE, "").split(",")
