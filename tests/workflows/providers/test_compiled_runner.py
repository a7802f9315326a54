"""The runner compiled once per worker (workflows/providers/local/compiled_runner.py): bytecode
for the sandbox's interpreter, made once per source, and the source when compiling fails; and a
`local` sandbox whose pid 1 runs that bytecode (where the native runner cannot be made)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.workflows.providers.kits import Kit, run_to_end
from workflows.providers.common import RUNNER
from workflows.providers.local import LocalProvider
from workflows.providers.local.compiled_runner import compiled_runner
from workflows.providers.local.local_provider import SANDBOX_PYTHON

pytestmark = pytest.mark.timeout(120)


def magic_of(python: str) -> bytes:
    code = "import importlib.util, sys; sys.stdout.buffer.write(importlib.util.MAGIC_NUMBER)"
    return subprocess.run([python, "-c", code], capture_output=True, check=True).stdout


def test_bytecode_for_the_sandbox_interpreter_made_once_per_source(tmp_path: Path) -> None:
    source = tmp_path / "runner.py"
    source.write_text(RUNNER.read_text())
    made = compiled_runner(tmp_path / "compiled", SANDBOX_PYTHON, source)
    assert made.suffix == ".pyc" and made.parent == tmp_path / "compiled"
    assert made.read_bytes()[:4] == magic_of(SANDBOX_PYTHON)
    assert made.stat().st_mode & 0o777 == 0o644  # every sandbox uid reads it
    made_at = made.stat().st_mtime_ns
    assert compiled_runner(tmp_path / "compiled", SANDBOX_PYTHON, source) == made
    assert made.stat().st_mtime_ns == made_at  # not compiled again
    source.write_text(RUNNER.read_text() + "\n# changed\n")
    newer = compiled_runner(tmp_path / "compiled", SANDBOX_PYTHON, source)
    assert newer != made and newer.is_file()
    assert sorted(p.name for p in (tmp_path / "compiled").iterdir()) == sorted(
        [made.name, newer.name]
    )  # no partial file left


def test_the_compiled_runner_runs_as_the_source_does(tmp_path: Path) -> None:
    made = compiled_runner(tmp_path, SANDBOX_PYTHON)
    usage = [subprocess.run([SANDBOX_PYTHON, "-I", "-S", str(path)], capture_output=True)
             for path in (made, RUNNER)]  # fmt: skip
    assert usage[0].returncode == usage[1].returncode != 0
    assert usage[0].stderr == usage[1].stderr and b"usage: runner.py" in usage[0].stderr


def test_a_failed_compile_falls_back_to_the_source(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert compiled_runner(tmp_path, str(tmp_path / "no-python")) == RUNNER
    assert list(tmp_path.iterdir()) == []
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "from source" in warning


async def test_a_local_sandbox_runs_the_compiled_runner_without_the_native_one(
    local_kit: Kit,
) -> None:
    """Where no C compiler is found (native_runner.py), sandboxes run this bytecode as pid 1."""
    provider = LocalProvider(
        local_kit.base / "sandboxes", local_kit.base / "images", start_timeout_s=20, native=False
    )
    sandbox = await provider.create(local_kit.spec())
    try:
        script = "tr '\\0' ' ' </proc/1/cmdline > /out/pid1.txt; grep CapEff /proc/1/status"
        state = await run_to_end(sandbox, f"{script} > /out/status.txt")
        pid_1 = (await sandbox.read_file("/out/pid1.txt")).decode()
        status = (await sandbox.read_file("/out/status.txt")).decode()
    finally:
        await sandbox.terminate()
        provider.close()
    assert state["exit_code"] == 0
    assert "/usr/bin/python3 -I -S /evalbot/runner.pyc --out /out" in pid_1
    assert status == "CapEff:\t0000000000000000\n"
