"""The `evalbot` CLI through its real entry point (`python -m bot`), in a subprocess, with a clean
EVALBOT_* environment: embedded defaults unless the test sets more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def evalbot(
    data_dir: Path, catalog: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items() if not key.startswith("EVALBOT_")}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        env=base
        | {"EVALBOT_DATA_DIR": str(data_dir), "EVALBOT_CATALOG_ROOT": str(catalog)}
        | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def evalbot_json(data_dir: Path, catalog: Path, *args: str) -> Any:
    """Run a command that must succeed and print one JSON document; on failure, show its stderr."""
    ran = evalbot(data_dir, catalog, *args)
    assert ran.returncode == 0, f"exit {ran.returncode}: {ran.stderr[-4000:]}"
    return json.loads(ran.stdout)
