"""Providers under test, one "kit" each: how to make the provider, a built image, a world.

The conformance suite runs once per entry of KIT_MAKERS. To put another provider through it, add
a maker: it gets a fresh base folder and returns a factory of provider instances, all over the same
state, so `attach` can be tested from a fresh instance.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workflows.providers.base import (
    ResourceLimits,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
)
from workflows.providers.local import LocalProvider, host_problem
from workflows.providers.local.cgroups import CGROUP_ROOT
from workflows.providers.process import ProcessProvider

REPO_ROOT = Path(__file__).resolve().parents[3]
FAKE_AGENTS = REPO_ROOT / "tests" / "fakes" / "agents"
STATE = "/out/.state.json"

ProviderFactory = Callable[[], SandboxProvider]
KitMaker = Callable[[Path], ProviderFactory]


def _local(base: Path) -> ProviderFactory:
    return lambda: LocalProvider(base / "sandboxes", base / "images", start_timeout_s=20)


def _process(base: Path) -> ProviderFactory:
    return lambda: ProcessProvider(base / "sandboxes", base / "images", allowed=True)


def _modal(base: Path) -> ProviderFactory:
    """The `modal` provider on the real `modal` SDK, talking to the session's Modal test server
    (tests/fakes/modal_server: the `modal_server` fixture must be running)."""
    import modal

    from workflows.providers.modal import ModalConfig, ModalProvider

    def make() -> SandboxProvider:
        config = ModalConfig(app_name="evalbot-tests", spool_dir=base / "spool")
        return ModalProvider(modal, config)

    return make


KIT_MAKERS: dict[str, KitMaker] = {"local": _local, "process": _process, "modal": _modal}


def skip_reason(name: str) -> str | None:
    if name == "local":
        return host_problem(CGROUP_ROOT)
    if name == "modal":
        from tests.fakes.modal_server.fixture import host_problem as modal_server_problem

        return modal_server_problem()
    return None


@dataclass
class Kit:
    name: str
    base: Path
    make: ProviderFactory
    repo: Path
    image: str
    world: Path
    host_processes: bool = True  # the sandbox's processes are processes of this machine
    provider: SandboxProvider = field(init=False)

    def __post_init__(self) -> None:
        self.provider = self.make()

    def spec(self, run_id: str = "exp/case/arm/0", **limits: Any) -> SandboxSpec:
        case = {"id": "case-1", "prompt": "What is 6 x 7?"}
        return SandboxSpec(
            run_id=run_id,
            image=self.image,
            world_dir=self.world,
            case_files={"case.json": json.dumps(case).encode(), "attachments/note.txt": b"note"},
            limits=ResourceLimits(**{"wall_timeout_s": 30, **limits}),
            env={"EVALBOT_TEST_SECRET": "s3cret-value"},
        )


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_agent_repo(path: Path) -> Path:
    """A git repository holding the fake agents (at agents/) and a trivial answering agent."""
    path.mkdir(parents=True)
    shutil.copytree(FAKE_AGENTS, path / "agents")
    (path / "answer.py").write_text(
        "import os, pathlib\n"
        "out = pathlib.Path(os.environ.get('EVALBOT_OUT_DIR', '/out'))\n"
        "case = pathlib.Path(os.environ.get('EVALBOT_CASE_DIR', '/case')) / 'case.json'\n"
        "(out / 'answer.md').write_text('42 for ' + case.read_text())\n"
        "print('answered')\n"
    )
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    git(path, "add", ".")
    git(path, "commit", "-qm", "agents")
    return path


def make_world(path: Path) -> Path:
    (path / "docs").mkdir(parents=True)
    (path / "docs" / "contract.txt").write_text("Supply Agreement: consent required.\n")
    (path / "docs" / "memo.txt").write_text("privileged memo\n")
    (path / "records.csv").write_text("id,name\n1,Acme\n")
    return path


def tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


async def wait_state(sandbox: Sandbox, timeout_s: float = 30) -> dict[str, Any]:
    """Poll the state file until the runner says finished."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = json.loads(await sandbox.read_file(STATE))
        if state["status"] == "finished":
            return dict(state)
        await asyncio.sleep(0.02)
    raise AssertionError(f"the runner did not finish within {timeout_s} s")


async def run_to_end(sandbox: Sandbox, command: str, timeout_s: float = 30) -> dict[str, Any]:
    await sandbox.start(command)
    return await wait_state(sandbox, timeout_s)


def host_pids_matching(marker: str) -> list[int]:
    """Host processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(entry.name))
    return found
