"""Figures for the reliability table (benchmarks/reliability.py prints them).

Tests call `record(...)` with what they measured, before asserting, so a failing test still leaves
its numbers. Nothing is written unless EVALBOT_RELIABILITY_LOG names a file (JSON lines).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from typing import Any

LOG_VARIABLE = "EVALBOT_RELIABILITY_LOG"


def record(kind: str, name: str, **figures: Any) -> None:
    """kind: "fault" (faults_injected, experiments, completed, cells, lost, duplicated,
    misclassified, ...) or "hostile" (tried, contained, ...)."""
    path = os.environ.get(LOG_VARIABLE)
    if not path:
        return
    line = json.dumps({"kind": kind, "name": name, "at": time.time(), **figures}) + "\n"
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(line)
