"""The in-sandbox runner compiled once per worker, so no sandbox start compiles it again.

Python caches the bytecode of modules it imports, never of the script it is given to run: every
runner start compiled `runner.py` from source, once per cell. Compiled once by the sandbox's own
interpreter (so the bytecode's magic number is the one that runs it) and bound read-only into each
sandbox, the runner starts without that step (benchmarks/runner_start.py measures both).

The file is named by the source's digest: a worker running newer code compiles its own and never
starts an older runner. If compiling fails, sandboxes run the source as before.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from pathlib import Path

from workflows.process_owned import make_in_place
from workflows.providers.common import RUNNER

log = logging.getLogger(__name__)

COMPILE = (
    "import py_compile, sys; "
    "py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True, "
    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)"
)


def compiled_runner(folder: Path, python: str, source: Path = RUNNER) -> Path:
    """The runner's bytecode for `python` in `folder` (made if missing); `source` if it fails."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = folder / f"runner-{digest}.pyc"
    if target.is_file():
        return target

    def compile_into(partial: Path) -> None:
        command = [python, "-I", "-S", "-c", COMPILE, str(source), str(partial)]
        subprocess.run(command, check=True, capture_output=True, timeout=60)
        partial.chmod(0o644)

    try:
        make_in_place(target, compile_into)
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("evalbot: sandboxes run the runner from source (compiling failed: %s)", error)
        return source
    return target


def in_sandbox_path(runner: Path) -> str:
    """Where sandboxes see the runner: Python runs a `.pyc` path as bytecode; the native runner
    (native_runner.py) has no suffix."""
    return f"/evalbot/runner{runner.suffix}"
