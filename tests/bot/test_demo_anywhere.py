"""`evalbot demo` from a folder that is not the repository (the sample agent, world and dataset
ship with the package), and on a simulated cgroup v2 host: a private mount namespace whose
/sys/fs/cgroup is a cgroup2 mount offering none of the memory, pids and cpu controllers, where the
local provider must fall into no-cgroup mode, say so in one line, and still score every cell.

A reduced demo (`--trials 1`, two cases of `bar`: 4 cells instead of 192, and 10 for main's
history) keeps each test to about a minute; the full `make demo` runs the same code path with more
cells."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.demo import demo_matter
from workflows.providers.local import host_problem

pytestmark = [
    pytest.mark.skipif(
        host_problem(Path("/sys/fs/cgroup")) is not None, reason="needs a host that runs `local`"
    ),
    pytest.mark.timeout(300),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SMALL_DEMO = ["--trials", "1", "--case", "automatic-renewals", "--case", "coc-consent-required"]
# Inside a fresh mount namespace: a cgroup2 mount over /sys/fs/cgroup, then the command.
ON_CGROUP2 = 'mount -t cgroup2 none /sys/fs/cgroup && exec "$@"'


def clean_env() -> dict[str, str]:
    """No EVALBOT_* from the caller (data dir and catalog default to the current folder); our
    worktree first on the import path, as an installed evalbot would be."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EVALBOT_")}
    return env | {"PYTHONPATH": str(REPO_ROOT)}


def run_in(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=240, check=False
    )


def results_in(folder: Path) -> dict[str, Any]:
    (results,) = folder.glob("demo-*/results.json")
    return dict(json.loads(results.read_text()))


def test_the_demo_matter_ships_inside_the_package() -> None:
    matter = demo_matter()
    assert (matter.catalog_root / "datasets" / "bar" / "dataset.toml").is_file()
    assert (matter.catalog_root / "worlds" / "acme-acquisition" / "world.toml").is_file()
    assert (matter.agent / "legal_agent" / "cli.py").is_file()
    assert not matter.agent.is_symlink()  # sandboxes copy the world with `cp -a`: real folders


def test_demo_runs_from_any_folder_and_writes_there(tmp_path: Path) -> None:
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    done = run_in(elsewhere, [sys.executable, "-m", "bot", "demo", *SMALL_DEMO, "--out", "out"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No such file or directory" not in done.stderr
    results = results_in(elsewhere / "out")
    assert results["progress"] == {
        "cells_done": 4, "cells_total": 4, "complete": True, "by_status": {"scored": 4},
    }  # fmt: skip
    assert (elsewhere / ".evalbot" / "evalbot.db").is_file()  # state under the current folder
    history = [line for line in done.stderr.splitlines() if line.startswith("demo:   ")]
    assert len(history) == 3 and "(v0.1)" in history[2]  # main's history (bot/demo_history.py)
    assert (
        "EVALBOT_DASHBOARD_TOKEN=" in done.stdout
        and "/dashboard/datasets/bar/history" in done.stdout
    )


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root")
def test_demo_on_a_cgroup_v2_host_without_controllers_runs_in_no_cgroup_mode(
    tmp_path: Path,
) -> None:
    evalbot = [sys.executable, "-m", "bot"]
    namespace = ["unshare", "-m", "--propagation", "private", "sh", "-c", ON_CGROUP2, "sh"]

    doctor = run_in(tmp_path, [*namespace, *evalbot, "doctor", "--json"])
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert checks["cgroups"]["status"] == "warn"
    assert "v2, writable controllers: none -> no-cgroup mode" in checks["cgroups"]["detail"]

    done = run_in(tmp_path, [*namespace, *evalbot, "demo", *SMALL_DEMO, "--no-history"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    notices = [line for line in done.stderr.splitlines() if "no-cgroup mode" in line]
    assert len(notices) == 1 and notices[0].startswith("evalbot: notice: no-cgroup mode")
    assert "cgroup v2 controllers memory, pids, cpu are not available" in notices[0]
    results = results_in(tmp_path / "demo-output")
    assert results["progress"]["by_status"] == {"scored": 4}  # not blamed on the agent
    assert results["errors"] == [] and results["build_failures"] == []
    (report,) = (tmp_path / "demo-output").glob("demo-*/report.md")
    assert "sandboxes ran in no-cgroup mode (rlimits); weaker:" in report.read_text()
    assert os.path.ismount("/sys/fs/cgroup/memory")  # the host's own mounts are untouched
