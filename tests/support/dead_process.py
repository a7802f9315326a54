"""The staging id (workflows/process_owned.py) of a process that has exited: what a worker killed
mid-copy leaves in the names of its half-made files."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = "from workflows.process_owned import this_process as p; print(p())"


def dead_process_id() -> str:
    finished = subprocess.run(
        [sys.executable, "-c", SCRIPT], check=True, capture_output=True, text=True
    )
    return finished.stdout.strip()
